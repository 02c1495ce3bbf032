/*
 * hooks.c — the malloc family of a process that reports to the agent: each call is forwarded
 * to the next allocator in the lookup order (dlsym(RTLD_NEXT)), so
 * LD_PRELOAD="libheaphook_agent.so libheaphook_tlsf.so" reports TLSF's heap. Until the next
 * allocator is known, requests are served from a static arena (dlsym itself may allocate);
 * its blocks are recognised and never passed on.
 *
 * The cost on the common path is a thread-local countdown (sampler.c) on allocation and, on
 * free, a probe of the sampled-address table. A sampled allocation walks its stack and sends
 * one frame; a free of a sampled block sends one frame; neither ever waits.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../frames.h"
#include "client.h"

HH_TLS int hh_agent_busy;

typedef void *(*hh_malloc_fn)(size_t);
typedef void (*hh_free_fn)(void *);
typedef void *(*hh_calloc_fn)(size_t, size_t);
typedef void *(*hh_realloc_fn)(void *, size_t);
typedef void *(*hh_reallocarray_fn)(void *, size_t, size_t);
typedef int (*hh_posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*hh_memalign_fn)(size_t, size_t);
typedef size_t (*hh_usable_fn)(void *);

static struct {
    hh_malloc_fn malloc;
    hh_free_fn free;
    hh_calloc_fn calloc;
    hh_realloc_fn realloc;
    hh_reallocarray_fn reallocarray;
    hh_posix_memalign_fn posix_memalign;
    hh_memalign_fn memalign;
    hh_memalign_fn aligned_alloc;
    hh_malloc_fn valloc;
    hh_malloc_fn pvalloc;
    hh_usable_fn usable;
} next;
static _Atomic int g_next_state; /* 0 unresolved, 1 resolving, 2 resolved */

/* ---- the bootstrap arena ----------------------------------------------------------------- */

#define HH_ARENA_SIZE (256u * 1024u)
static _Alignas(64) uint8_t g_arena[HH_ARENA_SIZE];
static _Atomic size_t g_arena_used;

static inline bool hh_in_arena(const void *p) {
    return (const uint8_t *)p >= g_arena && (const uint8_t *)p < g_arena + HH_ARENA_SIZE;
}

static void *hh_arena_alloc(size_t size, size_t align) {
    if (align < 16) align = 16;
    size_t used = atomic_load(&g_arena_used);
    for (;;) {
        uintptr_t start = ((uintptr_t)g_arena + used + 16 + align - 1) & ~(uintptr_t)(align - 1);
        size_t end = start - (uintptr_t)g_arena + size;
        if (size > HH_ARENA_SIZE || end > HH_ARENA_SIZE) {
            errno = ENOMEM;
            return NULL;
        }
        if (atomic_compare_exchange_weak(&g_arena_used, &used, end)) {
            ((size_t *)start)[-1] = size;
            return (void *)start; /* never reused: already zero */
        }
    }
}

static size_t hh_arena_size(const void *p) {
    return ((const size_t *)p)[-1];
}

static void hh_resolve(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_next_state, &expected, 1)) return;
    next.malloc = (hh_malloc_fn)dlsym(RTLD_NEXT, "malloc");
    next.free = (hh_free_fn)dlsym(RTLD_NEXT, "free");
    next.calloc = (hh_calloc_fn)dlsym(RTLD_NEXT, "calloc");
    next.realloc = (hh_realloc_fn)dlsym(RTLD_NEXT, "realloc");
    next.reallocarray = (hh_reallocarray_fn)dlsym(RTLD_NEXT, "reallocarray");
    next.posix_memalign = (hh_posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
    next.memalign = (hh_memalign_fn)dlsym(RTLD_NEXT, "memalign");
    next.aligned_alloc = (hh_memalign_fn)dlsym(RTLD_NEXT, "aligned_alloc");
    next.valloc = (hh_malloc_fn)dlsym(RTLD_NEXT, "valloc");
    next.pvalloc = (hh_malloc_fn)dlsym(RTLD_NEXT, "pvalloc");
    next.usable = (hh_usable_fn)dlsym(RTLD_NEXT, "malloc_usable_size");
    if (next.malloc == NULL || next.free == NULL || next.calloc == NULL || next.realloc == NULL ||
        next.posix_memalign == NULL || next.usable == NULL) {
        static const char msg[] =
            "heaphook agent: no allocator after libheaphook_agent.so in the "
            "lookup order (dlsym(RTLD_NEXT, \"malloc\") failed)\n";
        ssize_t r = write(2, msg, sizeof msg - 1);
        (void)r;
        _exit(127);
    }
    atomic_store(&g_next_state, 2);
}

static inline bool hh_ready(void) {
    if (HH_LIKELY(atomic_load_explicit(&g_next_state, memory_order_acquire) == 2)) return true;
    hh_resolve();
    return atomic_load_explicit(&g_next_state, memory_order_acquire) == 2;
}

/* ---- the malloc family ------------------------------------------------------------------- */

#define HH_EXPORT __attribute__((visibility("default")))

HH_EXPORT void *malloc(size_t size) {
    if (HH_UNLIKELY(!hh_ready())) return hh_arena_alloc(size, 16);
    void *p = next.malloc(size);
    hh_after_alloc(p, size);
    return p;
}

HH_EXPORT void free(void *ptr) {
    if (ptr == NULL || hh_in_arena(ptr)) return;
    hh_before_free(ptr);
    next.free(ptr);
}

HH_EXPORT void *calloc(size_t count, size_t size) {
    if (HH_UNLIKELY(!hh_ready())) {
        size_t total;
        if (__builtin_mul_overflow(count, size, &total)) {
            errno = ENOMEM;
            return NULL;
        }
        return hh_arena_alloc(total, 16);
    }
    void *p = next.calloc(count, size);
    hh_after_alloc(p, count * size);
    return p;
}

HH_EXPORT void *realloc(void *ptr, size_t size) {
    if (HH_UNLIKELY(!hh_ready()) || (ptr != NULL && hh_in_arena(ptr))) {
        if (size == 0) return NULL;
        void *moved = hh_ready() ? next.malloc(size) : hh_arena_alloc(size, 16);
        if (moved != NULL && ptr != NULL) {
            size_t old = hh_arena_size(ptr);
            memcpy(moved, ptr, old < size ? old : size);
        }
        return moved;
    }
    /* The old block's sample ends here, whether or not the block moves. */
    if (ptr != NULL) hh_before_free(ptr);
    void *p = next.realloc(ptr, size);
    if (p == NULL && size != 0 && ptr != NULL) return NULL; /* ptr stays; its sample is gone */
    hh_after_alloc(p, size);
    return p;
}

HH_EXPORT void *reallocarray(void *ptr, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(ptr, total);
}

HH_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    if (HH_UNLIKELY(!hh_ready())) {
        void *p = hh_arena_alloc(size, align);
        if (p == NULL) return ENOMEM;
        *out = p;
        return 0;
    }
    int r = next.posix_memalign(out, align, size);
    if (r == 0) hh_after_alloc(*out, size);
    return r;
}

HH_EXPORT void *memalign(size_t align, size_t size) {
    if (HH_UNLIKELY(!hh_ready())) return hh_arena_alloc(size, align);
    void *p = next.memalign(align, size);
    hh_after_alloc(p, size);
    return p;
}

HH_EXPORT void *aligned_alloc(size_t align, size_t size) {
    if (HH_UNLIKELY(!hh_ready())) return hh_arena_alloc(size, align);
    void *p = next.aligned_alloc(align, size);
    hh_after_alloc(p, size);
    return p;
}

HH_EXPORT void *valloc(size_t size) {
    if (HH_UNLIKELY(!hh_ready())) return hh_arena_alloc(size, 4096);
    void *p = next.valloc(size);
    hh_after_alloc(p, size);
    return p;
}

HH_EXPORT void *pvalloc(size_t size) {
    if (HH_UNLIKELY(!hh_ready())) return hh_arena_alloc(size, 4096);
    void *p = next.pvalloc(size);
    hh_after_alloc(p, size);
    return p;
}

HH_EXPORT size_t malloc_usable_size(void *ptr) {
    if (ptr == NULL) return 0;
    if (hh_in_arena(ptr)) return hh_arena_size(ptr);
    if (HH_UNLIKELY(!hh_ready())) return 0;
    return next.usable(ptr);
}
