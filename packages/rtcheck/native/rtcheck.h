/*
 * rtcheck.h — what the files of libheaphook_rtcheck.so share.
 *
 *   state.c       the per-thread real-time state: policy (kept from the calls that change it),
 *                 marks (heaphook_rt_enter/exit, RTSan's names), page faults in the context,
 *                 the thread registry and the pthread_create trampoline
 *   next.c        what RTLD_NEXT resolves to (the backend or libc under us), the bootstrap arena
 *   alloc_hooks.c the malloc family and C++ new/delete
 *   call_hooks.c  blocking calls, mapping calls, fork
 *   sched_hooks.c sched_setscheduler, sched_setattr, pthread_setschedparam/prio, syscall
 *   violations.c  the fixed table of violations: one stack per call site, the rest counted
 *   suppress.c    RTSan's suppression file, read at start-up (for --abort)
 *   report.c      the report written at exit (or at the first violation with --abort)
 *   fork.c        the fork module: the library's only pthread_atfork and its lock order
 *
 * The one thing every hook reads is t_rt.active (a thread-local int, initial-exec): zero
 * outside a real-time context, so a hook costs one predictable branch there.
 */
#ifndef HH_RTCHECK_H
#define HH_RTCHECK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HH_EXPORT __attribute__((visibility("default")))
#define HH_LIKELY(x) __builtin_expect(!!(x), 1)
#define HH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HH_TLS __attribute__((tls_model("initial-exec"))) __thread
#define HH_COLD __attribute__((cold, noinline))
/* The address a hook returns to: the call site a violation is counted under. */
#define HH_CALLER() ((uintptr_t)__builtin_return_address(0))

/* The library's locks are spin locks (an _Atomic int, 0 free): held for a few system calls at
 * most, and never by a hook's common path. None is held across fork (fork.c). */
static inline void hh_rt_lock(_Atomic int *lock) {
    while (atomic_exchange_explicit(lock, 1, memory_order_acquire) != 0) sched_yield();
}
static inline void hh_rt_unlock(_Atomic int *lock) {
    atomic_store_explicit(lock, 0, memory_order_release);
}

/* ---- The calls a real-time context must not make ----------------------------------------- */

/* X(enum name, the name reports use) — the report's `call` field. */
#define HH_RT_CALLS(X)                          \
    X(MALLOC, "malloc")                         \
    X(CALLOC, "calloc")                         \
    X(REALLOC, "realloc")                       \
    X(REALLOCARRAY, "reallocarray")             \
    X(FREE, "free")                             \
    X(POSIX_MEMALIGN, "posix_memalign")         \
    X(MEMALIGN, "memalign")                     \
    X(ALIGNED_ALLOC, "aligned_alloc")           \
    X(VALLOC, "valloc")                         \
    X(PVALLOC, "pvalloc")                       \
    X(NEW, "operator new")                      \
    X(NEW_ARRAY, "operator new[]")              \
    X(DELETE, "operator delete")                \
    X(DELETE_ARRAY, "operator delete[]")        \
    X(MMAP, "mmap")                             \
    X(MUNMAP, "munmap")                         \
    X(MREMAP, "mremap")                         \
    X(MADVISE, "madvise")                       \
    X(BRK, "brk")                               \
    X(SBRK, "sbrk")                             \
    X(MUTEX_LOCK, "pthread_mutex_lock")         \
    X(COND_WAIT, "pthread_cond_wait")           \
    X(COND_TIMEDWAIT, "pthread_cond_timedwait") \
    X(SEM_WAIT, "sem_wait")                     \
    X(SEM_TIMEDWAIT, "sem_timedwait")           \
    X(NANOSLEEP, "nanosleep")                   \
    X(CLOCK_NANOSLEEP, "clock_nanosleep")       \
    X(USLEEP, "usleep")                         \
    X(SLEEP, "sleep")                           \
    X(OPEN, "open")                             \
    X(OPENAT, "openat")                         \
    X(READ, "read")                             \
    X(WRITE, "write")                           \
    X(FOPEN, "fopen")                           \
    X(FCLOSE, "fclose")                         \
    X(PRINTF, "printf")                         \
    X(FPRINTF, "fprintf")                       \
    X(VPRINTF, "vprintf")                       \
    X(VFPRINTF, "vfprintf")                     \
    X(PUTS, "puts")                             \
    X(FPUTS, "fputs")                           \
    X(FWRITE, "fwrite")                         \
    X(SEND, "send")                             \
    X(SENDTO, "sendto")                         \
    X(RECV, "recv")                             \
    X(RECVFROM, "recvfrom")                     \
    X(PTHREAD_CREATE, "pthread_create")         \
    X(PTHREAD_JOIN, "pthread_join")             \
    X(FORK, "fork")

#define HH_RT_CALL_ENUM(id, name) HH_CALL_##id,
enum hh_rt_call { HH_RT_CALLS(HH_RT_CALL_ENUM) HH_CALL_COUNT };
#undef HH_RT_CALL_ENUM

/* The report's name of a call. */
const char *hh_rt_call_name(enum hh_rt_call call);

/* ---- The per-thread state (state.c) ------------------------------------------------------ */

typedef struct hh_rt_thread {
    /* Nonzero while this thread is in a real-time context and not inside one of our hooks:
     * the flag every hook tests. Written by the thread itself, and by another thread that
     * changes its scheduling policy (pthread_setschedparam on it), hence an int stored whole. */
    volatile int active;
    int policy;      /* SCHED_OTHER, SCHED_FIFO ... as last set or read */
    int priority;    /* sched_priority */
    int mark_depth;  /* heaphook_rt_enter / __rtsan_realtime_enter nesting */
    int off_depth;   /* __rtsan_off / __rtsan_disable nesting */
    int slot;        /* index in the thread registry, -1 when not registered */
    bool in_context; /* the context itself (active before hooks and __rtsan_off are taken out) */
} hh_rt_thread;

extern HH_TLS hh_rt_thread t_rt;

/* Recomputes t_rt.active from the thread's state (after a hook that cleared it). */
void hh_rt_refresh(void);
/* Reads the policy of the calling thread from the kernel (thread start, library load). */
void hh_rt_read_own_policy(void);
/* A policy change made by a call we intercepted: tid 0 is the calling thread. */
void hh_rt_policy_changed(pid_t tid, int policy, int priority, bool priority_only);
/* The same, for a thread named by its pthread_t (pthread_setschedparam). */
void hh_rt_policy_changed_handle(unsigned long handle, int policy, int priority,
                                 bool priority_only);
bool hh_rt_is_rt_policy(int policy);
pid_t hh_rt_gettid(void);

/* The wrapped start routine of a thread (pthread_create's hook passes this and an arg made by
 * hh_rt_thread_start_arg). */
void *hh_rt_thread_start(void *arg);
void *hh_rt_thread_start_arg(void *(*start)(void *), void *arg);

/* The threads that were ever in a real-time context, for the report. */
typedef struct hh_rt_thread_summary {
    pid_t tid;
    int policy, priority;
    char name[16];
    uint64_t minflt, majflt; /* page faults taken inside the context */
} hh_rt_thread_summary;
/* Fills out[0..max) and returns the count (open context intervals are closed at the moment). */
int hh_rt_thread_summaries(hh_rt_thread_summary *out, int max);

/* Fork (fork.c): in the child only the forking thread is registered; its fault counts start
 * over. */
void hh_rt_registry_postfork_child(void);

/* ---- Fork (fork.c) ------------------------------------------------------------------------- */

/* Registers the library's pthread_atfork handlers (once; from the library constructor, before
 * the program's constructors and main). */
void hh_rt_fork_register(void);

/* Global options (state.c, read at load). */
typedef struct hh_rt_options {
    bool abort_on_first;    /* HEAPHOOK_RT_GUARD=abort */
    bool mark_only;         /* HEAPHOOK_RT_MARK_ONLY: scheduling policies do not make a context */
    bool has_thread_filter; /* HEAPHOOK_RT_THREADS: only threads whose name matches count */
} hh_rt_options;
extern hh_rt_options hh_rt_opts;

/* ---- Options read at load (options.c) ----------------------------------------------------- */

void hh_rt_options_load(void);
/* False during the warm-up (HEAPHOOK_RT_AFTER: a time after load, or until a signal). */
bool hh_rt_armed(void);
/* True when a thread of this name is checked (HEAPHOOK_RT_THREADS, a POSIX extended regular
 * expression; every thread when unset). May allocate (regexec): call it with t_rt.active
 * cleared, never from a hook's common path. */
bool hh_rt_thread_checked(const char *name);

/* ---- Hooks' helpers ------------------------------------------------------------------------ */

/* A violation of the calling thread at site (cold): counts it, takes the stack at a site's
 * first call, and leaves t_rt.active cleared so that what the intercepted call does inside
 * (operator new's malloc, fopen's) is not counted again; the hook calls hh_rt_refresh after. */
HH_COLD void hh_rt_violation(enum hh_rt_call call, uintptr_t site);

/* Forwards a call: when the thread is in a real-time context, the violation is counted first
 * and the context is restored after the call. */
#define HH_RT_FORWARD(call, type, expr)         \
    do {                                        \
        if (HH_UNLIKELY(t_rt.active)) {         \
            hh_rt_violation(call, HH_CALLER()); \
            type hh_result_ = (expr);           \
            hh_rt_refresh();                    \
            return hh_result_;                  \
        }                                       \
        return (expr);                          \
    } while (0)

#define HH_RT_FORWARD_VOID(call, expr)          \
    do {                                        \
        if (HH_UNLIKELY(t_rt.active)) {         \
            hh_rt_violation(call, HH_CALLER()); \
            (expr);                             \
            hh_rt_refresh();                    \
            return;                             \
        }                                       \
        (expr);                                 \
    } while (0)

/* ---- Violations (violations.c) ------------------------------------------------------------- */

#define HH_RT_MAX_FRAMES 48
#define HH_RT_MAX_SITES 2048

typedef struct hh_rt_site {
    _Atomic uint64_t key; /* the claim: a hash of (call, site, tid); 0 = empty */
    uintptr_t site;       /* the return address of the intercepted call */
    _Atomic int ready;    /* the fields below are written */
    bool excluded;        /* its thread is not one HEAPHOOK_RT_THREADS names: not reported */
    int call;
    pid_t tid;
    int policy, priority;
    char thread_name[16];
    _Atomic uint64_t count;
    int frame_count;
    uintptr_t frames[HH_RT_MAX_FRAMES];
    uint32_t traced_stack; /* the tracer's id of its stack (hh_rt_trace_*), 0 = none */
} hh_rt_site;

/* The table, for the report. */
hh_rt_site *hh_rt_sites(void);
uint64_t hh_rt_sites_dropped(void);
void hh_rt_violations_init(void);

/* With heaptrack's tracer in the process (heaphook record -b rtcheck): a site's first
 * violation is handed to it with the thread's stack, and every site's count at exit
 * (include/heaphook/trace_rt.h). Nothing happens without the tracer. */
void hh_rt_trace_first(hh_rt_site *s);
void hh_rt_trace_counts(void);

/* ---- Suppressions (suppress.c) ------------------------------------------------------------- */

/* Reads HEAPHOOK_RT_SUPPRESSIONS (RTSan's format) at load. */
void hh_rt_suppressions_load(void);
/* True when a violation of call with these frames is suppressed (dladdr names: the names the
 * program's dynamic symbol tables hold). */
bool hh_rt_suppressed(int call, const uintptr_t *frames, int count);
/* RTSan's pattern matching (a substring; ^ and $ anchor it; * any run of characters). */
bool hh_rt_pattern_match(const char *pattern, const char *s);

/* ---- Report (report.c) ---------------------------------------------------------------------- */

void hh_rt_report_open(void);
/* Writes the whole report (at exit) or the one site (with --abort). */
void hh_rt_report_write(const hh_rt_site *only);
/* Fork (fork.c): the child's report is its own (a file of its own when the path holds %p). */
void hh_rt_report_postfork_child(void);

/* ---- Next (next.c) -------------------------------------------------------------------------- */

/* Resolves every next function (idempotent); the malloc family resolves itself on first use. */
void hh_rt_next_resolve(void);
/* Raw write of all of buf, by the syscall (our own write is hooked). */
void hh_rt_write_all(int fd, const char *buf, size_t len);

#endif /* HH_RTCHECK_H */
