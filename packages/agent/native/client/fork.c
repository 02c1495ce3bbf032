/*
 * fork.c — the fork module of libheaphook_agent.so: the library's only pthread_atfork, which
 * calls every component's fork handlers in one fixed order (as the core's, heaptrack's and
 * ucm-hooks' fork.c do).
 *
 * Lock order. Prepare takes these top to bottom; the parent releases them bottom to top; the
 * child (one thread) re-initialises them bottom to top, then drops the parent's link:
 *
 *   1. the GOT patcher's lock (the core's heaphook_reloc_prefork)
 *                                     held while attach.c redirects the malloc family to the
 *                                     hooks (at start-up behind another allocator, or in a
 *                                     running process: heaphook_agent_attach); dlsym under it
 *                                     may allocate, through the hooks, which take no lock
 *   -  the link (link.c)              no lock: the descriptor, the connected flag and the
 *                                     keeper thread's flag are atomics. The child closes the
 *                                     parent's connection (the agent's profile of the parent is
 *                                     fed by the parent alone), forgets the parent's keeper
 *                                     thread and zeroes its counts; its first sample starts a
 *                                     keeper of its own, which connects and says HELLO with the
 *                                     child's pid
 *   -  the sampled-address table (sampler.c)
 *                                     lock-free; the child keeps it: the blocks the parent
 *                                     sampled are the child's too
 *
 * A hook holds no lock of ours, so the forking thread always gets 1. The handlers are
 * registered before the first patch (start.c: every way the client starts), so the patcher
 * registers none of its own (heaphook_reloc_fork_by_caller). Other libraries' handlers run
 * around ours: glibc runs prepare handlers in the reverse order of registration, so a library
 * initialised after this one prepares before ours; glibc then takes its own locks (stdio list,
 * malloc arenas) and forks.
 */
#include "client.h"
#include "heaphook/fork.h"
#include "heaphook/log.h"
#include "heaphook/reloc.h"

static void hh_agent_fork_prepare(void) {
    heaphook_reloc_prefork();
}

static void hh_agent_fork_parent(void) {
    heaphook_reloc_postfork_parent();
}

static void hh_agent_fork_child(void) {
    heaphook_reloc_postfork_child();
    hh_agent_link_fork_child();
}

void hh_agent_fork_register(void) {
    static heaphook_fork_once once = HEAPHOOK_FORK_ONCE_INIT;
    heaphook_reloc_fork_by_caller();
    int error = heaphook_fork_register_once(&once, hh_agent_fork_prepare, hh_agent_fork_parent,
                                            hh_agent_fork_child);
    if (error != 0) heaphook_log_error("agent: pthread_atfork failed (error %d)", error);
}
