/*
 * alloc_hooks.c — the malloc family and C++ new/delete, each forwarded to the allocator under
 * us (a heaphook backend preloaded after this library, or libc's), so rtcheck works over any
 * backend. Outside a real-time context a hook is one test of t_rt.active and the call.
 *
 * operator new is hooked itself (not only the malloc it calls) so that the report names it;
 * the malloc inside it is not counted again (hh_rt_violation clears the flag until the call
 * returns).
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>

#include "next.h"

/* The four hottest hooks keep their real-time path in a cold function of its own, so that the
 * common path is the flag test and a tail call (no register saved, no frame). */
static HH_COLD void *hh_malloc_rt(size_t size, uintptr_t site) {
    hh_rt_violation(HH_CALL_MALLOC, site);
    void *p = hh_next.alloc.malloc(size);
    hh_rt_refresh();
    return p;
}

static HH_COLD void hh_free_rt(void *ptr, uintptr_t site) {
    if (ptr != NULL) hh_rt_violation(HH_CALL_FREE, site); /* free(NULL) does nothing (RTSan) */
    hh_next.alloc.free(ptr);
    hh_rt_refresh();
}

static HH_COLD void *hh_calloc_rt(size_t count, size_t size, uintptr_t site) {
    hh_rt_violation(HH_CALL_CALLOC, site);
    void *p = hh_next.alloc.calloc(count, size);
    hh_rt_refresh();
    return p;
}

static HH_COLD void *hh_realloc_rt(void *ptr, size_t size, uintptr_t site) {
    hh_rt_violation(HH_CALL_REALLOC, site);
    void *p = hh_next.alloc.realloc(ptr, size);
    hh_rt_refresh();
    return p;
}

HH_EXPORT void *malloc(size_t size) {
    if (HH_UNLIKELY(t_rt.active)) return hh_malloc_rt(size, HH_CALLER());
    return hh_next.alloc.malloc(size);
}

HH_EXPORT void free(void *ptr) {
    if (HH_UNLIKELY(heaphook_bootstrap_owns(ptr))) return;
    if (HH_UNLIKELY(t_rt.active)) return hh_free_rt(ptr, HH_CALLER());
    hh_next.alloc.free(ptr);
}

HH_EXPORT void *calloc(size_t count, size_t size) {
    if (HH_UNLIKELY(t_rt.active)) return hh_calloc_rt(count, size, HH_CALLER());
    return hh_next.alloc.calloc(count, size);
}

/* A bootstrap block (dlsym's) given to realloc moves to the allocator under us. */
static void *hh_realloc_arena_block(void *ptr, size_t size) {
    void *moved = hh_next.alloc.malloc(size);
    if (moved != NULL) {
        size_t old = heaphook_bootstrap_block_size(ptr);
        __builtin_memcpy(moved, ptr, old < size ? old : size);
    }
    return moved;
}

HH_EXPORT void *realloc(void *ptr, size_t size) {
    if (HH_UNLIKELY(heaphook_bootstrap_owns(ptr))) return hh_realloc_arena_block(ptr, size);
    if (HH_UNLIKELY(t_rt.active)) return hh_realloc_rt(ptr, size, HH_CALLER());
    return hh_next.alloc.realloc(ptr, size);
}

HH_EXPORT void *reallocarray(void *ptr, size_t count, size_t size) {
    if (HH_UNLIKELY(heaphook_bootstrap_owns(ptr))) {
        size_t total;
        if (__builtin_mul_overflow(count, size, &total)) {
            errno = ENOMEM;
            return NULL;
        }
        return hh_realloc_arena_block(ptr, total);
    }
    HH_RT_FORWARD(HH_CALL_REALLOCARRAY, void *, hh_next.alloc.reallocarray(ptr, count, size));
}

HH_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    HH_RT_FORWARD(HH_CALL_POSIX_MEMALIGN, int, hh_next.alloc.posix_memalign(out, align, size));
}

HH_EXPORT void *memalign(size_t align, size_t size) {
    HH_RT_FORWARD(HH_CALL_MEMALIGN, void *, hh_next.alloc.memalign(align, size));
}

HH_EXPORT void *aligned_alloc(size_t align, size_t size) {
    HH_RT_FORWARD(HH_CALL_ALIGNED_ALLOC, void *, hh_next.alloc.aligned_alloc(align, size));
}

HH_EXPORT void *valloc(size_t size) {
    HH_RT_FORWARD(HH_CALL_VALLOC, void *, hh_next.alloc.valloc(size));
}

HH_EXPORT void *pvalloc(size_t size) {
    HH_RT_FORWARD(HH_CALL_PVALLOC, void *, hh_next.alloc.pvalloc(size));
}

/* malloc_usable_size is no violation (it neither allocates nor blocks): passed on. */
HH_EXPORT size_t malloc_usable_size(void *ptr) {
    if (ptr == NULL) return 0;
    if (heaphook_bootstrap_owns(ptr)) return heaphook_bootstrap_block_size(ptr);
    size_t (*fn)(void *) = hh_next.alloc.malloc_usable_size; /* NULL when the next has none */
    return fn != NULL ? fn(ptr) : 0;
}

/* ---- C++ operators: libstdc++'s, under us ------------------------------------------------- */

/* The C++ ABI's names of the operators (Itanium mangling, size_t = unsigned long). Each hook
 * finds the next definition on its first call; a program without libstdc++ never calls them. */
#define HH_CXX_NEW(mangled, call, params, args)                                        \
    HH_EXPORT void *mangled params {                                                   \
        static void *next_fn;                                                          \
        void *(*fn)params = (void *(*)params)hh_rt_next_cxx(#mangled, &next_fn);       \
        if (HH_UNLIKELY(fn == NULL)) abort(); /* a C++ operator with no C++ runtime */ \
        HH_RT_FORWARD(call, void *, fn args);                                          \
    }
#define HH_CXX_DELETE(mangled, call, params, args)                             \
    HH_EXPORT void mangled params {                                            \
        static void *next_fn;                                                  \
        void(*fn) params = (void(*) params)hh_rt_next_cxx(#mangled, &next_fn); \
        if (HH_UNLIKELY(fn == NULL)) abort();                                  \
        HH_RT_FORWARD_VOID(call, fn args);                                     \
    }

typedef struct hh_nothrow hh_nothrow; /* std::nothrow_t, only ever by reference */
typedef size_t hh_align_val;          /* std::align_val_t: an enum of size_t */

HH_CXX_NEW(_Znwm, HH_CALL_NEW, (size_t n), (n))
HH_CXX_NEW(_Znam, HH_CALL_NEW_ARRAY, (size_t n), (n))
HH_CXX_NEW(_ZnwmRKSt9nothrow_t, HH_CALL_NEW, (size_t n, const hh_nothrow *t), (n, t))
HH_CXX_NEW(_ZnamRKSt9nothrow_t, HH_CALL_NEW_ARRAY, (size_t n, const hh_nothrow *t), (n, t))
HH_CXX_NEW(_ZnwmSt11align_val_t, HH_CALL_NEW, (size_t n, hh_align_val a), (n, a))
HH_CXX_NEW(_ZnamSt11align_val_t, HH_CALL_NEW_ARRAY, (size_t n, hh_align_val a), (n, a))
HH_CXX_NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, HH_CALL_NEW,
           (size_t n, hh_align_val a, const hh_nothrow *t), (n, a, t))
HH_CXX_NEW(_ZnamSt11align_val_tRKSt9nothrow_t, HH_CALL_NEW_ARRAY,
           (size_t n, hh_align_val a, const hh_nothrow *t), (n, a, t))

HH_CXX_DELETE(_ZdlPv, HH_CALL_DELETE, (void *p), (p))
HH_CXX_DELETE(_ZdaPv, HH_CALL_DELETE_ARRAY, (void *p), (p))
HH_CXX_DELETE(_ZdlPvm, HH_CALL_DELETE, (void *p, size_t n), (p, n))
HH_CXX_DELETE(_ZdaPvm, HH_CALL_DELETE_ARRAY, (void *p, size_t n), (p, n))
HH_CXX_DELETE(_ZdlPvRKSt9nothrow_t, HH_CALL_DELETE, (void *p, const hh_nothrow *t), (p, t))
HH_CXX_DELETE(_ZdaPvRKSt9nothrow_t, HH_CALL_DELETE_ARRAY, (void *p, const hh_nothrow *t), (p, t))
HH_CXX_DELETE(_ZdlPvSt11align_val_t, HH_CALL_DELETE, (void *p, hh_align_val a), (p, a))
HH_CXX_DELETE(_ZdaPvSt11align_val_t, HH_CALL_DELETE_ARRAY, (void *p, hh_align_val a), (p, a))
HH_CXX_DELETE(_ZdlPvmSt11align_val_t, HH_CALL_DELETE, (void *p, size_t n, hh_align_val a),
              (p, n, a))
HH_CXX_DELETE(_ZdaPvmSt11align_val_t, HH_CALL_DELETE_ARRAY, (void *p, size_t n, hh_align_val a),
              (p, n, a))
