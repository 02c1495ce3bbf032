/*
 * hooks.c — the malloc family of a process that reports to the agent: each call is forwarded
 * to the next allocator in the lookup order (dlsym(RTLD_NEXT)), so
 * LD_PRELOAD="libheaphook_agent.so libheaphook_tlsf.so" reports TLSF's heap. Until the next
 * allocator is known, requests are served from the core's bootstrap arena (dlsym itself may
 * allocate); its blocks are recognised and never passed on.
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
#include "heaphook/bootstrap.h"
#include "client.h"

HH_TLS int hh_agent_busy;

/* The allocator after us and the bootstrap arena that serves its lookup: the core's
 * (heaphook/bootstrap.h). */
#define next heaphook_next
#define hh_in_arena heaphook_bootstrap_owns
#define hh_arena_size heaphook_bootstrap_block_size
#define hh_arena_alloc heaphook_bootstrap_alloc

/* The slow path of hh_ready(). Beside the four functions every allocator has, the hooks call
 * posix_memalign and malloc_usable_size unconditionally: an allocator without them is refused
 * before the program starts. */
__attribute__((noinline, cold)) static bool hh_resolve(void) {
    if (!heaphook_next_resolve("agent")) return false;
    if (next.posix_memalign == NULL || next.malloc_usable_size == NULL) {
        static const char msg[] =
            "heaphook agent: the allocator after libheaphook_agent.so in the lookup order has "
            "no posix_memalign or malloc_usable_size\n";
        ssize_t r = write(2, msg, sizeof msg - 1);
        (void)r;
        _exit(127);
    }
    return true;
}

static inline bool hh_ready(void) {
    if (HH_LIKELY(atomic_load_explicit(&heaphook_next_state, memory_order_acquire) ==
                  HEAPHOOK_NEXT_READY))
        return true;
    return hh_resolve();
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
    return next.malloc_usable_size(ptr);
}
