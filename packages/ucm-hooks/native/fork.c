/*
 * fork.c — the fork module of libheaphook_ucm.so: the library's only pthread_atfork, which
 * calls every component's fork handlers in one fixed order (as the core's and heaptrack's
 * fork.c do).
 *
 * Lock order. Prepare takes these top to bottom; the parent releases them bottom to top; the
 * child (one thread) re-initialises them bottom to top:
 *
 *   1. the install lock (ucm.c)        held by install and uninstall while they patch GOTs (3)
 *                                      and code, look symbols up (dlopen, dlsym: may allocate,
 *                                      so map, so read the table: 4's read side), and take the
 *                                      writers' lock (4) to count the handlers
 *   2. the stream's lock (stream.c)    held while the stream starts, stops or ends; its holders
 *                                      make system calls (connect, close) and may map memory
 *                                      (4's read side), never take 1, 3 or 4
 *   3. the GOT patcher's lock          (the core's heaphook_reloc_prefork) held while patching;
 *                                      dlsym under it may allocate, reaching 4's read side
 *   4. the writers' lock, then the readers (rcu.c; contract in rcu.h)
 *                                      prepare sets the table to NULL, so new readers wait until
 *                                      the fork is over, and waits for those inside handlers:
 *                                      any holder of 1-3 that maps memory must therefore have
 *                                      finished first, which is why 4 comes last
 *
 * No thread takes a lower-numbered lock while it holds a higher one (the handlers, run by the
 * readers, take none of ours: a handler must not set, unset or fork), so the forking thread,
 * which takes them in order, always gets the next one.
 *
 * The patcher registers no handlers of its own (heaphook_reloc_fork_by_caller(), called here
 * before the first patch: registration comes from ucm_init_once, which every install and every
 * set_event_handler runs first). Other libraries' handlers run around ours: glibc runs prepare
 * handlers in the reverse order of registration, so a library initialised after this one
 * prepares before ours (heaptrack preloaded after ucm-hooks: see its fork.c).
 */
#include "heaphook/fork.h"
#include "heaphook/log.h"
#include "heaphook/reloc.h"
#include "ucm_internal.h"

static void ucm_fork_prepare(void) {
    ucm_install_prefork();
    ucm_watch_prefork();
    heaphook_reloc_prefork();
    ucm_readers_prefork();
}

static void ucm_fork_parent(void) {
    ucm_readers_postfork_parent();
    heaphook_reloc_postfork_parent();
    ucm_watch_postfork_parent();
    ucm_install_postfork_parent();
}

static void ucm_fork_child(void) {
    ucm_readers_postfork_child();
    heaphook_reloc_postfork_child();
    ucm_watch_postfork_child();
    ucm_install_postfork_child();
}

void ucm_fork_register(void) {
    static heaphook_fork_once once = HEAPHOOK_FORK_ONCE_INIT;
    heaphook_reloc_fork_by_caller();
    int error =
        heaphook_fork_register_once(&once, ucm_fork_prepare, ucm_fork_parent, ucm_fork_child);
    if (error != 0) heaphook_fatal("ucm-hooks: pthread_atfork failed (error %d)", error);
}
