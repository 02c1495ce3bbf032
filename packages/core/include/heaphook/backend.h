/*
 * heaphook/backend.h — the plain C form of the backend contract.
 *
 * A backend is a set of functions the core calls after it has normalised the arguments of the
 * malloc family the way glibc does. A C backend defines heaphook_backend_get(); a C++ backend
 * derives from heaphook::GlobalAllocator (heaphook/heaphook.hpp) and the core's C++ adapter
 * defines heaphook_backend_get() for it. Exactly one of the two per preload library.
 *
 * What the core guarantees to every backend function:
 *   - 0 < size <= PTRDIFF_MAX (malloc(0) and friends ask for 1 byte; larger requests fail
 *     with ENOMEM before reaching the backend, as in glibc), so a backend may add a header
 *     and round up without checking for overflow;
 *   - align is 1, meaning "the default alignment", or a power of two that is a multiple of
 *     sizeof(void*), greater than HEAPHOOK_DEFAULT_ALIGNMENT and at most PTRDIFF_MAX;
 *   - ptr is non-null and was returned by this backend (pointers from the bootstrap arena
 *     never reach the backend);
 *   - calloc's count * size did not overflow; realloc's new_size > 0 (realloc(p, 0) frees).
 * What every backend must do:
 *   - return memory aligned to at least HEAPHOOK_DEFAULT_ALIGNMENT (16, glibc's guarantee on
 *     x86-64 and aarch64) when align == 1, and to align otherwise;
 *   - return NULL when it cannot serve a request (the core sets errno = ENOMEM);
 *   - be thread safe, and never call stdio or anything that may take a lock held across fork;
 *   - if it takes locks, take all of them in fork_prepare and release / re-initialise them in
 *     fork_parent / fork_child.
 * The backend may call malloc itself (for example from its initialisation): the core serves
 * such calls from its bootstrap arena while the backend is being initialised.
 */
#ifndef HEAPHOOK_BACKEND_H
#define HEAPHOOK_BACKEND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a function of a backend's own API to be exported from its preload library (list it
 * in heaphook_add_backend(... EXPORTS <symbol> ...) too): preload libraries are compiled with
 * hidden visibility and export only the malloc family and heaphook/core.h otherwise. */
#define HEAPHOOK_EXPORT __attribute__((visibility("default")))

/* Marks a large zero-initialised static array of which a process touches little or nothing
 * (a reserve arena, a table sized for the worst case, a control structure whose lists are
 * mostly unused). On x86-64 it goes to .lbss, which the linker places after .bss: the small
 * state every process does touch (flags, counters, locks) then shares a page or two with
 * .data instead of being spread between big arrays, one page fault each in every process that
 * loads the library. Elsewhere the array stays in .bss. */
#if defined(__x86_64__)
#define HEAPHOOK_LARGE_STORAGE __attribute__((section(".lbss.heaphook")))
#else
#define HEAPHOOK_LARGE_STORAGE
#endif

/* What init returns when the backend cannot be initialised yet (the C++ adapter of a
 * CXX_STDLIB backend, until the library's own static constructors have run). */
#define HEAPHOOK_INIT_LATER 1

/* The alignment of every block returned for align == 1: alignof(max_align_t) on x86-64. */
#define HEAPHOOK_DEFAULT_ALIGNMENT 16

/* Figures a backend may report; they feed mallinfo2, mallinfo and malloc_stats.
 * A field the backend does not know stays 0. */
typedef struct heaphook_stats {
    size_t pool_bytes;         /* bytes obtained from the system and managed by the backend */
    size_t used_bytes;         /* bytes in blocks currently handed out, headers included */
    size_t free_bytes;         /* bytes in free blocks inside the pool */
    size_t used_blocks;        /* blocks currently handed out */
    size_t free_blocks;        /* free blocks inside the pool */
    size_t largest_free_block; /* bytes of the largest block a request could get now */
    size_t mmapped_bytes;      /* bytes in blocks mapped individually (outside the pool) */
    size_t mmapped_blocks;     /* number of such blocks */
    size_t growth_count;       /* how many times the pool grew after start-up */
    size_t peak_used_bytes;    /* high-water mark of used_bytes, when the backend counts it */
    size_t largest_request;    /* the largest size asked for, when the backend counts it */
} heaphook_stats;

/* The backend's entry points. Required: name, alloc, dealloc, get_block_size.
 * Every other member may be NULL, and the core then uses the default described beside it. */
typedef struct heaphook_backend {
    /* Short name, as in libheaphook_<name>.so; shown in logs. */
    const char *name;
    /* Called once, before the first alloc, with the core's bootstrap arena serving any malloc
     * it makes. Returns 0, or -1 to refuse (the core then stops the program with a message),
     * or HEAPHOOK_INIT_LATER: not yet (the arena serves the call, and the next malloc-family
     * call asks again). Default: nothing. */
    int (*init)(void);
    void *(*alloc)(size_t size, size_t align);
    void (*dealloc)(void *ptr);
    /* The usable size of a block: at least what was asked, what malloc_usable_size returns. */
    size_t (*get_block_size)(void *ptr);
    /* Default: alloc(size, 1) then memset. */
    void *(*alloc_zeroed)(size_t size);
    /* Must keep the contents up to min(old, new_size). On failure returns NULL and leaves
     * ptr untouched. The result needs only the default alignment: like glibc, a block that
     * moves need not keep a larger alignment it was allocated with (a backend that resizes
     * in place keeps it, which is better).
     * Default: alloc, memcpy of min(get_block_size(ptr), new_size), dealloc. */
    void *(*realloc)(void *ptr, size_t new_size);
    /* Fork: prepare takes every lock of the backend, parent releases them, child
     * re-initialises them (the child has one thread). Default: nothing. */
    void (*fork_prepare)(void);
    void (*fork_parent)(void);
    void (*fork_child)(void);
    /* Fills *out and returns 0, or returns -1 when the backend keeps no statistics. */
    int (*get_stats)(heaphook_stats *out);
    /* mallopt(param, value): return 1 when accepted, 0 when refused. Default: 1 (ignored). */
    int (*mallopt)(int param, int value);
    /* malloc_trim(pad): return 1 when memory was released to the system. Default: 0. */
    int (*trim)(size_t pad);
    /* Writes a human-readable statistics report to fd (write(2) only). Default: the core
     * prints the heaphook_stats figures. */
    void (*print_stats)(int fd);
    /* Non-zero when dealloc never changes errno (it makes no system call that can fail, or
     * keeps errno around the ones it makes, as heaphook_os_* calls do): free then calls it
     * directly, where it otherwise saves and restores errno around it, as glibc's free keeps
     * it (about 10 instructions and a call through the PLT on every free). Default: 0. */
    int dealloc_keeps_errno;
    /* Non-zero when alloc sets errno to ENOMEM itself whenever it returns NULL: malloc then
     * jumps straight to it for every request from 1 byte to the core's limit, where it
     * otherwise calls it through the core's checks and sets errno after it (about 12
     * instructions on every malloc). Default: 0. */
    int alloc_sets_errno;
} heaphook_backend;

/* Defined by the backend (or by the core's C++ adapter for a GlobalAllocator backend).
 * Called once by the core; the returned table must stay valid for the life of the process. */
const heaphook_backend *heaphook_backend_get(void);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_BACKEND_H */
