/*
 * lockrank.c — the debug build's check of the lock order (heaphook/lockrank.h).
 *
 * Each thread keeps the ranked locks it holds in a small array, in the order it took them.
 * Taking a lock checks its rank against every held one (a try-lock may have added one out of
 * order). Releasing removes the entry wherever it is, since locks need not be released in
 * reverse order.
 *
 * Compiled to nothing without HEAPHOOK_DEBUG: a release build has no thread-local for it (the
 * static TLS of a preloaded library is scarce) and the macros call nothing.
 */
#include "heaphook/lockrank.h"

#ifdef HEAPHOOK_DEBUG

#include "heaphook/log.h"

typedef struct hh_held_lock {
    unsigned rank;
    const char *name;
} hh_held_lock;

static __thread hh_held_lock hh_held[HEAPHOOK_LOCK_RANK_MAX_HELD];
static __thread unsigned hh_held_count;

static void hh_push(unsigned rank, const char *name) {
    if (hh_held_count == HEAPHOOK_LOCK_RANK_MAX_HELD) {
        heaphook_fatal("lock order: a thread holds more than %d ranked locks while taking %s",
                       HEAPHOOK_LOCK_RANK_MAX_HELD, name);
    }
    hh_held[hh_held_count].rank = rank;
    hh_held[hh_held_count].name = name;
    hh_held_count++;
}

void heaphook_lock_rank_acquire(unsigned rank, const char *name) {
    for (unsigned i = 0; i < hh_held_count; i++) {
        const hh_held_lock *held = &hh_held[i];
        if (held->rank >= rank) {
            heaphook_fatal(
                "lock order: taking %s (rank %u) while holding %s (rank %u); a lock "
                "may only be taken after those of lower rank (the fork module's "
                "order)",
                name, rank, held->name, held->rank);
        }
    }
    hh_push(rank, name);
}

void heaphook_lock_rank_acquired(unsigned rank, const char *name) {
    hh_push(rank, name);
}

void heaphook_lock_rank_release(unsigned rank) {
    for (unsigned i = hh_held_count; i-- > 0;) {
        if (hh_held[i].rank != rank) continue;
        for (unsigned j = i + 1; j < hh_held_count; j++) hh_held[j - 1] = hh_held[j];
        hh_held_count--;
        return;
    }
    heaphook_fatal("lock order: releasing a lock of rank %u that this thread does not hold", rank);
}

void heaphook_lock_rank_forget_all(void) {
    hh_held_count = 0;
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int hh_lockrank_release_build;
#endif
