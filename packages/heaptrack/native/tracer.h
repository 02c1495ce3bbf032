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

/* Standalone mode: write what the ring holds now (before exec). */
void hh_tracer_flush_now(void);

uint64_t hh_now(void);
uint32_t hh_tid(void);

#endif /* HH_TRACER_H */
