#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxhash.h>
#include <xxh_x86dispatch.h>
