/*
 * fork.c — the fork module of libheaphook_rtcheck.so: the library's only pthread_atfork (as
 * the core's, heaptrack's and ucm-hooks' fork.c are theirs), with a child handler only.
 *
 * Lock order. The library's locks are spin locks, none held across fork: prepare takes
 * nothing, the parent releases nothing, and the child (one thread) re-initialises bottom to
 * top what the other threads may have left half-done:
 *
 *   1. the report's lock (report.c)   held while the report is written (at exit, or at the
 *                                     first violation under HEAPHOOK_RT_GUARD=abort), around
 *                                     2, one slot at a time: the child's lock and buffer start
 *                                     empty, and it writes a report of its own (a file of its
 *                                     own when HEAPHOOK_RT_REPORT holds %p)
 *   2. the registry's slot locks (state.c)
 *                                     held by a thread that registers, marks, changes a
 *                                     thread's policy or ends, around a few system calls (/proc
 *                                     reads, getrusage); a thread holds one at a time. The
 *                                     child wipes every other thread's slot and re-initialises
 *                                     the forking thread's, whose fault counts start over
 *   -  the table of violations (violations.c)
 *                                     no lock: sites are claimed by compare-and-swap; the
 *                                     child empties it, so its counts are its own
 *   -  the unwinder's rule cache (heaptrack's unwinder.c)
 *                                     a try-lock nobody waits for; the child clears it
 *
 * Why prepare takes nothing: no thread of the parent, a real-time one above all, ever waits
 * for another's fork. Everything a child inherits from the other threads is wiped or
 * lock-free, so a torn entry cannot reach it. (Taking 1 and 2 in prepare made each fork of
 * test/native/fork_storm.c, four threads entering marked sections without pause, about ten
 * times slower: 2.0-2.7 s against 0.16-0.31 s for 25 forks, interleaved runs, while the
 * threads spun on their slots.) Only the forking thread's own slot may be written by another
 * thread at that moment (pthread_setschedparam on it): the child keeps its policy as that
 * thread last wrote it.
 *
 * The handler is registered by the library constructor (state.c), which runs before the
 * program's constructors and main, so every fork the program makes is covered. Other
 * libraries' handlers run around ours: glibc runs child handlers in the order of registration.
 * The GOT patcher is not linked: the guard interposes by symbol order only.
 */
#include "heaphook/fork.h"
#include "heaphook/log.h"
#include "rtcheck.h"
#include "track/unwinder.h"

static void hh_rt_fork_child(void) {
    hh_unwind_postfork_child();
    hh_rt_violations_init();
    hh_rt_registry_postfork_child();
    hh_rt_report_postfork_child();
}

void hh_rt_fork_register(void) {
    static heaphook_fork_once once = HEAPHOOK_FORK_ONCE_INIT;
    int error = heaphook_fork_register_once(&once, NULL, NULL, hh_rt_fork_child);
    if (error != 0) heaphook_fatal("rtcheck: pthread_atfork failed (error %d)", error);
}
