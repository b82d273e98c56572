#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include "CThreadShim.h"

void courier_name_this_thread(const char *name) {
    char shown[16];
    strncpy(shown, name, sizeof shown - 1);
    shown[sizeof shown - 1] = '\0';
#if defined(__APPLE__)
    pthread_setname_np(shown);
#else
    pthread_setname_np(pthread_self(), shown);
#endif
}
