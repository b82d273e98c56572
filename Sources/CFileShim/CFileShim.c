#include "CFileShim.h"

#if defined(__linux__)
#include <linux/magic.h>
#include <sys/vfs.h>

int courier_file_system_is_in_memory(int fd) {
    struct statfs about;
    if (fstatfs(fd, &about) != 0) return -1;
    return about.f_type == TMPFS_MAGIC || about.f_type == RAMFS_MAGIC;
}
#else
int courier_file_system_is_in_memory(int fd) {
    (void)fd;
    return 0;
}
#endif
