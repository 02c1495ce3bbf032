/*
 * heaphook/bootstrap.h — the bootstrap arena and the next allocator, for libraries that
 * interpose the malloc family themselves (heaptrack, agent, rtcheck) as the core does for
 * every backend. Target heaphook::bootstrap (ELF only); the core's own interposition uses the
 * same arena.
 *
 * The arena. Allocations made before the library can serve them (dlsym's error buffer while
 * the next allocator is being looked up, the loader's and other constructors' early calls) are
 * served from one static array of HEAPHOOK_BOOTSTRAP_CAPACITY bytes with an atomic bump
 * pointer. Each library that links it has its own arena (every symbol here is hidden). The
 * contract:
 *   - heaphook_bootstrap_alloc(size, align) never allocates, never locks and never calls into
 *     the hooked path, so it may be called from inside dlsym, from a constructor, or from a
 *     hook that re-entered itself. align 0 or 1 means 16; any power of two is honoured. It
 *     returns NULL with errno ENOMEM when the arena cannot serve the request: the caller
 *     decides whether that is a failed allocation (the interposers) or fatal (the core).
 *   - The memory is zero-filled: nothing in the arena is ever reused, and it lives in .bss.
 *     So calloc may be served by it without a memset.
 *   - heaphook_bootstrap_owns(ptr) tells an arena block by its address alone (one compare,
 *     inline: every free asks it). free() of an arena block must do nothing, and realloc()
 *     must move it out with a copy of heaphook_bootstrap_block_size(ptr) bytes at most: no
 *     allocator after this one knows the block.
 *   - heaphook_bootstrap_block_size(ptr) is the block's usable size (the request rounded up to
 *     16), what malloc_usable_size answers for it.
 *   - heaphook_bootstrap_range(&lo, &hi) is the part handed out so far: its blocks belong to
 *     the program, so a leak checker treats it as a root.
 *
 * The next allocator. heaphook_next is the malloc family that dlsym(RTLD_NEXT) finds after
 * the library that links this (so LD_PRELOAD="libheaphook_heaptrack.so libheaphook_tlsf.so"
 * traces TLSF). The contract:
 *   - heaphook_next_ready(library) is true once heaphook_next may be called. Its fast path is
 *     one acquire load, inline. The first call resolves the table; while it does, dlsym may
 *     call the hooks again, and any call on this or another thread finds it not ready and
 *     must use the arena: nobody waits for the lookup, so no lock order with the loader's lock
 *     can arise.
 *   - malloc, free, calloc and realloc are required: without them the program stops before
 *     doing anything else, with one line on fd 2 naming `library` and what to preload
 *     (status 127, as the loader's own "cannot open shared object"). The others are NULL when
 *     the process has none (an old libc without reallocarray, a backend without pvalloc).
 *   - heaphook_next_forward_to(table) replaces the lookup: a library installed into a running
 *     process by GOT patching forwards to the functions the patches replaced, not to what
 *     RTLD_NEXT finds from where it was loaded. The table is ready from then on.
 */
#ifndef HEAPHOOK_BOOTSTRAP_H
#define HEAPHOOK_BOOTSTRAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEAPHOOK_HIDDEN __attribute__((visibility("hidden")))

/* ---- The arena ----------------------------------------------------------------------------- */

#define HEAPHOOK_BOOTSTRAP_CAPACITY (256u * 1024u)

HEAPHOOK_HIDDEN void *heaphook_bootstrap_alloc(size_t size, size_t align);
HEAPHOOK_HIDDEN size_t heaphook_bootstrap_block_size(const void *ptr);
HEAPHOOK_HIDDEN void heaphook_bootstrap_range(uintptr_t *lo, uintptr_t *hi);
/* Bytes handed out so far (for start-up logs and malloc_stats). */
HEAPHOOK_HIDDEN size_t heaphook_bootstrap_used_bytes(void);

/* The array itself, for the inline owns() below. */
extern HEAPHOOK_HIDDEN unsigned char heaphook_bootstrap_arena[HEAPHOOK_BOOTSTRAP_CAPACITY];
static inline bool heaphook_bootstrap_owns(const void *ptr) {
    return (uintptr_t)ptr - (uintptr_t)heaphook_bootstrap_arena < HEAPHOOK_BOOTSTRAP_CAPACITY;
}

/* ---- The next allocator -------------------------------------------------------------------- */

typedef struct heaphook_next_allocator {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void *);
} heaphook_next_allocator;

extern HEAPHOOK_HIDDEN heaphook_next_allocator heaphook_next;

enum heaphook_next_state_value {
    HEAPHOOK_NEXT_UNRESOLVED = 0,
    HEAPHOOK_NEXT_RESOLVING = 1, /* one thread is inside dlsym */
    HEAPHOOK_NEXT_READY = 2,     /* heaphook_next may be called by everyone */
};
extern HEAPHOOK_HIDDEN _Atomic int heaphook_next_state;

/* The slow path of heaphook_next_ready(): resolves the table if nobody has started to. */
HEAPHOOK_HIDDEN bool heaphook_next_resolve(const char *library);

static inline bool heaphook_next_ready(const char *library) {
    if (__builtin_expect(
            atomic_load_explicit(&heaphook_next_state, memory_order_acquire) == HEAPHOOK_NEXT_READY,
            1))
        return true;
    return heaphook_next_resolve(library);
}

HEAPHOOK_HIDDEN void heaphook_next_forward_to(const heaphook_next_allocator *table);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_BOOTSTRAP_H */
