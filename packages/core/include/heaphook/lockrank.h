/*
 * heaphook/lockrank.h — lock ranks, checked at every acquisition in debug builds (after
 * jemalloc's witness).
 *
 * A library's lock order is written in its fork module (the core's native/fork.c, heaptrack's
 * native/track/fork.c): a thread may wait for a lock only while every lock it holds comes
 * earlier in that order, which is what lets the forking thread take them all. Here the order
 * is a number per lock, its rank, and the rule is checked rather than trusted. The contract:
 *
 *   - HEAPHOOK_LOCK_RANK_ACQUIRE(rank, name) goes right before the thread waits for the lock
 *     (pthread_mutex_lock, a spin); HEAPHOOK_LOCK_RANK_RELEASE(rank) right after it lets go.
 *     A try-lock that cannot wait is not checked, but when it succeeds it is recorded with
 *     HEAPHOOK_LOCK_RANK_ACQUIRED, so locks taken under it are checked against it.
 *   - Built with HEAPHOOK_DEBUG (cmake -DHEAPHOOK_DEBUG=ON), an acquisition whose rank is not
 *     above the rank of every lock the thread holds stops the program before it can deadlock:
 *     one line through the logger (heaphook_fatal, so abort()) naming both locks and their
 *     ranks. Locks of equal rank (the shards of one table) are taken one at a time, or in
 *     ascending order with ranks rank+0, rank+1, ...
 *   - In a fork child the locks are re-initialised, not released:
 *     HEAPHOOK_LOCK_RANK_FORGET_ALL() in the child handler empties the thread's list.
 *   - In a release build every macro is ((void)0): no call, no thread-local, no code.
 *
 * The ranks of the locks the core owns are below; a library ranks its own locks from
 * HEAPHOOK_LOCK_RANK_LIBRARY up, in its fork module's order.
 */
#ifndef HEAPHOOK_LOCKRANK_H
#define HEAPHOOK_LOCKRANK_H

#ifdef __cplusplus
extern "C" {
#endif

/* The order of the core's fork module (native/fork.c) and heaptrack's (native/track/fork.c):
 * an attach lock (the core's attach.c or heaptrack's track/attach.c; a library has one), then
 * the GOT patcher's lock (native/reloc_patch.c), then the library's own. */
#define HEAPHOOK_LOCK_RANK_ATTACH 100u
#define HEAPHOOK_LOCK_RANK_RELOC 200u
#define HEAPHOOK_LOCK_RANK_LIBRARY 1000u

/* How many ranked locks one thread may hold at once (a fork's prepare holds them all). */
#define HEAPHOOK_LOCK_RANK_MAX_HELD 96

/* The checks (lockrank.c, compiled only with HEAPHOOK_DEBUG): use the macros. */
void heaphook_lock_rank_acquire(unsigned rank, const char *name);
void heaphook_lock_rank_acquired(unsigned rank, const char *name);
void heaphook_lock_rank_release(unsigned rank);
void heaphook_lock_rank_forget_all(void);

#ifdef HEAPHOOK_DEBUG
#define HEAPHOOK_LOCK_RANK_ACQUIRE(rank, name) heaphook_lock_rank_acquire((rank), (name))
#define HEAPHOOK_LOCK_RANK_ACQUIRED(rank, name) heaphook_lock_rank_acquired((rank), (name))
#define HEAPHOOK_LOCK_RANK_RELEASE(rank) heaphook_lock_rank_release(rank)
#define HEAPHOOK_LOCK_RANK_FORGET_ALL() heaphook_lock_rank_forget_all()
#else
#define HEAPHOOK_LOCK_RANK_ACQUIRE(rank, name) ((void)0)
#define HEAPHOOK_LOCK_RANK_ACQUIRED(rank, name) ((void)0)
#define HEAPHOOK_LOCK_RANK_RELEASE(rank) ((void)0)
#define HEAPHOOK_LOCK_RANK_FORGET_ALL() ((void)0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_LOCKRANK_H */
