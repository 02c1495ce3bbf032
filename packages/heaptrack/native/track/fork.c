/*
 * fork.c — the fork module of libheaphook_heaptrack.so: the library's only pthread_atfork,
 * which calls every component's fork handlers in one fixed order.
 *
 * Lock order. Prepare takes these top to bottom; the parent releases them bottom to top; the
 * child (one thread) releases or re-initialises them bottom to top, then starts its own
 * transport with every lock free:
 *
 *   1. attach lock (attach.c)         held by attach / detach around 2, and around starting and
 *                                     finishing a log (which takes 3-6)
 *   2. GOT patcher's lock (the core's heaphook_reloc_prefork)
 *                                     held while patching; dlsym under it may allocate, through
 *                                     the hooks, which take 4 and 6
 *   -  tracer (tracer.c)              no lock: the forking thread's hooks stop recording
 *                                     (hh_busy), the collector is told a child is coming, and
 *                                     whether this fork is traced is noted (4 only if it is)
 *   3. leak check lock (leaks/mark.c) held by a check, which stops the world (the forking
 *                                     thread too, where it waits: it is resumed) and waits for
 *                                     the threads inside a hook to leave it, some of which may
 *                                     wait for 4: so 3 comes before 4 (the other way round,
 *                                     checks in a row starve a forking thread that holds 4)
 *   4. stack trie lock (stacks.c)     held by a hook that creates a stack node while it waits
 *                                     for room in the ring (lossless mode), that is for the
 *                                     drain thread, which takes 5 and 6 for each record: so 4
 *                                     comes before them (the other way round, the forking
 *                                     thread would hold 5 and wait for 4 while the hook holding
 *                                     4 waits for the drain, which waits for 5: a deadlock)
 *   5. leak cursor lock (tracer.c)    held by the drain thread and a check around 6
 *   6. leak table's shard locks (leaks/table.c), taken by the hooks one at a time
 *   -  ring and drain (tracer.c)      nothing taken: the ring is lock-free, and the child drops
 *                                     the parent's ring, writer and drain lock (the drain
 *                                     thread may have held it) before it starts its own
 *   -  unwinder rule cache            a try-lock nobody waits for; the child clears it
 *
 * No thread takes a lower-numbered lock while it holds a higher one (a hook holds at most one
 * of 4 and 6 at a time, never 1, 2, 3 or 5), so the forking thread, which takes them in
 * order, always gets the next one. The numbers are ranks (fork.h, heaphook/lockrank.h): a
 * debug build (-DHEAPHOOK_DEBUG=ON) checks them at every acquisition and stops the program,
 * naming both locks, when a thread takes one out of this order.
 *
 * Other libraries' handlers run around ours: glibc runs prepare handlers in the reverse order
 * of registration, so a library initialised after this one (loaded later) prepares before
 * ours, and ucm-hooks preloaded before the tracer is initialised after it (its grace period
 * ends before we take 4, which the tracer's memory-event handler needs); glibc then takes its
 * own locks (stdio list, malloc arenas) and forks.
 */
#include "fork.h"

#include "attach.h"
#include "heaphook/fork.h"
#include "heaphook/log.h"
#include "heaphook/reloc.h"
#include "leaks/leaks.h"
#include "stacks.h"
#include "tracer.h"
#include "unwinder.h"

static void hh_fork_prepare(void) {
    hh_attach_prefork();
    heaphook_reloc_prefork();
    hh_tracer_prefork();
    hh_leaks_prefork_check();
    if (hh_tracer_fork_traced()) hh_stacks_fork_prepare();
    hh_leaks_prefork_table();
}

static void hh_fork_parent(void) {
    hh_leaks_postfork_parent_table();
    if (hh_tracer_fork_traced()) hh_stacks_fork_parent();
    hh_leaks_postfork_parent_check();
    hh_tracer_postfork_parent();
    heaphook_reloc_postfork_parent();
    hh_attach_postfork_parent();
}

/* The table catches up from the parent's ring, which the tracer's handler drops at the end. */
static void hh_fork_child(void) {
    hh_leaks_postfork_child_table();
    if (hh_tracer_fork_traced()) hh_stacks_fork_child();
    hh_leaks_postfork_child_check();
    hh_unwind_postfork_child();
    heaphook_reloc_postfork_child();
    hh_attach_postfork_child();
    /* The locks above were re-initialised, not released: in a debug build, the forking
     * thread's list of held ranks starts empty again before the tracer takes any. */
    HEAPHOOK_LOCK_RANK_FORGET_ALL();
    hh_tracer_postfork_child();
}

void hh_fork_register(void) {
    static heaphook_fork_once once = HEAPHOOK_FORK_ONCE_INIT;
    heaphook_reloc_fork_by_caller();
    int error = heaphook_fork_register_once(&once, hh_fork_prepare, hh_fork_parent, hh_fork_child);
    if (error != 0) heaphook_log_error("heaptrack: pthread_atfork failed (error %d)", error);
}
