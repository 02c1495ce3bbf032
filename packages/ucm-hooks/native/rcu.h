/*
 * rcu.h — the handler chain's readers and writers (native/rcu.c): what the hooks read, without a
 * lock, and the writers' side that set/unset call. The read side is inline here, so a hook pays
 * for a plain store in and out of its section and nothing else.
 *
 * Contract (the argument, and why it suffices: docs/readers-and-writers.md):
 * - Readers (the hooks) take no lock and make no atomic read-modify-write: a thread marks itself
 *   inside a read-side section in a slot of its own (ucm_readers: seq odd inside, even outside;
 *   a plain store in, a release store out), then loads ucm_current. Past UCM_READERS threads, a
 *   thread uses two shared counters with an epoch (SRCU's fallback).
 * - Writers (set/unset, under ucm_writer_lock) build the other of the two tables, publish it
 *   with a sequentially consistent store of ucm_current, then wait out a grace period
 *   (membarrier, or readers' fences where membarrier is unavailable: ucm_reader_fence) until no
 *   reader can still use the old table. Only then do they return: a removed handler is never
 *   called afterwards, and the old table may be rebuilt.
 * - A section holds handler calls only, never the real system call.
 * - Fork: the writer's mutex is taken and ucm_current set to NULL (readers wait) until the fork
 *   is over; the child frees the slots of threads it does not have.
 * - A handler must not set or unset handlers, or fork; a thread never enters twice (its
 *   reader state's depth).
 *
 * Unit test: test/native/ucm_readers_unit.c (this file and rcu.c alone).
 */

#ifndef HEAPHOOK_UCM_RCU_H
#define HEAPHOOK_UCM_RCU_H

#include <stdatomic.h>
#include <stdbool.h>

#include "heaphook/ucm.h"
#include "ucm_internal.h"

#define UCM_MAX_HANDLERS 64

/* What the hooks read: per event, the callbacks of that event in chain order, and how many of
 * them come before the real call (priority < 0). Built by the writer from ucm_handlers. */
enum {
    UCM_K_MMAP,
    UCM_K_MUNMAP,
    UCM_K_MREMAP,
    UCM_K_SHMAT,
    UCM_K_SHMDT,
    UCM_K_SBRK,
    UCM_K_MADVISE,
    UCM_K_BRK,
    UCM_K_VM_MAPPED,
    UCM_K_VM_UNMAPPED,
    UCM_KINDS
};
struct ucm_entry {
    heaphook_ucm_event_callback_t callback;
    void *arg;
};
struct ucm_list {
    unsigned count;  /* callbacks of this event */
    unsigned before; /* the first `before` of them have priority < 0 */
    struct ucm_entry entries[UCM_MAX_HANDLERS];
};
struct ucm_table {
    struct ucm_list lists[UCM_KINDS];
};
UCM_INLINE int ucm_kind_event(int kind) {
    return kind < UCM_K_VM_MAPPED ? 1 << kind : HEAPHOOK_UCM_EVENT_VM_MAPPED << (kind - 8);
}

#define UCM_READERS 256

struct ucm_reader {
    _Atomic unsigned long seq; /* odd while the owner is in a read-side section */
    _Atomic int owner;         /* thread id, 0 when free */
} __attribute__((aligned(64)));

/* What the inline read side reads (defined in rcu.c). */
extern UCM_HIDDEN struct ucm_reader ucm_no_reader; /* "use the fallback counters"; never scanned */
struct ucm_fallback_counter {
    _Atomic long count __attribute__((aligned(64)));
};
extern UCM_HIDDEN struct ucm_fallback_counter ucm_fallback[2];
extern UCM_HIDDEN const struct ucm_table *_Atomic ucm_current;
/* The unions of the handlers' event masks: of all (the fast path), of those with priority < 0
 * (run before the real call) and of those with priority >= 0 (after it). */
extern UCM_HIDDEN _Atomic int ucm_active_events;
extern UCM_HIDDEN _Atomic int ucm_before_events;
extern UCM_HIDDEN _Atomic int ucm_after_events;
/* 1 while readers must execute a fence (membarrier unavailable or not registered yet). */
extern UCM_HIDDEN _Atomic int ucm_reader_fence;

/* Per thread (initial-exec TLS: one %fs-relative access, no allocation). */
struct ucm_thread {
    int depth;                 /* 1 while dispatching: hooks are plain calls */
    int fallback_epoch;        /* counter entered, with reader == &ucm_no_reader */
    int fallback_inside;       /* inside a section counted in ucm_fallback */
    struct ucm_reader *reader; /* NULL until the first dispatched call */
    int *err;                  /* this thread's errno */
    unsigned retry;            /* fallback: dispatched calls until the next claim */
    int testing, test_seen;    /* self-test: events seen by the thread running it */
    int forking;               /* between our fork handlers: dispatch nothing, never wait */
};
extern UCM_HIDDEN __thread struct ucm_thread ucm_self __attribute__((tls_model("initial-exec")));

/* The read side's slow paths (rcu.c): the first section of a thread, and a fork in progress. */
UCM_HIDDEN const struct ucm_table *ucm_enter_slow(struct ucm_thread *self);
UCM_HIDDEN const struct ucm_table *ucm_enter_blocked(struct ucm_thread *self);

/* Does this call dispatch any of `events` (or is the self-test running)? If so, marks the
 * thread as dispatching (depth 1) until ucm_end: calls made inside handlers are plain. */
UCM_INLINE bool ucm_begin(struct ucm_thread *self, int events) {
    if (UCM_UNLIKELY(self->depth != 0)) return false;
    if (!(atomic_load_explicit(&ucm_active_events, memory_order_relaxed) & events) &&
        UCM_LIKELY(!self->testing)) {
        return false;
    }
    self->depth = 1;
    return true;
}
UCM_INLINE void ucm_end(struct ucm_thread *self) {
    self->depth = 0;
}
/* Are there handlers to run before the real call: of `vm_events` (VM_UNMAPPED when the call
 * unmaps), or of the native `event` with a priority < 0? */
UCM_INLINE bool ucm_has_before(struct ucm_thread *self, int event, int vm_events) {
    return (atomic_load_explicit(&ucm_active_events, memory_order_relaxed) & vm_events) ||
           (atomic_load_explicit(&ucm_before_events, memory_order_relaxed) & event) ||
           UCM_UNLIKELY(self->testing);
}
/* And after it: of `vm_events` (VM_MAPPED when the call maps), or of `event` with a priority
 * >= 0? */
UCM_INLINE bool ucm_has_after(struct ucm_thread *self, int event, int vm_events) {
    return (atomic_load_explicit(&ucm_active_events, memory_order_relaxed) & vm_events) ||
           (atomic_load_explicit(&ucm_after_events, memory_order_relaxed) & event) ||
           UCM_UNLIKELY(self->testing);
}

/* A read-side section: the table to dispatch from, valid until ucm_leave. Sections hold
 * handler calls only, never the real system call, so a writer never waits for a system call
 * (or for a thread preempted in one). */
UCM_INLINE const struct ucm_table *ucm_enter_raw(struct ucm_thread *self) {
    struct ucm_reader *r = self->reader;
    if (UCM_UNLIKELY(r == NULL || r == &ucm_no_reader)) return ucm_enter_slow(self);
    unsigned long seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
    atomic_store_explicit(&r->seq, seq + 1, memory_order_relaxed);
    if (UCM_UNLIKELY(atomic_load_explicit(&ucm_reader_fence, memory_order_relaxed))) {
        atomic_thread_fence(memory_order_seq_cst);
    } else {
        atomic_signal_fence(memory_order_seq_cst); /* compiler barrier; membarrier does the rest */
    }
    return atomic_load_explicit(&ucm_current, memory_order_acquire);
}

UCM_INLINE void ucm_leave(struct ucm_thread *self) {
    struct ucm_reader *r = self->reader;
    if (UCM_LIKELY(r != &ucm_no_reader)) {
        unsigned long seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
        atomic_store_explicit(&r->seq, seq + 1, memory_order_release);
    } else {
        self->fallback_inside = 0;
        atomic_fetch_sub_explicit(&ucm_fallback[self->fallback_epoch].count, 1,
                                  memory_order_release);
    }
}

UCM_INLINE const struct ucm_table *ucm_enter(struct ucm_thread *self) {
    const struct ucm_table *t = ucm_enter_raw(self);
    return UCM_LIKELY(t != NULL) ? t : ucm_enter_blocked(self);
}

/* ---- The writers' side (set/unset; each takes the writers' lock) ---------------------------- */

/* Once, at library initialisation: the key whose destructor frees an exiting thread's slot. */
UCM_HIDDEN void ucm_readers_init(void);
/* Adds a handler in priority order, publishes the new table and waits out the readers of the
 * old one: HEAPHOOK_UCM_OK, or HEAPHOOK_UCM_ERR_NO_MEMORY with UCM_MAX_HANDLERS registered. */
UCM_HIDDEN heaphook_ucm_status_t ucm_handlers_add(int events, int priority,
                                                  heaphook_ucm_event_callback_t callback,
                                                  void *arg);
/* Removes events from the handlers of (callback, arg), then publishes and waits as above. */
UCM_HIDDEN void ucm_handlers_remove(int events, heaphook_ucm_event_callback_t callback, void *arg);
/* How many handlers are registered. */
UCM_HIDDEN int ucm_handlers_count(void);

#endif /* HEAPHOOK_UCM_RCU_H */
