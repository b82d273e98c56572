// XXH3_state_t's definition, for its size alone: a hash state is copied as
// bytes (what XXH3_copyState does) to go from one thread to another.
#define XXH_STATIC_LINKING_ONLY
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

/// Bytes in an XXH3_state_t, which Swift cannot import (its members are
/// aligned to 64 bytes).
static inline size_t courier_xxh3_state_size(void) { return sizeof(XXH3_state_t); }
