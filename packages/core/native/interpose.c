/*
 * interpose.c — the malloc family, as glibc defines it, forwarded to the backend.
 *
 * The preload library exports these names, so the dynamic linker binds every program and
 * library (libc included) to them. Each one normalises its arguments and errors exactly the
 * way glibc does, so that the backend sees only the cases backend.h promises:
 *
 *   size        0 becomes 1 (a unique pointer, as glibc); above PTRDIFF_MAX fails with ENOMEM
 *   align       <= 16 becomes 1 ("default"); otherwise a power of two, multiple of sizeof(void*)
 *   ptr         never NULL, never a bootstrap-arena pointer
 *   failures    any NULL from the backend sets errno = ENOMEM
 *
 * The exported functions are thin: the work is in the static hh_* functions, which call each
 * other directly. (Calling the exported malloc from realloc would go through the PLT and could
 * land in another preloaded library's malloc.)
 *
 * malloc's and free's common paths call the backend through its table (hh_backend), or, in a
 * library built with the backend's DIRECT entry points (heaphook_add_backend's DIRECT <prefix>:
 * HEAPHOOK_DIRECT_ALLOC and HEAPHOOK_DIRECT_DEALLOC name <prefix>_alloc and <prefix>_dealloc),
 * by name: this file is then compiled into the backend's library with link-time optimisation, so
 * the backend's own fast path is inlined into malloc and free (no indirect jump, the alignment
 * argument folded). Those paths are taken only while the table holds the very same functions
 * (hh_interpose_direct_*_matches, asked once by init).
 *
 * Contents:
 *   1. Internal allocation paths
 *   2. malloc, free, calloc, realloc, reallocarray
 *   3. The aligned family: posix_memalign, memalign, aligned_alloc, valloc, pvalloc
 *   4. malloc_usable_size
 * The statistics calls (mallinfo2, malloc_stats, ...) are in stats.c.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "heaphook/os.h"
#include "internal.h"

/* ---- 1. Internal allocation paths --------------------------------------------------------- */

/* The backend's entry points malloc's and free's common paths call (see above), and the
 * attribute that inlines them there. */
#if defined(HEAPHOOK_DIRECT_ALLOC) && defined(HEAPHOOK_DIRECT_DEALLOC)
__attribute__((visibility("hidden"))) void *HEAPHOOK_DIRECT_ALLOC(size_t size, size_t align);
__attribute__((visibility("hidden"))) void HEAPHOOK_DIRECT_DEALLOC(void *ptr);
#define HH_COMMON_ALLOC HEAPHOOK_DIRECT_ALLOC
#define HH_COMMON_DEALLOC HEAPHOOK_DIRECT_DEALLOC
#define HH_INLINES_BACKEND __attribute__((flatten))
#elif defined(HEAPHOOK_DIRECT_ALLOC) || defined(HEAPHOOK_DIRECT_DEALLOC)
#error "HEAPHOOK_DIRECT_ALLOC and HEAPHOOK_DIRECT_DEALLOC go together (heaphook_add_backend)"
#else
#define HH_COMMON_ALLOC hh_backend.alloc
#define HH_COMMON_DEALLOC hh_backend.dealloc
#define HH_INLINES_BACKEND
#endif

bool hh_interpose_direct_alloc_matches(void) {
    return hh_backend.alloc == HH_COMMON_ALLOC;
}

bool hh_interpose_direct_dealloc_matches(void) {
    return hh_backend.dealloc == HH_COMMON_DEALLOC;
}

/* The alignment argument the backend gets for a requested alignment. */
static inline size_t hh_backend_align(size_t align) {
    return align <= HEAPHOOK_DEFAULT_ALIGNMENT ? 1 : align;
}

/* Checks, in a debug build, what the backend promised about a block it returned. */
static inline void *hh_checked(void *ptr, size_t size, size_t align) {
#ifdef HEAPHOOK_DEBUG
    if (ptr != NULL) {
        size_t required = align > HEAPHOOK_DEFAULT_ALIGNMENT ? align : HEAPHOOK_DEFAULT_ALIGNMENT;
        hh_assert((uintptr_t)ptr % required == 0 && "backend returned a misaligned block");
        hh_assert(hh_backend.get_block_size(ptr) >= size && "backend's usable size too small");
        hh_assert(!hh_bootstrap_owns(ptr));
    }
#else
    (void)size;
    (void)align;
#endif
    return ptr;
}

/* size > 0 is not required here; align is 1 or a power of two > 16. Out of line: malloc's
 * rare path, which its common path (with the backend's inlined) must not carry. */
static HH_NOINLINE void *hh_alloc(size_t size, size_t align) {
    if (size == 0) size = 1;
    /* No block can be larger than half the address space, nor aligned to more. */
    if (HH_UNLIKELY(size > HH_MAX_REQUEST || align > HH_MAX_REQUEST)) {
        errno = ENOMEM;
        return NULL;
    }
    if (HH_UNLIKELY(!hh_backend_is_ready())) return hh_bootstrap_alloc(size, align);
    void *ptr = hh_checked(hh_backend.alloc(size, align), size, align);
    if (HH_UNLIKELY(ptr == NULL)) errno = ENOMEM;
    return ptr;
}

/* free's rare paths, out of line so that its common path needs no stack frame. */
static __attribute__((noinline)) void hh_free_keeping_errno(void *ptr) {
    /* glibc's free keeps errno (POSIX 2024 requires it); a backend's munmap may not. */
    int saved_errno = errno;
    hh_backend.dealloc(ptr);
    errno = saved_errno;
}

static __attribute__((noinline)) void hh_free_attached(void *ptr) {
    if (hh_attach_is_foreign(ptr)) {
        hh_attach_free(ptr);
    } else if (hh_backend.dealloc_keeps_errno) {
        hh_backend.dealloc(ptr);
    } else {
        hh_free_keeping_errno(ptr);
    }
}

static inline void hh_free(void *ptr) {
    if (ptr == NULL || hh_bootstrap_owns(ptr)) return;
    /* The common case in one test (see hh_free_direct). A backend's pointer exists only once
     * the backend is ready, so the relaxed load sees what init stored before READY. */
    if (HH_LIKELY(atomic_load_explicit(&hh_free_direct, memory_order_relaxed))) {
        HH_COMMON_DEALLOC(ptr);
        return;
    }
    if (HH_UNLIKELY(atomic_load_explicit(&hh_attached, memory_order_relaxed))) {
        hh_free_attached(ptr);
        return;
    }
    /* A pointer the backend handed out exists only once the backend is ready. */
    hh_assert(atomic_load(&hh_backend_state) == HH_STATE_READY);
    if (HH_LIKELY(hh_backend.dealloc_keeps_errno)) {
        hh_backend.dealloc(ptr);
        return;
    }
    hh_free_keeping_errno(ptr);
}

static size_t hh_usable_size(void *ptr) {
    if (ptr == NULL) return 0;
    if (hh_bootstrap_owns(ptr)) return hh_bootstrap_block_size(ptr);
    if (HH_UNLIKELY(atomic_load_explicit(&hh_attached, memory_order_relaxed)) &&
        hh_attach_is_foreign(ptr)) {
        return hh_attach_usable_size(ptr);
    }
    return hh_backend.get_block_size(ptr);
}

/* realloc of an arena block: the arena never frees, so the block moves (to the backend when
 * it is ready, else to a new arena block). */
static void *hh_realloc_bootstrap_block(void *ptr, size_t new_size) {
    void *moved = hh_alloc(new_size, 1);
    if (moved == NULL) return NULL;
    size_t old_size = hh_bootstrap_block_size(ptr);
    memcpy(moved, ptr, old_size < new_size ? old_size : new_size);
    return moved;
}

static void *hh_realloc(void *ptr, size_t new_size) {
    if (ptr == NULL) return hh_alloc(new_size, 1);
    if (new_size == 0) { /* glibc: realloc(p, 0) frees p and returns NULL */
        hh_free(ptr);
        return NULL;
    }
    if (HH_UNLIKELY(new_size > HH_MAX_REQUEST)) {
        errno = ENOMEM;
        return NULL;
    }
    if (hh_bootstrap_owns(ptr)) return hh_realloc_bootstrap_block(ptr, new_size);
    if (HH_UNLIKELY(atomic_load_explicit(&hh_attached, memory_order_relaxed)) &&
        hh_attach_is_foreign(ptr)) {
        return hh_attach_realloc(ptr, new_size);
    }
    void *moved = hh_checked(hh_backend.realloc(ptr, new_size), new_size, 1);
    if (HH_UNLIKELY(moved == NULL)) errno = ENOMEM;
    return moved;
}

/* ---- 2. malloc, free, calloc, realloc, reallocarray --------------------------------------- */

HH_EXPORT HH_INLINES_BACKEND void *malloc(size_t size) {
    /* The common case in one load, two compares and a jump (see alloc_sets_errno): size 0 and
     * requests above HH_MAX_REQUEST take hh_alloc's way. The acquire pairs with the release
     * that made the backend READY after hh_malloc_direct was set. */
    if (HH_LIKELY(atomic_load_explicit(&hh_malloc_direct, memory_order_acquire) &&
                  size - 1 < HH_MAX_REQUEST))
        return HH_COMMON_ALLOC(size, 1);
    return hh_alloc(size, 1);
}

HH_EXPORT HH_INLINES_BACKEND void free(void *ptr) {
    hh_free(ptr);
}

HH_EXPORT void *calloc(size_t count, size_t size) {
    size_t total;
    if (HH_UNLIKELY(__builtin_mul_overflow(count, size, &total) || total > HH_MAX_REQUEST)) {
        errno = ENOMEM;
        return NULL;
    }
    if (total == 0) total = 1;
    /* Arena memory is never reused, hence already zero. */
    if (HH_UNLIKELY(!hh_backend_is_ready())) return hh_bootstrap_alloc(total, 1);
    void *ptr = hh_checked(hh_backend.alloc_zeroed(total), total, 1);
    if (HH_UNLIKELY(ptr == NULL)) errno = ENOMEM;
    return ptr;
}

HH_EXPORT void *realloc(void *ptr, size_t new_size) {
    return hh_realloc(ptr, new_size);
}

HH_EXPORT void *reallocarray(void *ptr, size_t count, size_t size) {
    size_t total;
    if (HH_UNLIKELY(__builtin_mul_overflow(count, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    return hh_realloc(ptr, total);
}

/* ---- 3. The aligned family ---------------------------------------------------------------- */

/* The largest alignment memalign accepts (glibc: "alignment > SIZE_MAX / 2 + 1" is EINVAL). */
#define HH_MAX_ALIGNMENT (SIZE_MAX / 2 + 1)

/* memalign's rules, which aligned_alloc, valloc and pvalloc share in glibc: an alignment of
 * at most 16 is plain malloc; one that is not a power of two is rounded up to the next. */
static void *hh_memalign(size_t align, size_t size) {
    if (align <= HEAPHOOK_DEFAULT_ALIGNMENT) return hh_alloc(size, 1);
    if (align > HH_MAX_ALIGNMENT) {
        errno = EINVAL;
        return NULL;
    }
    if (!hh_is_power_of_two(align)) align = (size_t)1 << (64 - __builtin_clzll(align));
    return hh_alloc(size, align);
}

HH_EXPORT int posix_memalign(void **result, size_t align, size_t size) {
    /* POSIX: EINVAL unless a power of two multiple of sizeof(void *); errno is not set. */
    if (align % sizeof(void *) != 0 || !hh_is_power_of_two(align)) return EINVAL;
    int saved_errno = errno;
    void *ptr = hh_alloc(size, hh_backend_align(align));
    errno = saved_errno;
    if (ptr == NULL) return ENOMEM;
    *result = ptr;
    return 0;
}

HH_EXPORT void *memalign(size_t align, size_t size) {
    return hh_memalign(align, size);
}

HH_EXPORT void *aligned_alloc(size_t align, size_t size) {
    /* glibc 2.38: an alignment that is not a power of two is EINVAL (C17 leaves it open). */
    if (!hh_is_power_of_two(align)) {
        errno = EINVAL;
        return NULL;
    }
    return hh_memalign(align, size);
}

HH_EXPORT void *valloc(size_t size) {
    return hh_memalign(heaphook_os_page_size(), size);
}

HH_EXPORT void *pvalloc(size_t size) {
    size_t page = heaphook_os_page_size();
    if (size > SIZE_MAX - (page - 1)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t rounded = hh_align_up(size, page);
    return hh_memalign(page, rounded == 0 ? page : rounded);
}

/* ---- 4. malloc_usable_size ------------------------------------------------------------------ */

HH_EXPORT size_t malloc_usable_size(void *ptr) {
    return hh_usable_size(ptr);
}

/* ---- Local names of the exported functions (attach.c patches GOTs with these: taking the
 * address of "malloc" here would give whatever the process binds malloc to). -------------- */
#define HH_LOCAL_ALIAS(name)                \
    extern __typeof__(name) hh_local_##name \
        __attribute__((alias(#name), copy(name), visibility("hidden")))
HH_LOCAL_ALIAS(malloc);
HH_LOCAL_ALIAS(free);
HH_LOCAL_ALIAS(calloc);
HH_LOCAL_ALIAS(realloc);
HH_LOCAL_ALIAS(reallocarray);
HH_LOCAL_ALIAS(posix_memalign);
HH_LOCAL_ALIAS(memalign);
HH_LOCAL_ALIAS(aligned_alloc);
HH_LOCAL_ALIAS(valloc);
HH_LOCAL_ALIAS(pvalloc);
HH_LOCAL_ALIAS(malloc_usable_size);
