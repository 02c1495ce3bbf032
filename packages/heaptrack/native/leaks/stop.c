/*
 * stop.c — stopping the world for a check: every other thread of /proc/self/task but the
 * tracer's own gets the stop signal; its handler saves the registers and stack pointer of the
 * interrupted context (ucontext) and the thread pointer into its slot (internal.h's
 * hh_stopped) and waits on a futex until the world resumes. A thread that blocks the signal
 * but sleeps in a system call is recorded from /proc/self/task/<tid>/syscall. In deferred mode
 * a thread caught inside a hook, or in hh_stop_later work, only notes the request and stops
 * when it leaves (hh_leaks_park).
 *
 * Owns: the stop signal's handler, the slots, the tracer's thread ids. May call: the kernel
 * (signals, futexes, /proc), track/tracer.h's per-thread flags (hh_in_hook), hh_leaks_on.
 * Allocates nothing: the slots are mmap'd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "leaks/internal.h"
#include "track/tracer.h"

#define HH_MAX_THREADS 8192u
#define HH_MAX_TRACER_TIDS 8u

static struct {
    hh_stopped *slots;
    _Atomic uint32_t n;
    _Atomic int go;
    _Atomic int active;
    bool handler_installed;
    uint32_t unstopped;
} g_stw;

static _Atomic uint32_t g_tracer_tids[HH_MAX_TRACER_TIDS];
static int g_stop_signal; /* HEAPHOOK_LEAK_STOP_SIGNAL */
static long g_stop_timeout_ms;

void hh_leaks_tracer_thread(void) {
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    for (unsigned i = 0; i < HH_MAX_TRACER_TIDS; i++) {
        uint32_t expected = 0;
        if (atomic_compare_exchange_strong(&g_tracer_tids[i], &expected, tid)) return;
    }
}

static bool hh_is_tracer_thread(uint32_t tid) {
    for (unsigned i = 0; i < HH_MAX_TRACER_TIDS; i++) {
        if (atomic_load(&g_tracer_tids[i]) == tid) return true;
    }
    return false;
}

static void hh_stop_handler(int sig, siginfo_t *info, void *ucv) {
    (void)sig;
    (void)info;
    if (!atomic_load(&g_stw.active)) return;
    int saved = errno;
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    uint32_t n = atomic_load_explicit(&g_stw.n, memory_order_acquire);
    hh_stopped *slot = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (atomic_load(&g_stw.slots[i].tid) == tid) {
            slot = &g_stw.slots[i];
            break;
        }
    }
    int state = slot != NULL ? atomic_load(&slot->state) : HH_STOP_NOT_STOPPED;
    if (state == HH_STOP_SIGNALLED && (hh_in_hook || hh_stop_later) &&
        atomic_load_explicit(&hh_leaks_on, memory_order_relaxed) == HH_LEAKS_DEFERRED) {
        /* Inside a hook, with its record reserved and maybe not yet published: stopped here, it
         * would leave the check a record it cannot apply. It stops in HH_LEAVE instead. */
        int signalled = HH_STOP_SIGNALLED;
        if (atomic_compare_exchange_strong(&slot->state, &signalled, HH_STOP_IN_HOOK))
            hh_park_pending = 1;
        errno = saved;
        return;
    }
    if (state == HH_STOP_SIGNALLED || state == HH_STOP_IN_HOOK) {
        ucontext_t *uc = ucv;
#if defined(__x86_64__)
        slot->nregs = NGREG < HH_MAX_REGS ? NGREG : HH_MAX_REGS;
        memcpy(slot->regs, uc->uc_mcontext.gregs, slot->nregs * sizeof(uint64_t));
        slot->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
        slot->nregs = 31;
        memcpy(slot->regs, uc->uc_mcontext.regs, 31 * sizeof(uint64_t));
        slot->sp = (uintptr_t)uc->uc_mcontext.sp;
#else
#error "leak checking: registers from the ucontext are read for x86_64 and aarch64 only"
#endif
        slot->tp = hh_thread_pointer();
        atomic_store(&slot->state, HH_STOP_STOPPED);
        while (atomic_load(&g_stw.go) == 0) {
            syscall(SYS_futex, &g_stw.go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        }
        atomic_store(&slot->state, HH_STOP_RESUMED);
    }
    errno = saved;
}

HH_TLS int hh_park_pending;
HH_TLS int hh_stop_later;

void hh_leaks_park(void) {
    hh_park_pending = 0;
    int saved = errno;
    /* The handler runs again, now outside the hook, and stops this thread there. */
    syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), g_stop_signal);
    errno = saved;
}

struct hh_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Signals every thread of the process not yet signalled; returns how many. */
static uint32_t hh_signal_new_threads(uint32_t self, pid_t pid) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint32_t added = 0;
    char buf[4096];
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got <= 0) break;
        for (long off = 0; off < got;) {
            struct hh_dirent64 *d = (struct hh_dirent64 *)(buf + off);
            off += d->d_reclen;
            uint32_t tid = 0;
            const char *c = d->d_name;
            if (*c < '0' || *c > '9') continue;
            while (*c >= '0' && *c <= '9') tid = tid * 10 + (uint32_t)(*c++ - '0');
            if (tid == self || hh_is_tracer_thread(tid)) continue;
            uint32_t n = atomic_load(&g_stw.n);
            bool known = false;
            for (uint32_t i = 0; i < n && !known; i++) {
                known = atomic_load(&g_stw.slots[i].tid) == tid ||
                        g_stw.slots[i].sp == (uintptr_t)tid; /* sp holds the tid of a lost one */
            }
            if (known || n >= HH_MAX_THREADS) continue;
            hh_stopped *slot = &g_stw.slots[n];
            memset(slot, 0, sizeof *slot);
            atomic_store(&slot->tid, tid);
            atomic_store_explicit(&g_stw.n, n + 1, memory_order_release);
            if (syscall(SYS_tgkill, pid, tid, g_stop_signal) != 0) {
                atomic_store(&slot->tid, 0);
                atomic_store(&slot->state, HH_STOP_NOT_STOPPED);
                slot->sp = tid;
                continue;
            }
            added++;
        }
    }
    close(fd);
    return added;
}

static const char *hh_parse_hex(const char *p, uintptr_t *out) {
    uintptr_t v = 0;
    if (p[0] == '0' && p[1] == 'x') p += 2;
    for (;; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0) break;
        v = v * 16 + (uintptr_t)d;
    }
    *out = v;
    return p;
}

/* A thread that does not take the stop signal (it blocks it, as threads that sigwait do) but
 * sleeps in a system call: /proc/self/task/<tid>/syscall gives its stack pointer, the field
 * before the last. True when the slot was filled that way. */
static bool hh_blocked_in_kernel(hh_stopped *s, uint32_t tid) {
    char path[64] = "/proc/self/task/";
    size_t n = 16;
    char digits[16];
    size_t k = 0;
    do {
        digits[k++] = (char)('0' + tid % 10);
        tid /= 10;
    } while (tid != 0);
    while (k > 0) path[n++] = digits[--k];
    memcpy(path + n, "/syscall", 9);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[256];
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) return false;
    buf[got] = '\0';
    if (buf[0] < '0' || buf[0] > '9') return false; /* "running", or "-1 sp pc" is not asleep */
    uintptr_t fields[9];
    int nf = 0;
    const char *p = buf;
    while (nf < 9) {
        while (*p == ' ') p++;
        if (*p == '\0' || *p == '\n') break;
        if (p[0] == '0' && p[1] == 'x') {
            p = hh_parse_hex(p, &fields[nf++]);
        } else {
            uintptr_t v = 0;
            while (*p >= '0' && *p <= '9') v = v * 10 + (uintptr_t)(*p++ - '0');
            fields[nf++] = v;
        }
    }
    if (nf != 9) return false; /* nr, 6 arguments, sp, pc */
    s->sp = fields[7];
    s->tp = 0;
    s->nregs = 0;
    int signalled = HH_STOP_SIGNALLED;
    return atomic_compare_exchange_strong(&s->state, &signalled, HH_STOP_IN_KERNEL);
}

/* Stops every other thread (but the tracer's). With in_hook_grace_ns > 0, gives up (returns
 * false, the world still to be resumed) when after that long the only threads not stopped are
 * inside a hook (deferred mode: they stop when they leave it). */
bool hh_stop_world(uint64_t in_hook_grace_ns) {
    if (!g_stw.handler_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = hh_stop_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigfillset(&sa.sa_mask);
        sigaction(g_stop_signal, &sa, NULL);
        g_stw.handler_installed = true;
    }
    if (g_stw.slots == NULL) g_stw.slots = hh_map(HH_MAX_THREADS * sizeof(hh_stopped));
    atomic_store(&g_stw.n, 0);
    atomic_store(&g_stw.go, 0);
    g_stw.unstopped = 0;
    if (g_stw.slots == NULL) return true;
    atomic_store(&g_stw.active, 1);
    uint32_t self = (uint32_t)syscall(SYS_gettid);
    pid_t pid = getpid();
    uint64_t start = hh_mono(), deadline = start + (uint64_t)g_stop_timeout_ms * 1000000u;
    for (int round = 0; round < 32; round++) {
        if (hh_signal_new_threads(self, pid) == 0 && round > 0) break;
        long pause = 20;
        uint64_t kernel_after = hh_mono() + 20000000u; /* 20 ms: then look at sleepers */
        for (;;) {
            bool waiting = false, only_in_hooks = true;
            uint32_t n = atomic_load(&g_stw.n);
            for (uint32_t i = 0; i < n; i++) {
                hh_stopped *s = &g_stw.slots[i];
                int state = atomic_load(&s->state);
                if (state != HH_STOP_SIGNALLED && state != HH_STOP_IN_HOOK) continue;
                uint32_t tid = atomic_load(&s->tid);
                if (syscall(SYS_tgkill, pid, tid, 0) != 0) { /* exited meanwhile */
                    atomic_store(&s->tid, 0);
                    atomic_store(&s->state, HH_STOP_NOT_STOPPED);
                    s->sp = tid;
                    continue;
                }
                /* (Not a thread inside a hook: that one is on its way to stop.) */
                if (state == HH_STOP_SIGNALLED && hh_mono() > kernel_after &&
                    hh_blocked_in_kernel(s, tid))
                    continue;
                waiting = true;
                only_in_hooks = only_in_hooks && state == HH_STOP_IN_HOOK;
            }
            if (!waiting) break;
            if (in_hook_grace_ns > 0 && only_in_hooks && hh_mono() > start + in_hook_grace_ns)
                return false;
            if (hh_mono() > deadline) {
                for (uint32_t i = 0; i < n; i++) {
                    hh_stopped *s = &g_stw.slots[i];
                    uint32_t tid = atomic_load(&s->tid);
                    int signalled = HH_STOP_SIGNALLED, in_hook = HH_STOP_IN_HOOK;
                    atomic_store(&s->tid, 0);
                    if (atomic_compare_exchange_strong(&s->state, &signalled,
                                                       HH_STOP_NOT_STOPPED) ||
                        atomic_compare_exchange_strong(&s->state, &in_hook, HH_STOP_NOT_STOPPED)) {
                        s->sp = tid;
                        g_stw.unstopped++;
                    } else {
                        atomic_store(&s->tid, tid);
                    }
                }
                break;
            }
            hh_pause_us(pause);
            if (pause < 2000) pause *= 2;
        }
    }
    return true;
}

void hh_resume_world(void) {
    if (g_stw.slots == NULL) return;
    atomic_store(&g_stw.go, 1);
    syscall(SYS_futex, &g_stw.go, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    uint32_t n = atomic_load(&g_stw.n);
    uint64_t deadline = hh_mono() + 2000000000u;
    for (uint32_t i = 0; i < n; i++) {
        while (atomic_load(&g_stw.slots[i].state) == HH_STOP_STOPPED && hh_mono() < deadline)
            sched_yield();
    }
    atomic_store(&g_stw.active, 0);
}

/* Deferred mode: the world stopped with no thread inside a hook. A thread that stays in one is
 * mostly waiting for a lock that a stopped thread holds outside the hooks (glibc takes its arena
 * lock at thread exit through internal calls): the world resumes for a moment, to let it go, and
 * stops again. The last attempt waits as long as HEAPHOOK_LEAK_STOP_TIMEOUT_MS allows, and a
 * thread still inside a hook then is left running (its record holds the table back). */
#define HH_IN_HOOK_GRACE_NS (20 * 1000 * 1000ull)
#define HH_STOP_ATTEMPTS 20

void hh_stop_world_outside_hooks(void) {
    for (int attempt = 1; attempt < HH_STOP_ATTEMPTS; attempt++) {
        if (hh_stop_world(HH_IN_HOOK_GRACE_NS)) return;
        hh_resume_world();
        hh_pause_us(500L * attempt);
    }
    hh_stop_world(0);
}

void hh_stop_configure(int signal, long timeout_ms) {
    g_stop_signal = signal;
    g_stop_timeout_ms = timeout_ms;
}

const hh_stopped *hh_stopped_threads(uint32_t *n) {
    *n = g_stw.slots != NULL ? atomic_load(&g_stw.n) : 0;
    return g_stw.slots;
}

void hh_stop_fork_child(void) {
    for (unsigned i = 0; i < HH_MAX_TRACER_TIDS; i++) atomic_store(&g_tracer_tids[i], 0);
    atomic_store(&g_stw.active, 0);
}
