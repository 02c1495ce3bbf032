/*
 * rt.c — real-time violations from rtcheck's guard (include/heaphook/trace_rt.h): each call of
 * heaphook_trace_rt_violation becomes an RT_VIOLATION record beside the allocation events. The
 * guard calls it at a violation's first call, on the violating thread and inside the guard's
 * hook, so the stack is taken here with the tracer's own unwinder and interned in its trie, as an
 * allocation's is: the report symbolises it like any other. The guard's frames (the library
 * the call comes from) are dropped from the inner end of the stack; at exit the guard calls
 * again with the final count and the stack id it was given.
 *
 * Never on the malloc path: nothing here costs the tracer's hooks anything.
 */
#include <errno.h>
#include <string.h>

#include "heaphook/trace_rt.h"
#include "modules.h"
#include "stacks.h"
#include "trace.h"
#include "tracer.h"

/* A NUL-terminated name into a fixed field, cut to fit, NUL-padded. */
static void hh_rt_copy_name(char *dst, size_t cap, const char *src) {
    size_t n = 0;
    if (src != NULL) {
        while (n < cap && src[n] != '\0') n++;
        memcpy(dst, src, n);
    }
    memset(dst + n, 0, cap - n);
}

/* rtcheck's guard, when it is loaded (weak: NULL otherwise). */
extern __typeof__(heaphook_rt_guard_flush) heaphook_rt_guard_flush __attribute__((weak));

void hh_rt_flush_guard(void) {
    if (heaphook_rt_guard_flush != NULL) heaphook_rt_guard_flush();
}

HH_EXPORT uint32_t heaphook_trace_rt_violation(const heaphook_rt_violation *v) {
    if (v == NULL || v->site == 0 || v->tid == 0) return 0;
    int saved_errno = errno;
    int saved_busy = hh_busy;
    hh_busy = 1; /* the stack walk may allocate: not the program's */
    uint32_t stack = v->stack;
    if (!hh_tracer_active()) {
        stack = 0;
    } else {
        if (stack == 0 && hh_cfg.stacks) {
            uintptr_t lo = 0, hi = 0;
            (void)hh_modules_range_of((uintptr_t)__builtin_return_address(0), &lo, &hi);
            stack = hh_stack_capture_outside(hh_cfg.depth, lo, hi);
        }
        hh_rec_rt *r = stack == UINT32_MAX ? NULL : hh_tracer_reserve(sizeof *r);
        if (r != NULL) {
            r->time = hh_now();
            r->tid = v->tid;
            r->stack = stack;
            r->site = v->site;
            r->policy = v->policy < 0 ? 0 : (uint32_t)v->policy;
            r->priority = v->priority < 0 ? 0 : (uint32_t)v->priority;
            r->pad = 0;
            r->count = v->count;
            hh_rt_copy_name(r->call, sizeof r->call, v->call);
            hh_rt_copy_name(r->thread_name, sizeof r->thread_name, v->thread_name);
            hh_tracer_commit(r, HH_REC_RT);
        }
        if (stack == UINT32_MAX) stack = 0;
    }
    hh_busy = saved_busy;
    errno = saved_errno;
    return stack;
}
