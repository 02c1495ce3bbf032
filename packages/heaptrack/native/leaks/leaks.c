/*
 * leaks.c — leak checking as the tracer and the program see it (README "Leak checking"): the
 * public check API (include/heaphook/leaks.h: checks, results, printing), the thread that runs
 * a check on HEAPHOOK_LEAK_SIGNAL, the HEAPHOOK_LEAK_* configuration, who keeps the live-block
 * table, fork, and the check at exit. The other files of leaks/ are listed in internal.h.
 *
 * Who keeps the table (leaks.h, hh_leaks_on): synchronous, the hooks, after an allocation
 * returns and before a block is released; deferred (standalone, lossless, not sampling, no
 * precise API), the drain thread, from the event records it reads off the ring anyway, so the
 * table's cache misses are the drain thread's, on another core, and not the program's. The
 * table then lags the program by the records not yet read, so a check stops the world with no
 * thread inside a hook and applies the rest itself (tracer.h's cursor). The precise API needs
 * the table as the program sees it: its first use turns the process synchronous for good
 * (hh_leaks_go_sync, mark.c).
 *
 * Owns: hh_leaks_on, the configuration, the signal thread and its pipe. May call: the other
 * files of leaks/ (internal.h), track/tracer.h, the core's config and log.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/leaks.h"
#include "heaphook/log.h"
#include "leaks/internal.h"
#include "track/tracer.h"

_Atomic int hh_leaks_on;
static bool g_at_exit; /* HEAPHOOK_LEAK_CHECK */
static bool g_auto;    /* the table is kept for the automatic check */
static int g_signal;   /* HEAPHOOK_LEAK_SIGNAL, 0 = none */

void hh_leaks_defer(void) {
    int on = atomic_load(&hh_leaks_on);
    if (on == HH_LEAKS_OFF) return;
    if (g_auto && !hh_types_in_use() && hh_tracer_leaks_can_defer()) {
        /* From the next record the drain thread reads (after a re-attach, not from a discarded
         * one). Records the hooks have applied already are applied again, in ring order: the
         * same table (an address's last call decides). */
        hh_tracer_leaks_lock();
        hh_tracer_leaks_restart();
        atomic_store(&hh_leaks_on, HH_LEAKS_DEFERRED);
        hh_tracer_leaks_unlock();
    } else if (on == HH_LEAKS_DEFERRED) {
        atomic_store(&hh_leaks_on, HH_LEAKS_SYNC); /* a fork child that could not start a drain */
    }
}

/* The caller's stack from this frame up is scanned; __builtin_unwind_init spills the
 * callee-saved registers (which may hold the caller's pointers) into this frame. */
#define HH_CHECK_HERE(trigger, precise, result)                  \
    do {                                                         \
        __builtin_unwind_init();                                 \
        volatile uintptr_t marker = 0;                           \
        result = hh_check(trigger, precise, (uintptr_t)&marker); \
        (void)marker;                                            \
    } while (0)

HH_EXPORT __attribute__((noinline)) long heaphook_leak_check(void) {
    if (!g_auto) return -1;
    long r;
    HH_CHECK_HERE(HH_TRIGGER_API, false, r);
    return r;
}

HH_EXPORT __attribute__((noinline)) long heaphook_leak_check_precise(void) {
    if (!atomic_load(&hh_leaks_on)) return -1;
    return hh_check(HH_TRIGGER_API, true, 0);
}

HH_EXPORT long heaphook_leaks_foreach(int (*fn)(const heaphook_leak *, void *), void *arg) {
    long calls = 0;
    uint64_t n;
    const hh_entry *result = hh_check_result(&n);
    for (uint64_t i = 0; i < n && fn != NULL; i++) {
        const hh_type *t = hh_type_of(result[i].meta);
        heaphook_leak leak = {
            (void *)(uintptr_t)result[i].addr, (size_t)(result[i].meta & HH_META_SIZE),
            (int)(result[i].meta >> HH_META_TYPE_SHIFT), t != NULL ? t->name : ""};
        calls++;
        if (fn(&leak, arg) != 0) break;
    }
    return calls;
}

HH_EXPORT int heaphook_leak_get_summary(heaphook_leak_summary *out) {
    if (out == NULL || !atomic_load(&hh_leaks_on)) return -1;
    uint32_t checks;
    hh_rec_leak_check totals;
    if (!hh_check_last(&checks, &totals)) return 1;
    out->checks = checks;
    out->live_blocks = totals.live;
    out->reachable_blocks = totals.reachable;
    out->reachable_bytes = totals.reachable_bytes;
    out->leaked_blocks = totals.leaked;
    out->leaked_bytes = totals.leaked_bytes;
    return 0;
}

static size_t hh_fmt_hex(char *out, uint64_t v) {
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0);
    out[0] = '0';
    out[1] = 'x';
    for (size_t i = 0; i < n; i++) out[2 + i] = tmp[n - 1 - i];
    return n + 2;
}

static size_t hh_fmt_dec(char *out, uint64_t v) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

static int hh_print_one(const heaphook_leak *leak, void *arg) {
    int fd = *(int *)arg;
    char line[160];
    size_t n = 0;
    memcpy(line, "leak ", 5);
    n = 5;
    n += hh_fmt_hex(line + n, (uintptr_t)leak->ptr);
    line[n++] = ' ';
    n += hh_fmt_dec(line + n, leak->size);
    line[n++] = ' ';
    size_t tl = strlen(leak->type_name);
    if (tl == 0) {
        memcpy(line + n, "-", 1);
        tl = 1;
    } else {
        memcpy(line + n, leak->type_name, tl);
    }
    n += tl;
    line[n++] = '\n';
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, line + done, n - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    return 0;
}

HH_EXPORT void heaphook_leaks_print(int fd) {
    heaphook_leaks_foreach(hh_print_one, &fd);
}

/* HEAPHOOK_LEAK_SIGNAL: the handler writes a byte, the leak thread runs the check. The thread
 * owns the pipe's read end (its argument) and closes it when it ends: at the end of file, once
 * hh_leaks_stop has closed the write end. It is joinable so that a detach can wait for it to
 * have ended; a fork child forgets the parent's (it does not exist there). */
static int g_pipe[2] = {-1, -1};
static pid_t g_pipe_pid;
static bool g_thread_started;
static pthread_t g_thread;
static struct sigaction g_program_action; /* the signal's disposition before ours, for a detach */

/* How long a detach waits for the leak thread to finish a check in progress and end. */
#define HH_LEAK_THREAD_STOP_WAIT_S 2

static void hh_leak_signal_handler(int sig) {
    (void)sig;
    int saved = errno;
    char b = 'c';
    ssize_t r = write(g_pipe[1], &b, 1);
    (void)r;
    errno = saved;
}

static void *hh_leak_thread(void *arg) {
    int fd = (int)(intptr_t)arg;
    hh_busy = 1;
    hh_leaks_tracer_thread();
    char buf[64];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        hh_check(HH_TRIGGER_SIGNAL, false, 0);
    }
    close(fd);
    return NULL;
}

/* A signal by number (decimal, no sign) or name, with or without "SIG", in any case: HUP, USR1,
 * USR2, RTMIN, RTMIN+n, RTMAX, RTMAX-n. Returns its number, or -1 (overflow included). */
static int hh_signal_number(const char *v) {
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
    if (strncasecmp(v, "SIG", 3) == 0) v += 3;
    int base = 0, sign = 1;
    if (strncasecmp(v, "RTMIN", 5) == 0) {
        base = SIGRTMIN;
        v += 5;
    } else if (strncasecmp(v, "RTMAX", 5) == 0) {
        base = SIGRTMAX;
        sign = -1;
        v += 5;
    } else {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strcasecmp(v, names[i].name) == 0) return names[i].sig;
        }
    }
    if (base != 0) {
        if (*v == '\0') return base;
        if (*v++ != (sign > 0 ? '+' : '-')) return -1;
    }
    if (*v < '0' || *v > '9') return -1;
    int n = 0;
    while (*v >= '0' && *v <= '9' && n <= 1000) n = n * 10 + (*v++ - '0');
    if (*v != '\0' || n > 1000) return -1;
    return base + sign * n;
}

/* The signal in variable `name`, or default_sig when unset: for HEAPHOOK_LEAK_SIGNAL one that is
 * safe to catch (its default action ends the program and nothing sends it behind the program's
 * back: not a fault, a job-control or timer signal, SIGCHLD, SIGPIPE, SIGINT, SIGQUIT or SIGTERM)
 * other than the stop signal `stop`; for the stop signal (stop = 0) a real-time one. Anything
 * else stops the program (exit 78, heaphook/config.h). */
static int hh_signal_config(const char *name, int default_sig, int stop) {
    const char *v = heaphook_env_get_unless_secure(name, NULL); /* a signal: see config.h */
    if (v == NULL) return default_sig;
    int sig = hh_signal_number(v);
    bool ok = (sig >= SIGRTMIN && sig <= SIGRTMAX) ||
              (stop != 0 && (sig == SIGHUP || sig == SIGUSR1 || sig == SIGUSR2));
    if (ok && sig != stop) return sig;
    char expected[256];
    heaphook_formatf(expected, sizeof expected,
                     "%s real-time signal (RTMIN..RTMAX: %d..%d; by name, RTMIN+n, RTMAX-n or "
                     "number)%s",
                     stop != 0 ? "HUP, USR1, USR2 or a" : "a", SIGRTMIN, SIGRTMAX,
                     stop != 0 ? " other than HEAPHOOK_LEAK_STOP_SIGNAL's" : "");
    heaphook_config_fail(name, v, expected, stop != 0 ? "USR2" : "RTMAX-2");
}

void hh_leaks_configure(void) {
    g_at_exit = heaphook_env_bool("HEAPHOOK_LEAK_CHECK", NULL, true);
    int stop_signal = hh_signal_config("HEAPHOOK_LEAK_STOP_SIGNAL", SIGRTMAX - 2, 0);
    g_signal = hh_signal_config("HEAPHOOK_LEAK_SIGNAL", 0, stop_signal);
    hh_stop_configure(stop_signal,
                      heaphook_env_long("HEAPHOOK_LEAK_STOP_TIMEOUT_MS", NULL, 1000, 1, 600000));
    g_auto = heaphook_env_bool("HEAPHOOK_LEAK_TRACK", NULL, g_at_exit || g_signal > 0) ||
             g_at_exit || g_signal > 0;
    typedef void (*tls_info_fn)(size_t *, size_t *);
    tls_info_fn info = (tls_info_fn)dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
    if (info != NULL) {
        size_t size = 0, align = 0;
        info(&size, &align);
        if (size > 0 && size < (64u << 20)) hh_check_configure(size);
    }
    if (g_auto) atomic_store(&hh_leaks_on, 1);
}

void hh_leaks_start(void) {
    if (g_signal <= 0) return;
    if (g_pipe_pid != getpid()) {
        if (g_pipe[0] >= 0) close(g_pipe[0]);
        if (g_pipe[1] >= 0) close(g_pipe[1]);
        if (pipe2(g_pipe, O_CLOEXEC) != 0) return;
        for (int i = 0; i < 2; i++) {
            int high = fcntl(g_pipe[i], F_DUPFD_CLOEXEC, 200);
            if (high >= 0) {
                close(g_pipe[i]);
                g_pipe[i] = high;
            }
        }
        fcntl(g_pipe[1], F_SETFL, O_NONBLOCK);
        g_pipe_pid = getpid();
        g_thread_started = false;
    }
    if (g_thread_started) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hh_leak_signal_handler;
    sa.sa_flags = SA_RESTART;
    sigaction(g_signal, &sa, &g_program_action);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    g_thread_started =
        pthread_create(&g_thread, &attr, hh_leak_thread, (void *)(intptr_t)g_pipe[0]) == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void hh_leaks_stop(void) {
    if (!g_thread_started || g_pipe_pid != getpid()) return;
    /* The program's own disposition first, so that no handler of ours runs once the write end
     * is closed (a handler already running on another thread may still write to it: a byte
     * into a closed descriptor, EBADF, is harmless). */
    sigaction(g_signal, &g_program_action, NULL);
    close(g_pipe[1]);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += HH_LEAK_THREAD_STOP_WAIT_S;
    if (pthread_timedjoin_np(g_thread, NULL, &deadline) != 0) {
        heaphook_log_error(
            "heaptrack: the leak-check thread has not ended after %d s; left running",
            HH_LEAK_THREAD_STOP_WAIT_S);
        pthread_detach(g_thread);
    }
    g_pipe[0] = g_pipe[1] = -1; /* the read end is the thread's: it closes it */
    g_pipe_pid = 0;             /* the next start makes a new pipe */
    g_thread_started = false;
}

__attribute__((noinline)) void hh_leaks_at_exit(void) {
    if (!g_at_exit || !atomic_load(&hh_leaks_on)) return;
    long r;
    HH_CHECK_HERE(HH_TRIGGER_EXIT, false, r);
    (void)r;
}

/* Fork, in two steps that the fork module (track/fork.c) puts around the stack trie's lock:
 * the check lock first, the cursor lock and the table last (tracer.h). Deferred, the child's
 * table is the parent's as the drain thread left it: the child applies the records reserved
 * before the fork that it has not (a thread inside a hook at the fork never publishes its
 * record, in the parent's ring as in a synchronous table). */

void hh_leaks_prefork_check(void) {
    hh_check_lock();
}

void hh_leaks_prefork_table(void) {
    hh_tracer_leaks_lock();
    if (atomic_load(&hh_leaks_on) == HH_LEAKS_DEFERRED) hh_tracer_leaks_fork_prepare();
    hh_table_lock();
}

void hh_leaks_postfork_parent_table(void) {
    hh_table_unlock();
    hh_tracer_leaks_unlock();
}

void hh_leaks_postfork_parent_check(void) {
    hh_check_unlock();
}

void hh_leaks_postfork_child_table(void) {
    hh_table_unlock();
    if (atomic_load(&hh_leaks_on) == HH_LEAKS_DEFERRED) hh_tracer_leaks_fork_child();
    hh_tracer_leaks_unlock();
}

void hh_leaks_postfork_child_check(void) {
    hh_check_unlock();
    hh_stop_fork_child();
    hh_check_fork_child();
}
