/*
 * violations.c — the fixed table of violations. A violation is (call, call site, thread): the
 * first one takes the stack (heaptrack's unwinder), the thread's name, policy and priority;
 * every later one is an atomic increment. Nothing allocates: the table is static, the stack a
 * fixed array; a full table counts what it drops.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

#include "heaphook/trace_rt.h"
#include "next.h"
#include "sys.h"
#include "track/unwinder.h"

static hh_rt_site hh_sites[HH_RT_MAX_SITES];

/* heaptrack's tracer, when it is in the process: weak, so the guard alone runs unchanged (its
 * address is then NULL, resolved once at load). */
extern __typeof__(heaphook_trace_rt_violation) heaphook_trace_rt_violation __attribute__((weak));
static _Atomic uint64_t hh_dropped;
/* The tracer's range when it is in the process (set once at load, read-only after). */
static uintptr_t hh_tracer_lo, hh_tracer_hi;

/* Set by the first violation under --abort: the rest of the process is on its way out. */
static _Atomic int hh_aborting;

#define HH_RT_CALL_NAME(id, name) name,
static const char *const hh_call_names[] = {HH_RT_CALLS(HH_RT_CALL_NAME)};
#undef HH_RT_CALL_NAME

const char *hh_rt_call_name(enum hh_rt_call call) {
    return (unsigned)call < HH_CALL_COUNT ? hh_call_names[call] : "?";
}

hh_rt_site *hh_rt_sites(void) {
    return hh_sites;
}

uint64_t hh_rt_sites_dropped(void) {
    return atomic_load(&hh_dropped);
}

/* This library's address range: its frames are left out of every stack. */
typedef struct hh_range_query {
    uintptr_t base, lo, hi;
} hh_range_query;

static int hh_range_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    hh_range_query *q = arg;
    if (info->dlpi_addr != q->base) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (q->lo == 0 || lo < q->lo) q->lo = lo;
        if (hi > q->hi) q->hi = hi;
    }
    return 1;
}

void hh_rt_violations_init(void) {
    memset(hh_sites, 0, sizeof hh_sites);
    atomic_store(&hh_dropped, 0);
    static bool unwinder_ready;
    if (unwinder_ready) return;
    unwinder_ready = true;
    Dl_info info;
    hh_range_query q = {0, 0, 0};
    if (dladdr((void *)hh_rt_violations_init, &info) != 0) {
        q.base = (uintptr_t)info.dli_fbase;
        /* dli_fbase is the lowest mapped address; dlpi_addr the load bias: equal for a .so */
        dl_iterate_phdr(hh_range_cb, &q);
    }
    hh_unwind_init(q.lo, q.hi, true);
    /* Under the tracer (heaptrack first in LD_PRELOAD), its malloc calls ours: its frames are
     * left out of our stacks too, so the report starts at the program's call, as it does alone. */
    hh_range_query t = {0, 0, 0};
    if (heaphook_trace_rt_violation != NULL &&
        dladdr((void *)heaphook_trace_rt_violation, &info) != 0) {
        t.base = (uintptr_t)info.dli_fbase;
        dl_iterate_phdr(hh_range_cb, &t);
        if (t.hi > t.lo) {
            hh_unwind_skip_also(t.lo, t.hi);
            hh_tracer_lo = t.lo;
            hh_tracer_hi = t.hi;
        }
    }
}

static uint64_t hh_key(enum hh_rt_call call, uintptr_t site, pid_t tid) {
    uint64_t h = (uint64_t)site * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)call + 1) * 0xc2b2ae3d27d4eb4full;
    h ^= ((uint64_t)(uint32_t)tid + 1) * 0x165667b19e3779f9ull;
    h ^= h >> 29;
    return h != 0 ? h : 1;
}

/* The slot of this violation, claimed and filled at its first call; NULL when full. */
static hh_rt_site *hh_site_of(enum hh_rt_call call, uintptr_t site, bool *first) {
    pid_t tid = hh_rt_gettid();
    uint64_t key = hh_key(call, site, tid);
    *first = false;
    for (unsigned probe = 0; probe < HH_RT_MAX_SITES; probe++) {
        hh_rt_site *s = &hh_sites[(key + probe) & (HH_RT_MAX_SITES - 1)];
        uint64_t seen = atomic_load_explicit(&s->key, memory_order_acquire);
        if (seen == 0) {
            uint64_t expected = 0;
            if (atomic_compare_exchange_strong(&s->key, &expected, key)) {
                s->call = call;
                s->site = site;
                s->tid = tid;
                s->policy = t_rt.policy;
                s->priority = t_rt.priority;
                if (HEAPHOOK_OS_UNOBSERVED(SYS_prctl, PR_GET_NAME, (long)s->thread_name, 0, 0, 0,
                                           0) != 0)
                    s->thread_name[0] = '\0';
                s->thread_name[15] = '\0';
                s->excluded = hh_rt_opts.has_thread_filter && !hh_rt_thread_checked(s->thread_name);
                /* the stack, from here: the frames of this library are skipped */
                s->frame_count = hh_unwind(s->frames, HH_RT_MAX_FRAMES);
                hh_rt_trace_first(s);
                atomic_store_explicit(&s->ready, 1, memory_order_release);
                *first = true;
                return s;
            }
            seen = expected;
        }
        if (seen == key) return s;
    }
    atomic_fetch_add(&hh_dropped, 1);
    return NULL;
}

void hh_rt_violation(enum hh_rt_call call, uintptr_t site) {
    t_rt.active = 0; /* until the intercepted call returns (hh_rt_refresh) */
    int saved_errno = errno;
    if (!hh_rt_armed()) { /* the warm-up: nothing counts yet */
        errno = saved_errno;
        return;
    }
    if (HH_UNLIKELY(site >= hh_tracer_lo && site < hh_tracer_hi)) {
        /* The tracer's malloc called ours: every call would share its return address. The
         * site is the program's call, the first frame outside both libraries. */
        uintptr_t caller;
        if (hh_unwind(&caller, 1) == 1) site = caller;
    }
    bool first;
    hh_rt_site *s = hh_site_of(call, site, &first);
    if (s != NULL) atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
    if (HH_UNLIKELY(hh_rt_opts.abort_on_first) && s != NULL && first && !s->excluded &&
        !hh_rt_suppressed(call, s->frames, s->frame_count)) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&hh_aborting, &expected, 1)) {
            hh_rt_report_write(s);
            /* as RTSan: stop here, with the default action of SIGABRT (a core, status 134) */
            signal(SIGABRT, SIG_DFL);
            raise(SIGABRT);
        }
        for (;;) sched_yield(); /* another thread is stopping the process */
    }
    errno = saved_errno;
}

/* ---- Handing violations to the tracer --------------------------------------------------- */

static heaphook_rt_violation hh_trace_view(const hh_rt_site *s, uint64_t count) {
    heaphook_rt_violation v = {
        .site = (uint32_t)(s - hh_sites) + 1,
        .tid = (uint32_t)s->tid,
        .stack = s->traced_stack,
        .policy = s->policy,
        .priority = s->priority,
        .count = count,
        .call = hh_rt_call_name((enum hh_rt_call)s->call),
        .thread_name = s->thread_name,
    };
    return v;
}

void hh_rt_trace_first(hh_rt_site *s) {
    s->traced_stack = 0;
    if (heaphook_trace_rt_violation == NULL || s->excluded) return;
    /* on the violating thread, inside its hook: the tracer walks this stack itself */
    heaphook_rt_violation v = hh_trace_view(s, 1);
    s->traced_stack = heaphook_trace_rt_violation(&v);
}

/* The tracer's exit path calls this before its log ends: its destructor may run before ours. */
HH_EXPORT void heaphook_rt_guard_flush(void) {
    int saved_active = t_rt.active;
    t_rt.active = 0; /* the tracer's work is not the program's */
    hh_rt_trace_counts();
    t_rt.active = saved_active;
}

void hh_rt_trace_counts(void) {
    if (heaphook_trace_rt_violation == NULL) return;
    for (int i = 0; i < HH_RT_MAX_SITES; i++) {
        hh_rt_site *s = &hh_sites[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire) || s->excluded) continue;
        heaphook_rt_violation v = hh_trace_view(s, atomic_load(&s->count));
        (void)heaphook_trace_rt_violation(&v);
    }
}
