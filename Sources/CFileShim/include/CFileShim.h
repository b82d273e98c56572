#ifndef COURIER_FILE_SHIM_H
#define COURIER_FILE_SHIM_H

/// 1 when the open file or directory `fd` is on a file system held in
/// memory (tmpfs, ramfs), 0 when it is on another, -1 when `fstatfs` fails.
/// `sys/vfs.h` and `linux/magic.h` are not among the Glibc module's headers.
int courier_file_system_is_in_memory(int fd);

#endif
