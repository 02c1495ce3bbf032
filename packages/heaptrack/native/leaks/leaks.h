/*
 * leaks.h — the live-block table and the leak checks (the files of leaks/, internal.h), as the
 * hooks and the tracer's life cycle see them. The public API is include/heaphook/leaks.h.
 */
#ifndef HH_LEAKS_H
#define HH_LEAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "track/trace.h"

/* Non-zero while the live-block table is maintained (HEAPHOOK_LEAK_CHECK, HEAPHOOK_LEAK_SIGNAL,
 * or a type registered through the precise API), and by whom:
 *   HH_LEAKS_SYNC      the hooks, around every call (collector mode, sampling, drop mode, and
 *                      from the first use of the precise API on);
 *   HH_LEAKS_DEFERRED  the drain thread, from the ring's event records (standalone and
 *                      lossless: the program's threads do nothing for it; hh_leaks_apply). */
enum { HH_LEAKS_OFF = 0, HH_LEAKS_SYNC = 1, HH_LEAKS_DEFERRED = 2 };
extern _Atomic int hh_leaks_on;

/* Reads HEAPHOOK_LEAK_*; called once the tracer's configuration is read. */
void hh_leaks_configure(void);

/* A block obtained by the program (p != NULL). */
void hh_leaks_insert(void *p, size_t size);
/* A block about to be released; returns its entry's metadata (0 when it was not there), which
 * hh_leaks_reinsert puts back (a realloc that failed keeps its block). */
uint64_t hh_leaks_remove(void *p);
void hh_leaks_reinsert(void *p, uint64_t meta);

static inline void *hh_leaks_track(void *p, size_t size) {
    if (HH_UNLIKELY(atomic_load_explicit(&hh_leaks_on, memory_order_relaxed) == HH_LEAKS_SYNC) &&
        p != NULL) {
        hh_leaks_insert(p, size);
    }
    return p;
}

static inline uint64_t hh_leaks_untrack(void *p) {
    if (HH_UNLIKELY(atomic_load_explicit(&hh_leaks_on, memory_order_relaxed) == HH_LEAKS_SYNC) &&
        p != NULL) {
        return hh_leaks_remove(p);
    }
    return 0;
}

/* Deferred mode: one event record, as the drain thread reads it (tracer.h's cursor lock held). */
void hh_leaks_apply(const hh_rec_event *e);
/* Deferred mode, drain thread: brings the table slots hh_leaks_apply will use for e into the
 * cache, a few records before it is applied. Takes no lock: a slot computed from a table that
 * is changing at that moment is only a useless prefetch. */
void hh_leaks_prefetch(const hh_rec_event *e);

/* After the drain thread started (start-up, fork child, attach): the table goes to the drain
 * thread when the transport allows it (hh_tracer_leaks_can_defer), back to the hooks when not. */
void hh_leaks_defer(void);

/* A leak check wants this thread stopped while it was inside a hook, or in hh_stop_later
 * (program-thread work that takes the tracer's cursor lock: a flush before exec): HH_LEAVE, or
 * the end of that work, parks it. */
extern HH_TLS int hh_park_pending;
extern HH_TLS int hh_stop_later;
void hh_leaks_park(void);

/* The bootstrap arena's used part (hooks.c): a root. */
void hh_arena_range(uintptr_t *lo, uintptr_t *hi);

/* Threads of the tracer itself (drain, leak thread): neither stopped nor scanned. */
void hh_leaks_tracer_thread(void);

/* The exit check (tracer destructor, before the EXIT record). */
void hh_leaks_at_exit(void);

/* Starts the HEAPHOOK_LEAK_SIGNAL thread (after start-up, an attach, and in a fork child). */
void hh_leaks_start(void);

/* A detach: gives the signal back to the program's own disposition and ends the
 * HEAPHOOK_LEAK_SIGNAL thread (a check in progress finishes first; waited for up to 2 s). */
void hh_leaks_stop(void);

/* Fork (track/fork.c's order): the check lock is taken before the stack trie's lock, the
 * cursor lock and the table's after it; released in the reverse order. */
void hh_leaks_prefork_check(void);
void hh_leaks_prefork_table(void);
void hh_leaks_postfork_parent_table(void);
void hh_leaks_postfork_parent_check(void);
void hh_leaks_postfork_child_table(void);
void hh_leaks_postfork_child_check(void);

#endif /* HH_LEAKS_H */
