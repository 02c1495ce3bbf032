/*
 * state.c — which threads are in a real-time context, kept per thread without a system call
 * per hook.
 *
 * A thread is in the context while its policy is SCHED_FIFO, SCHED_RR or SCHED_DEADLINE (read
 * when the library loads and when a thread starts; afterwards taken from the calls that change
 * it, sched_hooks.c) or while it is marked (heaphook_rt_enter/exit, RTSan's
 * __rtsan_realtime_enter/exit; nesting), and checked unless __rtsan_off/__rtsan_disable holds.
 * HEAPHOOK_RT_MARK_ONLY=1 ignores policies.
 *
 * The registry (a fixed table: nothing here allocates through the hooked path) maps threads to
 * their state, so that pthread_setschedparam on another thread reaches that thread's flag, and
 * keeps the page faults each thread took inside the context (minflt/majflt of
 * /proc/self/task/<tid>/stat, read at each entry and exit of the context).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "next.h"
#include "sys.h"

HH_TLS hh_rt_thread t_rt = {.slot = -1};
hh_rt_options hh_rt_opts;

/* ---- The registry ------------------------------------------------------------------------ */

#define HH_RT_MAX_THREADS 1024

typedef struct hh_rt_registered {
    _Atomic int lock;     /* guards state and the fault fields */
    _Atomic pid_t tid;    /* 0: free */
    pid_t last_tid;       /* the thread's tid, kept for the report after it ended */
    unsigned long handle; /* its pthread_t */
    hh_rt_thread *state;  /* the thread's t_rt while it runs, NULL after */
    bool ever_in_context; /* reported */
    bool open;            /* inside the context since open_* were read */
    int policy, priority; /* the last real-time ones (for the report) */
    char name[16];
    uint64_t minflt, majflt; /* faults of closed intervals */
    uint64_t open_minflt, open_majflt;
} hh_rt_registered;

static hh_rt_registered hh_threads[HH_RT_MAX_THREADS];

pid_t hh_rt_gettid(void) {
    return (pid_t)HEAPHOOK_OS_UNOBSERVED(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

/* Reads a small /proc file into buf (NUL-terminated); returns its length or -1. */
static long hh_read_proc(const char *path, char *buf, size_t cap) {
    long fd =
        HEAPHOOK_OS_UNOBSERVED(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0) return -1;
    long n = HEAPHOOK_OS_UNOBSERVED(SYS_read, fd, buf, cap - 1, 0, 0, 0);
    HEAPHOOK_OS_UNOBSERVED(SYS_close, fd, 0, 0, 0, 0, 0);
    if (n < 0) return -1;
    buf[n] = '\0';
    return n;
}

static char *hh_put_uint(char *p, unsigned long v) {
    char digits[24];
    int n = 0;
    do digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0) *p++ = digits[--n];
    return p;
}

static void hh_task_path(char *buf, pid_t tid, const char *leaf) {
    char *p = buf;
    memcpy(p, "/proc/self/task/", 16);
    p = hh_put_uint(p + 16, (unsigned long)tid);
    *p++ = '/';
    size_t n = strlen(leaf);
    memcpy(p, leaf, n + 1);
}

/* The thread's minflt and majflt: tid 0 is the calling thread (getrusage, one system call);
 * another thread's are fields 10 and 12 of its stat line, after the name. */
static void hh_faults_of(pid_t tid, uint64_t *minflt, uint64_t *majflt) {
    char path[64], stat[1024];
    *minflt = *majflt = 0;
    if (tid == 0) {
        struct rusage usage;
        if (HEAPHOOK_OS_UNOBSERVED(SYS_getrusage, RUSAGE_THREAD, &usage, 0, 0, 0, 0) == 0) {
            *minflt = (uint64_t)usage.ru_minflt;
            *majflt = (uint64_t)usage.ru_majflt;
        }
        return;
    }
    hh_task_path(path, tid, "stat");
    if (hh_read_proc(path, stat, sizeof stat) < 0) return;
    char *p = strrchr(stat, ')'); /* the name may hold spaces and parentheses */
    if (p == NULL) return;
    p += 2;
    uint64_t fields[10] = {0};
    for (int field = 3; field <= 12 && *p != '\0'; field++) {
        uint64_t v = 0;
        while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
        fields[field - 3] = v;
        while (*p != ' ' && *p != '\0') p++;
        if (*p == ' ') p++;
    }
    *minflt = fields[10 - 3];
    *majflt = fields[12 - 3];
}

static void hh_name_of(pid_t tid, char name[16]) {
    char path[64], comm[32];
    if (tid == 0) {
        if (HEAPHOOK_OS_UNOBSERVED(SYS_prctl, PR_GET_NAME, (long)name, 0, 0, 0, 0) != 0)
            name[0] = '\0';
        name[15] = '\0';
        return;
    }
    hh_task_path(path, tid, "comm");
    long n = hh_read_proc(path, comm, sizeof comm);
    if (n <= 0) {
        name[0] = '\0';
        return;
    }
    if (comm[n - 1] == '\n') comm[--n] = '\0';
    size_t len = (size_t)n < 15 ? (size_t)n : 15;
    memcpy(name, comm, len);
    name[len] = '\0';
}

static int hh_register(pid_t tid, unsigned long handle, hh_rt_thread *state) {
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < HH_RT_MAX_THREADS; i++) {
            hh_rt_registered *r = &hh_threads[i];
            /* first pass: never used slots; second: slots of ended threads with nothing to report
             */
            if (atomic_load(&r->tid) != 0) continue;
            if (pass == 0 && r->handle != 0) continue;
            if (r->ever_in_context) continue;
            hh_rt_lock(&r->lock);
            if (atomic_load(&r->tid) == 0 && !r->ever_in_context) {
                atomic_store(&r->tid, tid);
                r->last_tid = tid;
                r->handle = handle;
                r->state = state;
                hh_rt_unlock(&r->lock);
                return i;
            }
            hh_rt_unlock(&r->lock);
        }
    }
    return -1; /* full: the thread is checked, but others cannot change its policy for us */
}

static bool hh_context_of(const hh_rt_thread *t) {
    return t->mark_depth > 0 || (!hh_rt_opts.mark_only && hh_rt_is_rt_policy(t->policy));
}

/* Applies t's state: entering or leaving the context opens or closes a fault interval. The
 * caller holds the slot's lock when t is another thread's. */
static void hh_apply(hh_rt_thread *t, hh_rt_registered *r, pid_t tid) {
    bool context = hh_context_of(t);
    if (context != t->in_context && r != NULL) {
        uint64_t minflt, majflt;
        hh_faults_of(tid, &minflt, &majflt);
        if (context) {
            r->open = true;
            r->ever_in_context = true;
            r->open_minflt = minflt;
            r->open_majflt = majflt;
            r->policy = t->policy;
            r->priority = t->priority;
            hh_name_of(tid, r->name);
        } else if (r->open) {
            r->open = false;
            hh_name_of(tid, r->name); /* it may have been named since it entered */
            r->minflt += minflt - r->open_minflt;
            r->majflt += majflt - r->open_majflt;
        }
    }
    if (context && r != NULL && hh_rt_is_rt_policy(t->policy)) {
        r->policy = t->policy;
        r->priority = t->priority;
    }
    t->in_context = context;
    t->active = context && t->off_depth == 0;
}

static void hh_apply_own(void) {
    hh_rt_registered *r = t_rt.slot >= 0 ? &hh_threads[t_rt.slot] : NULL;
    if (r != NULL) hh_rt_lock(&r->lock);
    hh_apply(&t_rt, r, 0);
    if (r != NULL) hh_rt_unlock(&r->lock);
}

void hh_rt_refresh(void) {
    t_rt.active = t_rt.in_context && t_rt.off_depth == 0;
}

bool hh_rt_is_rt_policy(int policy) {
    return policy == SCHED_FIFO || policy == SCHED_RR
#ifdef SCHED_DEADLINE
           || policy == SCHED_DEADLINE
#else
           || policy == 6
#endif
        ;
}

void hh_rt_read_own_policy(void) {
    long policy = HEAPHOOK_OS_UNOBSERVED(SYS_sched_getscheduler, 0, 0, 0, 0, 0, 0);
    struct sched_param param = {0};
    HEAPHOOK_OS_UNOBSERVED(SYS_sched_getparam, 0, &param, 0, 0, 0, 0);
    if (policy >= 0) {
        t_rt.policy = (int)policy & ~SCHED_RESET_ON_FORK;
        t_rt.priority = param.sched_priority;
    }
    hh_apply_own();
}

void hh_rt_policy_changed(pid_t tid, int policy, int priority, bool priority_only) {
    pid_t self = hh_rt_gettid();
    if (tid == 0 || tid == self) {
        if (!priority_only) t_rt.policy = policy;
        t_rt.priority = priority;
        hh_apply_own();
        return;
    }
    for (int i = 0; i < HH_RT_MAX_THREADS; i++) {
        hh_rt_registered *r = &hh_threads[i];
        if (atomic_load(&r->tid) != tid) continue;
        hh_rt_lock(&r->lock);
        if (atomic_load(&r->tid) == tid && r->state != NULL) {
            if (!priority_only) r->state->policy = policy;
            r->state->priority = priority;
            hh_apply(r->state, r, tid);
        }
        hh_rt_unlock(&r->lock);
        return;
    }
}

void hh_rt_policy_changed_handle(unsigned long handle, int policy, int priority,
                                 bool priority_only) {
    if (handle == (unsigned long)pthread_self()) {
        hh_rt_policy_changed(0, policy, priority, priority_only);
        return;
    }
    for (int i = 0; i < HH_RT_MAX_THREADS; i++) {
        hh_rt_registered *r = &hh_threads[i];
        pid_t tid = atomic_load(&r->tid);
        if (tid == 0 || r->handle != handle) continue;
        hh_rt_policy_changed(tid, policy, priority, priority_only);
        return;
    }
}

/* ---- Threads ------------------------------------------------------------------------------ */

typedef struct hh_start {
    void *(*start)(void *);
    void *arg;
} hh_start;

static pthread_key_t hh_exit_key;
static bool hh_exit_key_made;

void *hh_rt_thread_start_arg(void *(*start)(void *), void *arg) {
    hh_start *s = hh_next.alloc.malloc(sizeof *s); /* the allocator under us: not a hooked call */
    if (s != NULL) {
        s->start = start;
        s->arg = arg;
    }
    return s;
}

/* The thread ends (returned or pthread_exit: the key's destructor): its interval closes. */
static void hh_thread_ends(void *unused) {
    (void)unused;
    if (t_rt.slot < 0) return;
    hh_rt_registered *r = &hh_threads[t_rt.slot];
    t_rt.mark_depth = 0;
    t_rt.policy = SCHED_OTHER;
    hh_rt_lock(&r->lock);
    hh_apply(&t_rt, r, 0);
    r->state = NULL;
    atomic_store(&r->tid, 0);
    hh_rt_unlock(&r->lock);
    t_rt.slot = -1;
}

void *hh_rt_thread_start(void *arg) {
    hh_start s = *(hh_start *)arg;
    hh_next.alloc.free(arg);
    t_rt.slot = hh_register(hh_rt_gettid(), (unsigned long)pthread_self(), &t_rt);
    if (hh_exit_key_made) pthread_setspecific(hh_exit_key, (void *)1);
    hh_rt_read_own_policy(); /* inherited, or set by the creator's attributes */
    return s.start(s.arg);
}

int hh_rt_thread_summaries(hh_rt_thread_summary *out, int max) {
    int n = 0;
    for (int i = 0; i < HH_RT_MAX_THREADS && n < max; i++) {
        hh_rt_registered *r = &hh_threads[i];
        hh_rt_lock(&r->lock);
        if (r->ever_in_context) {
            hh_rt_thread_summary *s = &out[n++];
            pid_t tid = atomic_load(&r->tid);
            s->tid = r->last_tid;
            s->policy = r->policy;
            s->priority = r->priority;
            memcpy(s->name, r->name, sizeof s->name);
            s->minflt = r->minflt;
            s->majflt = r->majflt;
            if (r->open && tid != 0) {
                uint64_t minflt, majflt;
                pid_t who = tid == hh_rt_gettid() ? 0 : tid;
                hh_faults_of(who, &minflt, &majflt);
                hh_name_of(who, s->name);
                s->minflt += minflt - r->open_minflt;
                s->majflt += majflt - r->open_majflt;
            }
        }
        hh_rt_unlock(&r->lock);
    }
    return n;
}

/* ---- Marks: heaphook/rt.h and RTSan's names ------------------------------------------------- */

HH_EXPORT void heaphook_rt_enter(void) {
    t_rt.mark_depth++;
    hh_apply_own();
}

HH_EXPORT void heaphook_rt_exit(void) {
    if (t_rt.mark_depth > 0) t_rt.mark_depth--;
    hh_apply_own();
}

HH_EXPORT void __rtsan_realtime_enter(void) {
    heaphook_rt_enter();
}
HH_EXPORT void __rtsan_realtime_exit(void) {
    heaphook_rt_exit();
}

HH_EXPORT void __rtsan_off(void) {
    t_rt.off_depth++;
    hh_rt_refresh();
}
HH_EXPORT void __rtsan_on(void) {
    if (t_rt.off_depth > 0) t_rt.off_depth--;
    hh_rt_refresh();
}
/* LLVM 20's spellings of the same pair. */
HH_EXPORT void __rtsan_disable(void) {
    __rtsan_off();
}
HH_EXPORT void __rtsan_enable(void) {
    __rtsan_on();
}
HH_EXPORT void __rtsan_ensure_initialized(void) {}

/* ---- Fork, load, exit --------------------------------------------------------------------- */

/* Fork (fork.c): the child is the forking thread alone. Nothing was locked for the fork: every
 * other thread's slot is wiped, whatever state it was left in, and the lock of the forking
 * thread's own is re-initialised. */
void hh_rt_registry_postfork_child(void) {
    /* only the forking thread lives on: the others' slots are free again */
    for (int i = 0; i < HH_RT_MAX_THREADS; i++) {
        if (i == t_rt.slot) continue;
        hh_rt_registered *r = &hh_threads[i];
        atomic_store(&r->lock, 0);
        atomic_store(&r->tid, 0);
        r->state = NULL;
        r->ever_in_context = false;
        r->open = false;
        r->minflt = r->majflt = 0;
    }
    if (t_rt.slot >= 0) {
        hh_rt_registered *r = &hh_threads[t_rt.slot];
        atomic_store(&r->lock, 0);
        atomic_store(&r->tid, hh_rt_gettid());
        r->last_tid = hh_rt_gettid();
        r->minflt = r->majflt = 0;
        if (r->open) hh_faults_of(0, &r->open_minflt, &r->open_majflt);
    }
}

__attribute__((constructor(101))) static void hh_rt_load(void) {
    hh_rt_next_resolve();
    hh_rt_options_load();
    hh_rt_violations_init();
    hh_rt_suppressions_load();
    hh_rt_report_open();
    hh_exit_key_made = pthread_key_create(&hh_exit_key, hh_thread_ends) == 0;
    hh_rt_fork_register();
    t_rt.slot = hh_register(hh_rt_gettid(), (unsigned long)pthread_self(), &t_rt);
    hh_rt_read_own_policy();
}

__attribute__((destructor(101))) static void hh_rt_unload(void) {
    t_rt.active = 0; /* the report's own work is not the program's */
    t_rt.off_depth++;
    hh_rt_trace_counts();
    hh_rt_report_write(NULL);
}
