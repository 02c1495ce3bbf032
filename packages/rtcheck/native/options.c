/*
 * options.c — the guard's variables, read (and checked) when the library loads:
 *
 *   HEAPHOOK_RT_GUARD=report|abort   report every violation at exit, or stop at the first
 *   HEAPHOOK_RT_MARK_ONLY=1          only marked sections are real-time contexts
 *   HEAPHOOK_RT_THREADS=REGEX        only threads whose name (comm) matches count (POSIX ERE)
 *   HEAPHOOK_RT_AFTER=2s|SIGUSR2     a warm-up: nothing counts until this long after load
 *                                    (ms, s, m, h; plain numbers are seconds) or until the
 *                                    process receives the signal (SIGUSR1 or SIGUSR2)
 * A bad value stops the program before main with one line naming the variable.
 */
#include <regex.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "heaphook/config.h"
#include "next.h"

#define HH_NS_PER_MS 1000000ull
#define HH_NS_PER_S 1000000000ull

static regex_t hh_thread_regex;
static _Atomic bool hh_armed = true;
static uint64_t hh_armed_at_ns; /* 0: armed by time is not in use */

static uint64_t hh_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the vDSO: no hooked call */
    return (uint64_t)ts.tv_sec * HH_NS_PER_S + (uint64_t)ts.tv_nsec;
}

bool hh_rt_armed(void) {
    if (HH_LIKELY(atomic_load_explicit(&hh_armed, memory_order_relaxed))) return true;
    if (hh_armed_at_ns != 0 && hh_now_ns() >= hh_armed_at_ns) {
        atomic_store(&hh_armed, true);
        return true;
    }
    return false;
}

static void hh_arm_on_signal(int sig) {
    (void)sig;
    atomic_store(&hh_armed, true);
}

/* "2s", "500ms", "1.5m", "3" (seconds): nanoseconds, or 0 when it is not a duration. */
static uint64_t hh_parse_duration(const char *text) {
    uint64_t whole = 0, frac = 0, frac_scale = 1;
    const char *p = text;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9' && whole < HH_NS_PER_S)
        whole = whole * 10 + (uint64_t)(*p++ - '0');
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9' && frac_scale < HH_NS_PER_S) {
            frac = frac * 10 + (uint64_t)(*p++ - '0');
            frac_scale *= 10;
        }
    }
    uint64_t unit;
    if (strcmp(p, "ms") == 0)
        unit = HH_NS_PER_MS;
    else if (strcmp(p, "s") == 0 || *p == '\0')
        unit = HH_NS_PER_S;
    else if (strcmp(p, "m") == 0)
        unit = 60 * HH_NS_PER_S;
    else if (strcmp(p, "h") == 0)
        unit = 3600 * HH_NS_PER_S;
    else
        return 0;
    uint64_t ns = whole * unit + frac * unit / frac_scale;
    return ns;
}

static void hh_load_after(void) {
    const char *after = heaphook_env_get("HEAPHOOK_RT_AFTER", NULL);
    if (after == NULL) return;
    int sig = strcmp(after, "SIGUSR1") == 0 ? SIGUSR1 : strcmp(after, "SIGUSR2") == 0 ? SIGUSR2 : 0;
    if (sig != 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = hh_arm_on_signal;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        atomic_store(&hh_armed, false);
        sigaction(sig, &action, NULL);
        return;
    }
    uint64_t ns = hh_parse_duration(after);
    if (ns == 0) {
        heaphook_config_fail("HEAPHOOK_RT_AFTER", after,
                             "a warm-up time (500ms, 2s, 1m) or SIGUSR1 / SIGUSR2", "2s");
    }
    hh_armed_at_ns = hh_now_ns() + ns;
    atomic_store(&hh_armed, false);
}

void hh_rt_options_load(void) {
    static const char *const modes[] = {"report", "abort"};
    hh_rt_opts.abort_on_first = heaphook_env_choice("HEAPHOOK_RT_GUARD", NULL, modes, 2, 0) == 1;
    hh_rt_opts.mark_only = heaphook_env_bool("HEAPHOOK_RT_MARK_ONLY", NULL, false);
    const char *threads = heaphook_env_get("HEAPHOOK_RT_THREADS", NULL);
    if (threads != NULL) {
        if (regcomp(&hh_thread_regex, threads, REG_EXTENDED | REG_NOSUB) != 0) {
            heaphook_config_fail("HEAPHOOK_RT_THREADS", threads,
                                 "a POSIX extended regular expression of thread names",
                                 "'^(control|rt_)'");
        }
        hh_rt_opts.has_thread_filter = true;
    }
    hh_load_after();
}

bool hh_rt_thread_checked(const char *name) {
    if (!hh_rt_opts.has_thread_filter) return true;
    return regexec(&hh_thread_regex, name, 0, NULL, 0) == 0;
}
