/*
 * leaks.h — the live-block table and the leak checks (leaks.c), as the hooks and the tracer's
 * life cycle see them. The public API is include/heaphook/leaks.h.
 */
#ifndef HH_LEAKS_H
#define HH_LEAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/* Non-zero while the live-block table is maintained (HEAPHOOK_LEAK_CHECK, HEAPHOOK_LEAK_SIGNAL,
 * or a type registered through the precise API). */
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
    if (HH_UNLIKELY(atomic_load_explicit(&hh_leaks_on, memory_order_relaxed)) && p != NULL) {
        hh_leaks_insert(p, size);
    }
    return p;
}

static inline uint64_t hh_leaks_untrack(void *p) {
    if (HH_UNLIKELY(atomic_load_explicit(&hh_leaks_on, memory_order_relaxed)) && p != NULL) {
        return hh_leaks_remove(p);
    }
    return 0;
}

/* The bootstrap arena's used part (hooks.c): a root. */
void hh_arena_range(uintptr_t *lo, uintptr_t *hi);

/* Threads of the tracer itself (drain, leak thread): neither stopped nor scanned. */
void hh_leaks_tracer_thread(void);

/* The exit check (tracer destructor, before the EXIT record). */
void hh_leaks_at_exit(void);

/* Starts the HEAPHOOK_LEAK_SIGNAL thread (after start-up, and in a fork child). */
void hh_leaks_start(void);

void hh_leaks_fork_prepare(void);
void hh_leaks_fork_parent(void);
void hh_leaks_fork_child(void);

#endif /* HH_LEAKS_H */
