#ifndef COURIER_CJANSSONSHIM_H
#define COURIER_CJANSSONSHIM_H

#include <jansson.h>

/*
 * json_typeof, json_incref and json_decref are macros or static inline
 * functions with macro arguments in jansson.h; these wrappers give Swift a
 * plain function for each. JSON_REAL_PRECISION is a macro with an argument.
 */

json_type courier_json_typeof(const json_t *value);
void courier_json_decref(json_t *value);
json_t *courier_json_incref(json_t *value);
size_t courier_json_real_precision(int digits);

/* libc's memmem, which Swift's Glibc module does not declare: where the
   first `needle_length` bytes at `needle` first lie in the `haystack_length`
   bytes at `haystack`, or NULL. */
const void *courier_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length);

/*
 * json_loadb, with every block of the tree it makes (and of its lexer's
 * buffers) taken from an arena of the parse's own rather than from one
 * malloc each: a request's tree is a few dozen small blocks, each a malloc
 * and, when the tree is dropped, a free. The tree lives until
 * courier_json_parsed_drop, which frees the arena at once instead of
 * walking the tree; it must not be kept past that, nor be given to a jansson
 * function that could take a reference to it. Under a sanitizer each block
 * is a malloc of its own, so that the sanitizer still sees each, and the
 * drop is json_decref.
 */
typedef struct {
    /* The tree, or NULL when the text was not JSON. */
    json_t *root;
    /* Where the tree lives; NULL under a sanitizer, or when there was no
       memory for an arena and the tree's blocks are malloc's. */
    void *arena;
} courier_json_parsed;

courier_json_parsed courier_json_loadb_arena(const char *buffer, size_t length, size_t flags, json_error_t *error);
void courier_json_parsed_drop(courier_json_parsed parsed);

/*
 * courier_json_loadb_arena of a long array (a JSON-RPC batch) made on two
 * threads: the text is cut at a comma between two objects near its middle,
 * `[a, b, c, d]` into `[a, b]` and `[c, d]`, and the second is parsed on a
 * thread of its own while the calling thread parses the first; the two
 * trees are then one array. When both halves are arrays of at least one
 * element, the whole is one too, of their elements in order, whatever the
 * comma was inside of. Otherwise (and for a text that is short, no array,
 * or has no such comma, or when a thread or memory is lacking) the root is
 * NULL and nothing is kept: the caller parses the whole, which gives the
 * error the text deserves.
 */
courier_json_parsed courier_json_loadb_arena_halves(const char *buffer, size_t length, size_t flags);

/*
 * Lends jansson `size` bytes at `buffer` (aligned to 16) for what the
 * calling thread makes next: a value made, dumped and dropped at once
 * takes its blocks (the value's, and the table json_dumpb keeps of the
 * values it is inside) from there rather than from a malloc and a free
 * each, and what does not fit from blocks freed at the end. Nothing made
 * meanwhile may be kept past courier_json_scratch_end, which is given what
 * begin returned. Returns 0, lending nothing, while the thread parses or
 * lends already, and always under a sanitizer.
 */
int courier_json_scratch_begin(void *buffer, size_t size);
void courier_json_scratch_end(int began, void *buffer);

#endif
