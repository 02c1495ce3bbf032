/*
 * guard_unit.c — the guard's modules on their own, without its hooks: the library's sources
 * but alloc_hooks.c, call_hooks.c and sched_hooks.c are linked into this program, so every
 * call here goes straight to the module under test (test/unit/guard-modules.test.ts runs it).
 *
 *   suppress.c     RTSan's pattern matching (substrings, ^ and $ anchors, * runs); a
 *                  suppression file's rules of both kinds and both spellings, applied to calls
 *                  and to stacks named by dladdr
 *   violations.c   the table of sites: one entry per (call, call site, thread), counted; a full
 *                  table counts what it drops; emptied again by hh_rt_violations_init
 *   state.c        the policy decisions: which policies and marks make a real-time context,
 *                  nesting, __rtsan_off, HEAPHOOK_RT_MARK_ONLY, a policy set on another thread
 *                  through the registry, and the registry's summary of that thread
 *
 *   rt_guard_unit SUPPRESSIONS-FILE   every check; the file is written here
 * The library's constructor runs before main, as it does preloaded: with a bad
 * HEAPHOOK_RT_SUPPRESSIONS file the program stops there.
 * Prints one line per check and "<n> checks, <f> failed"; exits 1 when any failed. It leaves
 * by _exit: the library's destructor would write a report of the contexts entered here.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtcheck.h"

/* The library's marks (state.c), declared here as a program linking it sees them. */
void heaphook_rt_enter(void);
void heaphook_rt_exit(void);
void __rtsan_off(void);
void __rtsan_on(void);

#define DISTINCT_SITES 5
#define FIRST_SITE 0x100000u

static int checks, failed;

static void check(int ok, const char *what) {
    checks++;
    if (!ok) failed++;
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
}

/* ---- suppress.c ---------------------------------------------------------------------------- */

static void check_patterns(void) {
    check(hh_rt_pattern_match("malloc", "xmalloc_impl"), "a pattern matches as a substring");
    check(!hh_rt_pattern_match("^malloc", "xmalloc"), "^ anchors it at the start");
    check(hh_rt_pattern_match("^malloc", "malloc_usable_size"), "^ leaves the end open");
    check(hh_rt_pattern_match("malloc$", "xmalloc") && !hh_rt_pattern_match("malloc$", "malloc_"),
          "$ anchors it at the end");
    check(hh_rt_pattern_match("^free$", "free") && !hh_rt_pattern_match("^free$", "freeze"),
          "^...$ is the whole name");
    check(hh_rt_pattern_match("log_*_message", "do_log_info_message") &&
              hh_rt_pattern_match("log_*_message", "log__message"),
          "* is any run of characters, the empty one too");
    check(hh_rt_pattern_match("^a*c$", "abbbc") && !hh_rt_pattern_match("^a*c$", "abcd"),
          "* between anchors still ends at $");
    check(hh_rt_pattern_match("*", "") && hh_rt_pattern_match("", "anything"),
          "* and the empty pattern match every name");
}

/* Frames are return addresses: dladdr names the byte before, so these name the functions. */
__attribute__((noinline, used)) void guard_unit_logger(void) {
    __asm__ volatile("");
}
__attribute__((noinline, used)) void guard_unit_tracer_flush(void) {
    __asm__ volatile("");
}

static const char suppressions[] =
    "# RTSan's spellings, then heaphook's\n"
    "function-name-matches:^pthread_mutex_lock$\n"
    "call-stack-contains:guard_unit_logger\n"
    "  frame:^guard_unit_tracer\n"
    "call:^write$\r\n"
    "call:\n"
    "\n";

static void check_suppressions(const char *path) {
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(suppressions, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
    setenv("HEAPHOOK_RT_SUPPRESSIONS", path, 1);
    hh_rt_suppressions_load();
    uintptr_t logger = (uintptr_t)guard_unit_logger + 1;
    uintptr_t tracer = (uintptr_t)guard_unit_tracer_flush + 1;
    uintptr_t libc_frame = (uintptr_t)getpid + 1; /* a frame no rule names */
    uintptr_t stack[] = {libc_frame, logger};
    check(hh_rt_suppressed(HH_CALL_MUTEX_LOCK, NULL, 0),
          "function-name-matches: suppresses its call with no stack");
    check(!hh_rt_suppressed(HH_CALL_COND_WAIT, NULL, 0), "and not another call");
    check(hh_rt_suppressed(HH_CALL_MALLOC, stack, 2),
          "call-stack-contains: suppresses any call with that function on the stack");
    check(!hh_rt_suppressed(HH_CALL_MALLOC, stack, 1), "and not a stack without it");
    check(hh_rt_suppressed(HH_CALL_FREE, &tracer, 1), "frame: (indented) is the same rule");
    check(hh_rt_suppressed(HH_CALL_WRITE, NULL, 0) && !hh_rt_suppressed(HH_CALL_FWRITE, NULL, 0),
          "call: with a CR at the end of the line matches its call exactly");
    check(!hh_rt_suppressed(HH_CALL_READ, &libc_frame, 1),
          "an empty pattern is no rule: nothing else is suppressed");
    unsetenv("HEAPHOOK_RT_SUPPRESSIONS");
    hh_rt_suppressions_load();
    check(!hh_rt_suppressed(HH_CALL_MUTEX_LOCK, NULL, 0), "loading without a file drops the rules");
}

/* ---- violations.c ------------------------------------------------------------------------- */

typedef struct site_count {
    int entries;
    uint64_t count; /* of the entry found */
    bool ours;      /* that entry's tid is the calling thread's */
} site_count;

static site_count count_of(enum hh_rt_call call, uintptr_t site) {
    site_count c = {0, 0, false};
    const hh_rt_site *sites = hh_rt_sites();
    for (int i = 0; i < HH_RT_MAX_SITES; i++) {
        if (!atomic_load(&sites[i].ready) || sites[i].call != (int)call || sites[i].site != site)
            continue;
        c.entries++;
        c.count = atomic_load(&sites[i].count);
        c.ours = sites[i].tid == hh_rt_gettid();
    }
    return c;
}

static int used_entries(void) {
    int n = 0;
    for (int i = 0; i < HH_RT_MAX_SITES; i++) n += atomic_load(&hh_rt_sites()[i].key) != 0;
    return n;
}

static void *violate_from_other_thread(void *unused) {
    (void)unused;
    hh_rt_violation(HH_CALL_MALLOC, FIRST_SITE);
    return NULL;
}

static void check_site_table(void) {
    hh_rt_violations_init();
    for (int i = 0; i < 3; i++) hh_rt_violation(HH_CALL_MALLOC, FIRST_SITE);
    heaphook_rt_enter();
    hh_rt_violation(HH_CALL_FREE, FIRST_SITE);
    bool cleared = !t_rt.active;
    hh_rt_refresh();
    check(cleared && t_rt.active,
          "a violation clears the context for the intercepted call; refresh restores it");
    heaphook_rt_exit();
    site_count malloc_a = count_of(HH_CALL_MALLOC, FIRST_SITE);
    check(malloc_a.entries == 1 && malloc_a.count == 3 && malloc_a.ours,
          "one site's calls are counted in one entry, with the calling thread");
    site_count free_a = count_of(HH_CALL_FREE, FIRST_SITE);
    check(free_a.entries == 1 && free_a.count == 1,
          "another call at the same site is its own entry");
    pthread_t other;
    pthread_create(&other, NULL, violate_from_other_thread, NULL);
    pthread_join(other, NULL);
    check(count_of(HH_CALL_MALLOC, FIRST_SITE).entries == 2 && used_entries() == 3,
          "the same call and site on another thread is its own entry");

    hh_rt_violations_init();
    for (uintptr_t s = 0; s < HH_RT_MAX_SITES + DISTINCT_SITES; s++)
        hh_rt_violation(HH_CALL_MMAP, FIRST_SITE + s * 16);
    check(used_entries() == HH_RT_MAX_SITES && hh_rt_sites_dropped() == DISTINCT_SITES,
          "a full table counts the violations it drops");
    hh_rt_violation(HH_CALL_MMAP, FIRST_SITE);
    check(count_of(HH_CALL_MMAP, FIRST_SITE).count == 2, "a full table still counts its sites");
    hh_rt_violations_init();
    check(used_entries() == 0 && hh_rt_sites_dropped() == 0, "init empties the table");
}

/* ---- state.c ------------------------------------------------------------------------------- */

static void check_policies(void) {
    check(hh_rt_is_rt_policy(SCHED_FIFO) && hh_rt_is_rt_policy(SCHED_RR) &&
              hh_rt_is_rt_policy(SCHED_DEADLINE),
          "FIFO, RR and DEADLINE are real-time policies");
    check(!hh_rt_is_rt_policy(SCHED_OTHER) && !hh_rt_is_rt_policy(SCHED_BATCH) &&
              !hh_rt_is_rt_policy(SCHED_IDLE),
          "OTHER, BATCH and IDLE are not");
    check(!t_rt.active, "a SCHED_OTHER thread without marks is outside the context");
    hh_rt_policy_changed(0, SCHED_FIFO, 10, false);
    check(t_rt.active && t_rt.policy == SCHED_FIFO && t_rt.priority == 10,
          "switching to SCHED_FIFO enters the context");
    hh_rt_policy_changed(0, SCHED_OTHER, 20, true);
    check(t_rt.active && t_rt.policy == SCHED_FIFO && t_rt.priority == 20,
          "a change of priority only keeps the policy");
    hh_rt_policy_changed(0, SCHED_BATCH, 0, false);
    check(!t_rt.active, "switching to SCHED_BATCH leaves it");

    heaphook_rt_enter();
    heaphook_rt_enter();
    heaphook_rt_exit();
    check(t_rt.active, "marks nest: one exit of two enters stays inside");
    __rtsan_off();
    check(!t_rt.active && t_rt.in_context, "__rtsan_off stops the checks, not the context");
    __rtsan_on();
    check(t_rt.active, "__rtsan_on resumes them");
    heaphook_rt_exit();
    check(!t_rt.active && !t_rt.in_context, "the last exit leaves the context");

    hh_rt_opts.mark_only = true;
    hh_rt_policy_changed(0, SCHED_RR, 5, false);
    bool policy_alone = t_rt.active;
    heaphook_rt_enter();
    check(!policy_alone && t_rt.active, "with HEAPHOOK_RT_MARK_ONLY only marks make the context");
    heaphook_rt_exit();
    hh_rt_opts.mark_only = false;
    hh_rt_policy_changed(0, SCHED_OTHER, 0, false);
}

typedef struct other_thread {
    _Atomic pid_t tid;
    atomic_int policy_set; /* the main thread changed its policy */
    atomic_int was_active; /* what the thread saw: 1 inside, 2 outside */
} other_thread;

static void *other_thread_main(void *arg) {
    other_thread *o = arg;
    pthread_setname_np(pthread_self(), "unit-other");
    atomic_store(&o->tid, hh_rt_gettid());
    while (!atomic_load(&o->policy_set)) sched_yield();
    atomic_store(&o->was_active, t_rt.active ? 1 : 2);
    return NULL;
}

static void check_other_thread(void) {
    other_thread o = {0, 0, 0};
    pthread_t thread;
    /* as the pthread_create hook starts every thread: through the registry's trampoline */
    pthread_create(&thread, NULL, hh_rt_thread_start,
                   hh_rt_thread_start_arg(other_thread_main, &o));
    while (atomic_load(&o.tid) == 0) sched_yield();
    hh_rt_policy_changed(atomic_load(&o.tid), SCHED_FIFO, 30, false);
    atomic_store(&o.policy_set, 1);
    pthread_join(thread, NULL);
    check(atomic_load(&o.was_active) == 1,
          "a policy set on another thread reaches that thread's flag");
    hh_rt_thread_summary threads[8];
    int n = hh_rt_thread_summaries(threads, 8);
    bool found = false;
    for (int i = 0; i < n; i++)
        found |= threads[i].tid == atomic_load(&o.tid) && threads[i].policy == SCHED_FIFO &&
                 threads[i].priority == 30 && strcmp(threads[i].name, "unit-other") == 0;
    check(found, "the registry keeps that thread for the report after it ended");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: rt_guard_unit SUPPRESSIONS-FILE\n");
        return 2;
    }
    check_patterns();
    check_suppressions(argv[1]);
    check_site_table();
    check_policies();
    check_other_thread();
    printf("%d checks, %d failed\n", checks, failed);
    fflush(stdout);
    _exit(failed == 0 ? 0 : 1);
}
