#ifndef COURIER_THREAD_SHIM_H
#define COURIER_THREAD_SHIM_H

/// Names the calling thread (at most 15 bytes are kept), as `top -H`, perf
/// and debuggers show it. glibc declares pthread_setname_np only under
/// _GNU_SOURCE, which Swift's Glibc module does not define.
void courier_name_this_thread(const char *name);

#endif
