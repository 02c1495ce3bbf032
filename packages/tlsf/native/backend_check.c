/*
 * backend_check.c — checking mode (HEAPHOOK_TLSF_CHECK) and what the check on every call says
 * when a pointer fails it. The check's inline parts are in backend_internal.h.
 */
#include "backend_internal.h"

__thread area_cache t_area __attribute__((tls_model("initial-exec")));

/*
 * Checking mode.
 */
void check_pointer_locked(const void *ptr, const char *call) {
    const void *where;
    const tlsf_error e = tlsf_validate(shared.tlsf, ptr, &where);
    if (LIKELY(e == TLSF_OK)) return;
    if (where != ptr)
        heaphook_fatal("tlsf: %s(%p): %s at %p", call, ptr, tlsf_error_name(e), where);
    heaphook_fatal("tlsf: %s(%p): %s at %p", call, ptr, tlsf_error_name(e), ptr);
}

/*
 * Checks on every call (TLSF_FREE_CHECK): free, realloc and malloc_usable_size check their
 * pointer before anything else, as glibc's "free(): invalid pointer" does, and stop the
 * program with one line naming the call. Is the pointer inside an area of the pool (the
 * thread's last area: one compare; else a binary search of the area list)? Is the word
 * before it a used block's head, its tag, size and successor's head consistent, the
 * predecessor's boundary tag sound when the head says it is free (tlsf_check_used)? A few
 * words read, no lock: blocks of any thread's heap pass. The checking mode
 * (HEAPHOOK_TLSF_CHECK=1) still walks further on an error to name it.
 */
__attribute__((noinline, noreturn, cold)) void misuse(const void *ptr, const char *call,
                                                      tlsf_error e, const void *where) {
    if (cfg.check) {
        shared_lock_take();
        check_pointer_locked(ptr, call); /* the thorough mode's own words, when it finds it */
        shared_lock_give();
    }
    switch (e) {
        case TLSF_ERR_DOUBLE_FREE:
            heaphook_fatal("tlsf: %s(%p): double free (the block is already free)", call, ptr);
        case TLSF_ERR_INTERIOR:
            heaphook_fatal(
                "tlsf: %s(%p): invalid pointer (inside the heap, not the start of a block; "
                "or its header was overwritten)",
                call, ptr);
        case TLSF_ERR_NEXT_HEADER:
            heaphook_fatal(
                "tlsf: %s(%p): heap corruption after the block at %p: the next block's header "
                "(at %p) is damaged",
                call, ptr, ptr, where);
        case TLSF_ERR_PREV_HEADER:
            heaphook_fatal(
                "tlsf: %s(%p): heap corruption before the block at %p: the previous free "
                "block's header is damaged",
                call, ptr, ptr);
        default:
            heaphook_fatal("tlsf: %s(%p): invalid pointer (not a block of this heap)", call, ptr);
    }
}

/* The pointer's area is not the one remembered in *a: look it up, remember it, check. */
__attribute__((noinline)) void check_slow(const void *ptr, const char *call, area_cache *a) {
    uintptr_t lo, hi;
    const void *where = ptr;
    if (!areas_find((uintptr_t)ptr, &lo, &hi)) misuse(ptr, call, TLSF_ERR_FOREIGN, ptr);
    a->from = lo + FIRST_PAYLOAD;
    a->span = hi - lo - FIRST_PAYLOAD;
    a->fast = a->span > AREA_FAST_MARGIN ? (a->span - AREA_FAST_MARGIN) >> 4 : 0;
    const tlsf_error e = tlsf_check_used(ptr, lo, hi, &where);
    /* The predecessor may be changing under its owner (another thread, or the shared heap
     * under its lock): its boundary tag is checked where the block is merged (check_prev). */
    if (e != TLSF_OK && e != TLSF_ERR_PREV_HEADER) misuse(ptr, call, e, where);
}
