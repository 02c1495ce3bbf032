/*
 * heaphook/trace_rt.h — how rtcheck's guard (libheaphook_rtcheck.so) hands its real-time
 * violations to the tracer (libheaphook_heaptrack.so) when both are in the process
 * (`heaphook record -b rtcheck -- COMMAND`): each one becomes an RT_VIOLATION record of the
 * heaplog (FORMAT.md), and `heaphook report` shows it.
 *
 * The guard declares heaphook_trace_rt_violation weak and calls it only when the tracer defines
 * it, so the guard alone works as before. It calls it twice per violation (call, call site,
 * thread): at the first call, on the violating thread, with stack 0 (the tracer takes the
 * thread's stack itself, the frames of the caller's library left out, and returns its id), and
 * at exit with the final count and that id (heaphook_rt_guard_flush, which the tracer's exit path
 * calls too). The tracer allocates nothing through the hooked
 * path, writes no stdio, and records nothing while it is not recording (it then returns 0).
 */
#ifndef HEAPHOOK_TRACE_RT_H
#define HEAPHOOK_TRACE_RT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct heaphook_rt_violation {
    uint32_t site;           /* the guard's number of the violation: 1, 2, ... */
    uint32_t tid;            /* the violating thread */
    uint32_t stack;          /* 0: take the calling thread's stack now; else a returned id */
    int32_t policy;          /* SCHED_FIFO, SCHED_RR, SCHED_DEADLINE, or SCHED_OTHER (marked) */
    int32_t priority;        /* sched_priority */
    uint64_t count;          /* calls so far */
    const char *call;        /* "malloc", "pthread_mutex_lock", ... */
    const char *thread_name; /* the thread's comm */
} heaphook_rt_violation;

/* Records v; returns the stack id the record carries (0: none, or not recording). */
uint32_t heaphook_trace_rt_violation(const heaphook_rt_violation *v);

/* The guard's side: hands every violation's count to heaphook_trace_rt_violation now. The
 * tracer calls it (weak: when the guard is loaded) before its log ends at exit, since the
 * destructors of two preloaded libraries run in an order neither chooses. */
void heaphook_rt_guard_flush(void);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_TRACE_RT_H */
