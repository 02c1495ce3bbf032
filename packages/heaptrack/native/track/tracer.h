/*
 * tracer.h — the tracer's life cycle and transport (tracer.c), as the hooks see it.
 */
#ifndef HH_TRACER_H
#define HH_TRACER_H

#include <stdbool.h>
#include <stdint.h>

#include "trace.h"

typedef struct hh_config {
    bool stacks;      /* HEAPHOOK_STACKS */
    int depth;        /* HEAPHOOK_STACK_DEPTH */
    bool timing;      /* HEAPHOOK_TIMING */
    bool free_stacks; /* HEAPHOOK_FREE_STACKS */
    bool drop;        /* HEAPHOOK_ON_FULL=drop */
    uint64_t sample_bytes;
    uint64_t buffer_size;
    uint32_t time_unit; /* HEAPHOOK_TIME_RESOLUTION, ns */
    int compress;       /* HEAPHOOK_COMPRESS: HH_CODEC_* */
    bool vm;            /* VM_MAPPED / VM_UNMAPPED recorded (HEAPHOOK_TRACE_VM, vm.c) */
} hh_config;

extern hh_config hh_cfg;

enum hh_state {
    HH_STATE_UNINIT = 0,
    HH_STATE_INITIALISING = 1,
    HH_STATE_ACTIVE = 2,
    HH_STATE_DISABLED = 3,
    HH_STATE_FINISHED = 4,
};
extern _Atomic int hh_state;

/* Per-thread recursion guard: non-zero while the tracer itself runs on this thread. */
extern HH_TLS int hh_busy;
/* Non-zero while a traced call of the program runs on this thread (hooks.c): hh_busy is then
 * set by the hook, not by the tracer's own work. */
extern HH_TLS int hh_in_hook;

/* Initialises on first use; true when events are to be recorded. Call with hh_busy set. */
bool hh_tracer_ensure(void);

static inline bool hh_tracer_active(void) {
    return HH_LIKELY(atomic_load_explicit(&hh_state, memory_order_acquire) == HH_STATE_ACTIVE) ||
           hh_tracer_ensure();
}

/* Ring access for record producers: reserve (NULL = dropped) and publish. */
void *hh_tracer_reserve(uint32_t len);
void hh_tracer_commit(void *record, unsigned type);
/* A record given up without reserving it: counted with the ring's drops (the END record's). */
void hh_tracer_count_dropped(void);

/* Standalone mode: write what the ring holds now (before exec). */
void hh_tracer_flush_now(void);
/* Standalone mode, from the _exit hooks: writes what the ring holds and closes the log with
 * END reason HH_END_LOST (the process ended without its exit path; everything it recorded is
 * in the log). No leak check runs (a signal handler may be the caller). Does nothing in a
 * vfork child (the log is its parent's), nor on a thread that is inside the tracer already (a
 * signal handler that interrupted a hook: the locks the finish takes may be this thread's),
 * where the tail is lost as after a kill. */
void hh_tracer_finish_before_exit(void);

/* The tracer's fork handlers (fork.c calls them in its lock order; they take no lock). */
void hh_tracer_prefork(void);
bool hh_tracer_fork_traced(void); /* the forking thread's fork began while recording */
void hh_tracer_postfork_parent(void);
void hh_tracer_postfork_child(void);

uint64_t hh_now(void);
uint32_t hh_tid(void);

/*
 * The leak table kept from the ring (leaks/table.c, "deferred" mode; standalone only). The drain
 * thread applies every event record to the table as it reads the record; a leak check, which
 * has stopped the program's threads, applies what the drain has not reached yet itself. The
 * cursor is the ring position of the next record to apply; the lock makes every record applied
 * once and in ring order. Lock order: mark.c's check lock, then this lock, then the table's
 * shard locks (the drain thread holds its drain lock around all of them).
 */
bool hh_tracer_leaks_can_defer(void); /* standalone, a drain thread, lossless, not sampling */
void hh_tracer_leaks_lock(void);
void hh_tracer_leaks_unlock(void);
/* Lock held: the next record to apply is the next one the drain thread will read. */
void hh_tracer_leaks_restart(void);
/* Lock held: applies the published records from the cursor up to `limit` (a ring position;
 * UINT64_MAX: all reserved ones), in order; stops at the first record still being written.
 * True when it reached the limit. */
bool hh_tracer_leaks_catch_up(uint64_t limit);
/* Lock held, in the forking thread: copies the records from the cursor on into private
 * memory, for the child (the parent goes on reusing the ring's shared space). */
void hh_tracer_leaks_fork_prepare(void);
/* Lock held, in a fork child: applies the copied records, passing those that were still being
 * written (their writer is not in this process). */
void hh_tracer_leaks_fork_child(void);
/* The ring position after the last record reserved so far. */
uint64_t hh_tracer_ring_mark(void);

/* Asks rtcheck's guard, when loaded, for its violations' final counts (rt.c): before the log
 * ends at exit. */
void hh_rt_flush_guard(void);

#endif /* HH_TRACER_H */
