/* For memmem. */
#define _GNU_SOURCE

#include "CJanssonShim.h"

#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

json_type courier_json_typeof(const json_t *value) { return json_typeof(value); }
void courier_json_decref(json_t *value) { json_decref(value); }
size_t courier_json_real_precision(int digits) { return JSON_REAL_PRECISION(digits); }
json_t *courier_json_incref(json_t *value) { return json_incref(value); }

const void *courier_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length) {
    return memmem(haystack, haystack_length, needle, needle_length);
}

/* A text read as pieces one after another, e.g. `[`, a span of the
   caller's buffer, and `]`, without copying them together. */
struct text_pieces {
    const char *bytes[3];
    size_t lengths[3];
    size_t piece;
    size_t offset;
};

static size_t read_pieces(void *buffer, size_t size, void *data) {
    struct text_pieces *text = data;
    size_t written = 0;
    while (written < size && text->piece < 3) {
        size_t left = text->lengths[text->piece] - text->offset;
        if (left == 0) {
            text->piece++;
            text->offset = 0;
            continue;
        }
        size_t count = left < size - written ? left : size - written;
        memcpy((char *)buffer + written, text->bytes[text->piece] + text->offset, count);
        written += count;
        text->offset += count;
    }
    return written;
}

/* json_loadb of the `length` bytes at `buffer`, or of `pieces` when given. */
static json_t *load(const char *buffer, size_t length, struct text_pieces *pieces, size_t flags, json_error_t *error) {
    return pieces != NULL ? json_load_callback(read_pieces, pieces, flags, error) : json_loadb(buffer, length, flags, error);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define COURIER_JSON_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COURIER_JSON_SANITIZED 1
#endif

#ifdef COURIER_JSON_SANITIZED

static courier_json_parsed load_arena(const char *buffer, size_t length, struct text_pieces *pieces, size_t flags,
                                      json_error_t *error) {
    courier_json_parsed parsed = {load(buffer, length, pieces, flags, error), NULL};
    return parsed;
}

void courier_json_parsed_drop(courier_json_parsed parsed) {
    if (parsed.root != NULL) json_decref(parsed.root);
}

int courier_json_scratch_begin(void *buffer, size_t size) {
    (void)buffer;
    (void)size;
    return 0;
}

void courier_json_scratch_end(int began, void *buffer) {
    (void)began;
    (void)buffer;
}

/* The tail's elements join the head array; the tail's root goes, either
   way. */
static int courier_json_parsed_join(courier_json_parsed *head, courier_json_parsed tail) {
    int joined = json_array_extend(head->root, tail.root) == 0;
    json_decref(tail.root);
    return joined;
}

#else

/* One block of memory of an arena; an arena's chunks form a list, newest
   first. */
struct arena_chunk {
    struct arena_chunk *previous;
    size_t size;
    size_t used;
    /* The bytes mapped for the chunk, header included, when it is a
       mapping of its own (see arena_chunk_make); 0 when it is malloc's. */
    size_t mapped;
    _Alignas(16) unsigned char bytes[];
};

/* A chunk of at least this many bytes is mapped in whole huge pages. */
enum { arena_huge_threshold = 512 * 1024, arena_huge_page = 2 * 1024 * 1024 };

/* `length` bytes (a multiple of arena_huge_page) mapped at an address
   aligned to arena_huge_page and marked for transparent huge pages; NULL
   when no mapping can be made. Fresh memory costs a page fault per page
   touched, and the tree of a long batch fills hundreds of pages as it is
   parsed: in huge pages it takes one fault for each 2 MiB. Where the
   kernel gives no huge page, the mapping is in small pages, as malloc's
   would be. */
static void *arena_map(size_t length) {
    if (length > SIZE_MAX - arena_huge_page) return NULL;
    unsigned char *mapped = mmap(NULL, length + arena_huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return NULL;
    uintptr_t address = (uintptr_t)mapped;
    uintptr_t aligned = (address + arena_huge_page - 1) & ~(uintptr_t)(arena_huge_page - 1);
    size_t head = aligned - address;
    if (head > 0) munmap(mapped, head);
    size_t tail = arena_huge_page - head;
    if (tail > 0) munmap((unsigned char *)aligned + length, tail);
#ifdef MADV_HUGEPAGE
    madvise((void *)aligned, length, MADV_HUGEPAGE);
#endif
    return (void *)aligned;
}

static void arena_chunk_free(struct arena_chunk *chunk) {
    if (chunk->mapped > 0) {
        munmap(chunk, chunk->mapped);
    } else {
        free(chunk);
    }
}

/* The newest chunk of the arena the calling thread parses into; NULL when
   it does not parse, and jansson's blocks are malloc's. */
static _Thread_local struct arena_chunk *arena_current;

/* As malloc aligns: enough for any jansson block. */
enum { arena_alignment = 16 };

/* A chunk of at least `size` bytes: a large one mapped in whole huge
   pages (its size then all that they hold), a small one malloc's. */
static struct arena_chunk *arena_chunk_make(size_t size, struct arena_chunk *previous) {
    if (size > SIZE_MAX - sizeof(struct arena_chunk) - arena_huge_page) return NULL;
    size_t total = sizeof(struct arena_chunk) + size;
    struct arena_chunk *chunk = NULL;
    size_t mapped = 0;
    if (total >= arena_huge_threshold) {
        mapped = (total + arena_huge_page - 1) & ~(size_t)(arena_huge_page - 1);
        chunk = arena_map(mapped);
        if (chunk == NULL) mapped = 0;
    }
    if (chunk == NULL) chunk = malloc(total);
    if (chunk == NULL) return NULL;
    chunk->previous = previous;
    chunk->size = mapped > 0 ? mapped - sizeof(struct arena_chunk) : size;
    chunk->used = 0;
    chunk->mapped = mapped;
    return chunk;
}

/* A new chunk at least twice the last keeps the chunks few however large
   the tree grows. */
static void *arena_allocate(size_t size) {
    size_t rounded = (size + arena_alignment - 1) & ~(size_t)(arena_alignment - 1);
    if (rounded < size) return NULL;
    struct arena_chunk *chunk = arena_current;
    if (chunk->size - chunk->used < rounded) {
        size_t next = chunk->size <= SIZE_MAX / 2 ? chunk->size * 2 : SIZE_MAX;
        struct arena_chunk *grown = arena_chunk_make(next > rounded ? next : rounded, chunk);
        if (grown == NULL) return NULL;
        arena_current = grown;
        chunk = grown;
    }
    void *block = chunk->bytes + chunk->used;
    chunk->used += rounded;
    return block;
}

static int arena_owns(const void *pointer) {
    const unsigned char *byte = pointer;
    for (const struct arena_chunk *chunk = arena_current; chunk != NULL; chunk = chunk->previous) {
        if (byte >= chunk->bytes && byte < chunk->bytes + chunk->size) return 1;
    }
    return 0;
}

static void *courier_json_malloc(size_t size) {
    return arena_current != NULL ? arena_allocate(size) : malloc(size);
}

/* A block of the arena goes with the arena: jansson frees some while it
   parses (a lexer buffer it outgrew, a member a repeated key replaced). */
static void courier_json_free(void *pointer) {
    if (pointer == NULL || (arena_current != NULL && arena_owns(pointer))) return;
    free(pointer);
}

/* Before any jansson call, as json_set_alloc_funcs asks. */
__attribute__((constructor)) static void courier_json_install_allocator(void) {
    json_set_alloc_funcs(courier_json_malloc, courier_json_free);
}

static courier_json_parsed load_arena(const char *buffer, size_t length, struct text_pieces *pieces, size_t flags,
                                      json_error_t *error) {
    /* A request's tree takes a few times the bytes of its text (more for a
       text of many small values, which the chunks after the first take). */
    size_t first = length <= (SIZE_MAX - 4096) / 4 ? length * 4 + 4096 : SIZE_MAX / 2;
    struct arena_chunk *chunk = arena_chunk_make(first, NULL);
    if (chunk == NULL) {
        courier_json_parsed parsed = {load(buffer, length, pieces, flags, error), NULL};
        return parsed;
    }
    arena_current = chunk;
    json_t *root = load(buffer, length, pieces, flags, error);
    courier_json_parsed parsed = {root, arena_current};
    arena_current = NULL;
    if (root == NULL) {
        courier_json_parsed_drop(parsed);
        parsed.arena = NULL;
    }
    return parsed;
}

/* The lent bytes become the arena's first chunk; chunks it grows into are
   freed at the end. */
int courier_json_scratch_begin(void *buffer, size_t size) {
    if (arena_current != NULL || buffer == NULL || size <= sizeof(struct arena_chunk)) return 0;
    struct arena_chunk *chunk = buffer;
    chunk->previous = NULL;
    chunk->size = size - sizeof(struct arena_chunk);
    chunk->used = 0;
    chunk->mapped = 0;
    arena_current = chunk;
    return 1;
}

void courier_json_scratch_end(int began, void *buffer) {
    if (!began) return;
    struct arena_chunk *chunk = arena_current;
    while (chunk != NULL && (void *)chunk != buffer) {
        struct arena_chunk *previous = chunk->previous;
        arena_chunk_free(chunk);
        chunk = previous;
    }
    arena_current = NULL;
}

/* The tail's elements join the head array, the head's arena taking the
   grown element table, and the tail's arena goes with the head's. The tail
   is the head's, or dropped, either way. */
static int courier_json_parsed_join(courier_json_parsed *head, courier_json_parsed tail) {
    if (head->arena == NULL || tail.arena == NULL) {
        courier_json_parsed_drop(tail);
        return 0;
    }
    arena_current = head->arena;
    int joined = json_array_extend(head->root, tail.root) == 0;
    head->arena = arena_current;
    arena_current = NULL;
    struct arena_chunk *oldest = head->arena;
    while (oldest->previous != NULL) oldest = oldest->previous;
    oldest->previous = tail.arena;
    return joined;
}

void courier_json_parsed_drop(courier_json_parsed parsed) {
    struct arena_chunk *chunk = parsed.arena;
    if (chunk == NULL && parsed.root != NULL) json_decref(parsed.root);
    while (chunk != NULL) {
        struct arena_chunk *previous = chunk->previous;
        arena_chunk_free(chunk);
        chunk = previous;
    }
}

#endif

courier_json_parsed courier_json_loadb_arena(const char *buffer, size_t length, size_t flags, json_error_t *error) {
    return load_arena(buffer, length, NULL, flags, error);
}

/* Below this many bytes a second thread costs more than the half parse it
   saves. */
enum { halves_threshold = 32 * 1024 };

struct half_parse {
    struct text_pieces text;
    size_t length;
    size_t flags;
    json_error_t error;
    courier_json_parsed parsed;
};

static void *courier_json_parse_half(void *argument) {
    struct half_parse *half = argument;
    half->parsed = load_arena(NULL, half->length, &half->text, half->flags, &half->error);
    return NULL;
}

static int is_json_space(char byte) { return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r'; }

/* A comma after the middle with `}` before it and `{` after it, spaces
   aside; 0 when there is none. */
static size_t courier_json_middle_comma(const char *buffer, size_t length) {
    for (size_t index = length / 2; index < length; index++) {
        const char *found = memchr(buffer + index, ',', length - index);
        if (found == NULL) return 0;
        index = (size_t)(found - buffer);
        size_t before = index;
        while (before > 0 && is_json_space(buffer[before - 1])) before--;
        size_t after = index + 1;
        while (after < length && is_json_space(buffer[after])) after++;
        if (before > 0 && buffer[before - 1] == '}' && after < length && buffer[after] == '{') return index;
    }
    return 0;
}

courier_json_parsed courier_json_loadb_arena_halves(const char *buffer, size_t length, size_t flags) {
    courier_json_parsed none = {NULL, NULL};
    if (buffer == NULL || length < halves_threshold) return none;
    size_t first = 0;
    while (first < length && is_json_space(buffer[first])) first++;
    if (first == length || buffer[first] != '[') return none;
    size_t comma = courier_json_middle_comma(buffer, length);
    if (comma == 0) return none;

    /* `[a, b` + `]` here, and `[` + ` c, d]` on a thread of its own. */
    struct half_parse head = {{{buffer, "]", ""}, {comma, 1, 0}, 0, 0}, comma + 1, flags};
    struct half_parse tail = {{{"[", buffer + comma + 1, ""}, {1, length - comma - 1, 0}, 0, 0}, length - comma, flags};
    pthread_t thread;
    if (pthread_create(&thread, NULL, courier_json_parse_half, &tail) != 0) return none;
    courier_json_parse_half(&head);
    pthread_join(thread, NULL);

    int arrays = head.parsed.root != NULL && tail.parsed.root != NULL && json_is_array(head.parsed.root) &&
                 json_is_array(tail.parsed.root) && json_array_size(head.parsed.root) > 0 &&
                 json_array_size(tail.parsed.root) > 0;
    if (!arrays) {
        courier_json_parsed_drop(head.parsed);
        courier_json_parsed_drop(tail.parsed);
        return none;
    }
    if (!courier_json_parsed_join(&head.parsed, tail.parsed)) {
        courier_json_parsed_drop(head.parsed);
        return none;
    }
    return head.parsed;
}
