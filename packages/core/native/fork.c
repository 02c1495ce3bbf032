/*
 * fork.c — keeping the backend's locks consistent across fork().
 *
 * Lock order. The core holds no lock of its own: the bootstrap arena is a lock-free bump
 * pointer, the logger writes with one write(2), the backend's state is an atomic. The only
 * locks are the backend's, and the backend's fork_prepare takes all of them in its own
 * documented order. So the order across a fork is:
 *
 *   1. other libraries' prepare handlers (registered after ours, so glibc runs them first;
 *      they may still call malloc);
 *   2. ours: wait for the backend to be ready, then backend fork_prepare (every backend lock);
 *   3. glibc's own internal locks (stdio list, its malloc arenas), then the fork system call;
 *   4. parent: backend fork_parent (release), then the other libraries' parent handlers;
 *      child: backend fork_child (re-initialise; the child has one thread), then the others'.
 *
 * Between 2 and 4 nothing may allocate through the backend; glibc's fork does not.
 *
 * Known limit, shared by every allocator that uses pthread_atfork (jemalloc, tcmalloc):
 * glibc takes its stdio list lock in step 3, after our prepare. A cycle "forking thread holds
 * the backend's locks and waits for the list lock; a thread in fflush(NULL) holds the list
 * lock and waits for a FILE lock; a thread in getline holds that FILE lock and waits in
 * realloc for the backend" is possible in principle. glibc's own malloc avoids it only
 * because fork calls it directly, after the list lock.
 *
 * The handlers are registered by the library constructor, which runs before the program's
 * constructors and main, so every fork the program makes is covered.
 */
#include <pthread.h>

#include "heaphook/log.h"
#include "internal.h"

static void hh_fork_prepare(void) {
    /* A fork during the backend's initialisation would copy a half-built backend; waiting
     * makes the child inherit a ready one. A recursive call (fork from inside init) cannot
     * wait and finds nothing to lock. */
    if (!hh_backend_is_ready()) return;
    if (hh_backend.fork_prepare != NULL) hh_backend.fork_prepare();
}

static void hh_fork_parent(void) {
    if (atomic_load_explicit(&hh_backend_state, memory_order_acquire) != HH_STATE_READY) return;
    if (hh_backend.fork_parent != NULL) hh_backend.fork_parent();
}

static void hh_fork_child(void) {
    if (atomic_load_explicit(&hh_backend_state, memory_order_acquire) != HH_STATE_READY) return;
    if (hh_backend.fork_child != NULL) hh_backend.fork_child();
}

void hh_fork_register(void) {
    static atomic_flag registered = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&registered)) return;
    int error = pthread_atfork(hh_fork_prepare, hh_fork_parent, hh_fork_child);
    if (error != 0) heaphook_fatal("pthread_atfork failed (error %d)", error);
}
