/*
 * scan.c — the one replay of a heaplog, in C (scan.h says what and why): the scanner's life
 * (creation, limits, flags, threads, blocks). The rest of analyze/, by concern: store.h (hash
 * table, live-block store, old ordinals), state.h (struct hh_scan), address.h (the decoder's
 * address state), aggregates.h (the report's figures and the replay of one event), decode.c
 * (varints, the event fields of format/fields.h, the block loop), sequence.c (recommend's
 * allocation sequence), results.c (what the addon reads when the log is done).
 */
#include <math.h>
#include <stdio.h>

#include "analyze/state.h"

hh_scan *hh_scan_new(uint32_t points, double width_ns) {
    if (points < 2 || points % 2 != 0) return NULL;
    hh_scan *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->unit = 1;
    s->points = points;
    s->width = width_ns > 1 ? width_ns : 1;
    s->series_time = NAN;
    s->present = calloc(points, 1);
    s->smin = calloc(points, sizeof(double));
    s->smax = calloc(points, sizeof(double));
    s->slast = calloc(points, sizeof(double));
    s->ring_rec = calloc(HH_ORDINAL_RING, sizeof(uint32_t));
    s->last_touched = NO_REC;
    s->temporary_rec = NO_REC;
    bool ok = s->present && s->smin && s->smax && s->slast && s->ring_rec;
    ok = ok && table_init(&s->tid_index, 16) && store_init(&s->blocks);
    ok = ok && table_init(&s->site_index, 1024);
    if (!ok) {
        hh_scan_free(s);
        return NULL;
    }
    return s;
}

void hh_scan_free(hh_scan *s) {
    if (s == NULL) return;
    free(s->thread_tid);
    free(s->thread_state);
    for (uint32_t i = 0; i < s->tseries_count; i++) {
        free(s->tseries[i].counts);
        free(s->tseries[i].sums);
    }
    free(s->tseries);
    free(s->thread_stack);
    for (size_t i = 0; i < s->state_count; i++) free(s->states[i]);
    free(s->states);
    free(s->tid_index.slots);
    store_free(&s->blocks);
    free(s->ring_rec);
    free(s->old_rec.entries);
    for (int i = 0; i < HH_OP_COUNT; i++) free(s->latency[i]);
    free(s->site_index.slots);
    for (size_t i = 0; i < s->site_count; i++) free(s->sites[i].cells);
    free(s->sites);
    free(s->present);
    free(s->smin);
    free(s->smax);
    free(s->slast);
    free(s->seq.slot_of.slots);
    free(s->seq.free_slots);
    free(s->seq.slot_bytes);
    free(s->seq.slot_foot);
    free(s->seq.ops);
    free(s->seq.op_events);
    free(s);
}

void hh_scan_set_block_limit(hh_scan *s, uint32_t limit) {
    s->blocks.limit = limit < REC_MAX ? limit : REC_MAX;
}

uint32_t hh_scan_block_limit(const hh_scan *s) {
    return s->blocks.limit;
}

void hh_scan_set_flags(hh_scan *s, uint32_t flags, double unit_ns) {
    s->flags = flags;
    s->unit = unit_ns > 0 ? unit_ns : 1;
}

/* Grows an array of `size`-byte elements to hold index `need`; new entries are zero. */
int hh_scan_set_thread(hh_scan *s, uint64_t index, double tid) {
    if (index > HH_MAX_THREAD_INDEX) return -1; /* as the TypeScript decoder: a corrupt index */
    if (index >= s->threads) {
        size_t cap = s->threads, cap2 = s->threads, cap3 = s->threads;
        if (!grow_array((void **)&s->thread_tid, &cap, index, sizeof(double)) ||
            !grow_array((void **)&s->thread_state, &cap2, index, sizeof(thread_state *)) ||
            !grow_array((void **)&s->thread_stack, &cap3, index, sizeof(double)))
            return -1;
        for (size_t i = s->threads; i < cap; i++) s->thread_tid[i] = -1;
        s->threads = cap;
    }
    /* One state per tid, shared by every index that names it. */
    uint64_t key; /* the double's bits (+1: 0 marks empty): one key per tid, whatever its size */
    memcpy(&key, &tid, sizeof key);
    key++;
    uint64_t k = table_get(&s->tid_index, key);
    if (k == NONE) {
        thread_state *st = calloc(1, sizeof *st);
        if (st == NULL || !grow_array((void **)&s->states, &s->state_cap, s->state_count,
                                      sizeof(thread_state *))) {
            free(st);
            return -1;
        }
        st->tid = tid;
        st->series_slot = -1;
        bool ok = true;
        k = s->state_count;
        table_set(&s->tid_index, key, k, &ok);
        if (!ok) {
            free(st);
            return -1;
        }
        s->states[s->state_count++] = st;
    }
    s->thread_tid[index] = tid;
    s->thread_state[index] = s->states[k];
    return 0;
}

void hh_scan_start_block(hh_scan *s, unsigned streams) {
    s->split = streams != HH_STREAM_COUNT_SHARED_ADDR;
    s->time = 0;
    s->addr = 0;
    if (s->threads > 0) {
        uint64_t last = s->max_thread < s->threads ? s->max_thread : s->threads - 1;
        memset(s->thread_stack, 0, (last + 1) * sizeof(double));
    }
    s->thread = 0;
    s->thread_checked = false;
    s->max_thread = 0;
    s->block_events = 0;
    s->la_tag = SIZE_MAX;
}

const char *hh_scan_error(const hh_scan *s) {
    return s->error;
}
uint64_t hh_scan_block_events(const hh_scan *s) {
    return s->block_events;
}
uint64_t hh_scan_events(const hh_scan *s) {
    return s->all_events;
}
