/*
 * fork.c — the fork module of a core-built library: its only pthread_atfork, which calls every
 * component's fork handlers in one fixed order.
 *
 * Lock order. Prepare takes these top to bottom; the parent releases them bottom to top; the
 * child (one thread) re-initialises them bottom to top:
 *
 *   1. the attach lock (attach.c)    held by heaphook_attach / _detach while they call 2
 *   2. the GOT patcher's lock        (reloc_patch.c, heaphook_reloc_prefork) held while patching,
 *                                    and dlsym under it may allocate, reaching 3
 *   3. every backend lock            the backend's fork_prepare, in the backend's own order
 *
 * Every thread takes them in this order (a holder of 1 may wait for 2 and 3, a holder of 2
 * for 3, a holder of 3 for none of ours), so the forking thread, which waits for them in the
 * same order, can always get the next one. Taking 2 before 1 would deadlock against an
 * attaching thread that holds 1 and waits for 2. 1 and 2 carry ranks (heaphook/lockrank.h,
 * HEAPHOOK_LOCK_RANK_ATTACH and _RELOC): a debug build checks them at every acquisition and
 * stops the program, naming both locks, when a thread takes them out of this order.
 *
 * Other libraries' handlers run around ours: glibc runs prepare handlers in the reverse
 * order of registration, so a library registered after ours (loaded later) prepares first,
 * while it may still call malloc, and glibc takes its own internal locks (stdio list, its
 * malloc arenas) after ours, then forks. Between our prepare and our parent/child handlers
 * nothing may allocate through the backend; glibc's fork does not.
 *
 * Known limit, shared by every allocator that uses pthread_atfork (jemalloc, tcmalloc):
 * glibc takes its stdio list lock after our prepare. A cycle "forking thread holds the
 * backend's locks and waits for the list lock; a thread in fflush(NULL) holds the list lock
 * and waits for a FILE lock; a thread in getline holds that FILE lock and waits in realloc for
 * the backend" is possible in principle. glibc's own malloc avoids it only because fork calls
 * it directly, after the list lock.
 *
 * The handlers are registered by the library constructor, which runs before the program's
 * constructors and main, so every fork the program makes is covered; the patcher registers
 * none of its own (heaphook_reloc_fork_by_caller). Every library's fork module registers
 * through heaphook_fork_register_once (heaphook/fork.h, in heaphook::support), as this one does.
 */
#include "heaphook/fork.h"
#include "heaphook/log.h"
#include "heaphook/reloc.h"
#include "internal.h"

/* 3: the backend. A fork during the backend's initialisation would copy a half-built backend;
 * waiting makes the child inherit a ready one. A recursive call (fork from inside init)
 * cannot wait and finds nothing to lock. Parent and child act only when prepare did; the flag
 * is written and read under the attach lock (1), so a second forking thread cannot change it. */
static bool hh_backend_prepared;

static void hh_backend_prefork(void) {
    hh_backend_prepared = hh_backend_is_ready();
    if (hh_backend_prepared && hh_backend.fork_prepare != NULL) hh_backend.fork_prepare();
}

static void hh_backend_postfork_parent(void) {
    if (hh_backend_prepared && hh_backend.fork_parent != NULL) hh_backend.fork_parent();
}

static void hh_backend_postfork_child(void) {
    if (hh_backend_prepared && hh_backend.fork_child != NULL) hh_backend.fork_child();
}

static void hh_fork_prepare(void) {
    hh_attach_prefork();
    heaphook_reloc_prefork();
    hh_backend_prefork();
}

static void hh_fork_parent(void) {
    hh_backend_postfork_parent();
    heaphook_reloc_postfork_parent();
    hh_attach_postfork_parent();
}

static void hh_fork_child(void) {
    hh_backend_postfork_child();
    heaphook_reloc_postfork_child();
    hh_attach_postfork_child();
}

void hh_fork_register(void) {
    static heaphook_fork_once once = HEAPHOOK_FORK_ONCE_INIT;
    heaphook_reloc_fork_by_caller();
    int error = heaphook_fork_register_once(&once, hh_fork_prepare, hh_fork_parent, hh_fork_child);
    if (error != 0) heaphook_fatal("pthread_atfork failed (error %d)", error);
}
