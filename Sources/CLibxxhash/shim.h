#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif
