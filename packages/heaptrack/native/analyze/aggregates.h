/*
 * aggregates.h — the report's aggregates (heap series, histograms, sites, live blocks, the
 * timeline) and the replay of one event into them (test/oracle/report.ts is the same in
 * TypeScript). Static inline: decode.c's loop inlines the replay; results.c reads them.
 */
#ifndef HH_ANALYZE_AGGREGATES_H
#define HH_ANALYZE_AGGREGATES_H

#include <math.h>

#include "analyze/address.h"

/* ---- The report's aggregates ---------------------------------------------------------- */

/* Before a cell's live bytes change, in peak epoch `epoch`: as touch() for a site. */
static inline void touch_cell_in(time_cell *c, uint64_t epoch) {
    if (c->epoch != epoch) {
        c->peak = c->live;
        c->epoch = epoch;
    }
}

static inline void touch_cell(const hh_scan *s, time_cell *c) {
    touch_cell_in(c, s->peak_epoch);
}

/* The timeline's buckets merge in pairs, as the series' do (its width stays points /
 * timeline_buckets of theirs, so a time's bucket is always its series bucket's, scaled); so do
 * the buckets live blocks were allocated in. */
static inline void timeline_merge(hh_scan *s) {
    for (uint32_t r = 0; r < s->blocks.rec_count; r++) s->blocks.recs[r].bucket /= 2;
    for (size_t i = 0; i < s->site_count; i++) {
        site *x = &s->sites[i];
        size_t n = 0;
        for (size_t k = 0; k < x->cell_count; k++) {
            time_cell c = x->cells[k];
            touch_cell(s, &c);
            c.bucket /= 2;
            time_cell *o = n > 0 ? &x->cells[n - 1] : NULL;
            if (o != NULL && o->bucket == c.bucket) {
                o->allocations += c.allocations;
                o->bytes += c.bytes;
                o->freed += c.freed;
                o->temporary += c.temporary;
                o->live += c.live;
                o->peak += c.peak; /* both touched: values at the same peak */
            } else {
                x->cells[n++] = c;
            }
        }
        x->cell_count = n;
    }
}

/* Site x's cell of bucket b, made when missing (cells stay ascending: times may go back a
 * little between threads); NULL out of memory, when the timeline stops (timeline_lost) and the
 * report's other figures go on. The slow path of timeline_cell. */
static __attribute__((noinline, unused)) time_cell *timeline_find_cell(hh_scan *s, site *x,
                                                                       uint32_t b) {
    size_t n = x->cell_count;
    size_t at = n;
    while (at > 0 && x->cells[at - 1].bucket > b) at--;
    if (at > 0 && x->cells[at - 1].bucket == b) return &x->cells[at - 1];
    if (n == x->cell_cap) { /* most sites have few cells: start small */
        size_t cap = n > 0 ? 2 * n : 4;
        time_cell *grown = realloc(x->cells, cap * sizeof(time_cell));
        if (grown == NULL) {
            s->timeline_lost = true;
            s->timeline_buckets = 0;
            return NULL;
        }
        x->cells = grown;
        x->cell_cap = cap;
    }
    memmove(&x->cells[at + 1], &x->cells[at], (n - at) * sizeof(time_cell));
    x->cells[at] = (time_cell){.bucket = b, .epoch = s->peak_epoch};
    x->cell_count = n + 1;
    return &x->cells[at];
}

/* The fast path: most often the site's last cell (events come in time order). The pointer is
 * valid until the next cell is made. */
static inline time_cell *timeline_cell(hh_scan *s, site *x, uint32_t b) {
    size_t n = x->cell_count;
    if (n > 0 && x->cells[n - 1].bucket == b) return &x->cells[n - 1];
    return timeline_find_cell(s, x, b);
}

/* A block of site x, `weight` bytes, allocated now (in the current bucket); `epoch`: the peak
 * epoch before the allocation (a peak it makes counts it, as the site's does). */
static inline void timeline_alloc(hh_scan *s, site *x, double weight, uint64_t epoch) {
    time_cell *c = timeline_cell(s, x, s->timeline_bucket);
    if (c == NULL) return;
    touch_cell_in(c, epoch);
    c->allocations++;
    c->bytes += weight;
    c->live += weight;
}

/* A block of site x allocated in bucket `born` is freed now; `temporary`: by the very next
 * event of its thread. */
static inline void timeline_free(hh_scan *s, site *x, uint32_t born, double weight,
                                 bool temporary) {
    time_cell *c = timeline_cell(s, x, s->timeline_bucket);
    if (c == NULL) return;
    c->freed += weight;
    c->temporary += temporary ? 1 : 0;
    time_cell *a = born == c->bucket ? c : timeline_cell(s, x, born); /* exists: no new cell */
    if (a == NULL) return;
    touch_cell(s, a);
    a->live -= weight;
}

static inline void series_merge(hh_scan *s) {
    uint32_t n = s->points;
    for (uint32_t i = 0; i < n; i += 2) {
        uint32_t o = i / 2;
        bool a = s->present[i], b = s->present[i + 1];
        if (a && b) {
            s->smin[o] = fmin(s->smin[i], s->smin[i + 1]);
            s->smax[o] = fmax(s->smax[i], s->smax[i + 1]);
            s->slast[o] = s->slast[i + 1];
        } else if (a || b) {
            uint32_t from = a ? i : i + 1;
            s->smin[o] = s->smin[from];
            s->smax[o] = s->smax[from];
            s->slast[o] = s->slast[from];
        }
        s->present[o] = a || b;
    }
    memset(s->present + n / 2, 0, n / 2);
    if (s->timeline_buckets > 0) timeline_merge(s);
    for (uint32_t k = 0; k < s->tseries_count; k++) {
        thread_series *ts = &s->tseries[k];
        for (uint32_t i = 0; i < n; i += 2) {
            ts->counts[i / 2] = ts->counts[i] + ts->counts[i + 1];
            ts->sums[i / 2] = ts->sums[i] + ts->sums[i + 1];
        }
        memset(ts->counts + n / 2, 0, n / 2 * sizeof(double));
        memset(ts->sums + n / 2, 0, n / 2 * sizeof(double));
    }
    s->width *= 2;
    s->series_time = NAN; /* the bucket of a time changed */
}

/* The series thread t's allocations go to: its own, or the one of the threads beyond
 * HH_THREAD_SERIES_MAX. NULL when out of memory. */
static inline thread_series *thread_series_of(hh_scan *s, thread_state *t) {
    if (t->series_slot >= 0) return &s->tseries[t->series_slot];
    if (s->tseries == NULL) {
        s->tseries = calloc(HH_THREAD_SERIES_MAX + 1, sizeof(thread_series));
        if (s->tseries == NULL) return NULL;
    }
    uint32_t slot =
        s->tseries_count < HH_THREAD_SERIES_MAX ? s->tseries_count : HH_THREAD_SERIES_MAX;
    if (slot == s->tseries_count) {
        thread_series *ts = &s->tseries[slot];
        ts->counts = calloc(s->points, sizeof(double));
        ts->sums = calloc(s->points, sizeof(double));
        if (ts->counts == NULL || ts->sums == NULL) {
            free(ts->counts);
            free(ts->sums);
            *ts = (thread_series){0};
            return NULL;
        }
        ts->tid = slot == HH_THREAD_SERIES_MAX ? -1 : t->tid;
        s->tseries_count++;
    }
    t->series_slot = (int32_t)slot;
    return &s->tseries[slot];
}

/* After add_block: thread t allocated `weight` bytes in the heap series' current bucket. */
static inline bool thread_allocated(hh_scan *s, thread_state *t, double weight) {
    if (s->series_off) return true;
    thread_series *ts = thread_series_of(s, t);
    if (ts == NULL) return false;
    ts->allocations++;
    ts->bytes += weight;
    ts->counts[s->series_bucket]++;
    ts->sums[s->series_bucket] += weight;
    return true;
}

/* The series bucket of a time other than the last one's (merging buckets as needed): the slow
 * path of series_add, out of line so that the common case stays small enough to inline. */
static __attribute__((noinline, unused)) uint32_t series_bucket_of(hh_scan *s, double time) {
    double t = time > 0 ? time : 0;
    double at = t / s->width;
    while (at >= s->points) {
        series_merge(s);
        at = t / s->width;
    }
    uint32_t i = (uint32_t)at; /* floor: at is >= 0 */
    s->series_time = time;
    s->series_bucket = i;
    if (s->timeline_buckets > 0) {
        double tb = t / (s->width * s->points / s->timeline_buckets);
        s->timeline_bucket = tb < s->timeline_buckets ? (uint32_t)tb : s->timeline_buckets - 1;
    }
    return i;
}

/* Twice an event (its allocation and its free): inlined, without a call's cost. */
static inline __attribute__((always_inline)) void series_add(hh_scan *s, double time,
                                                             double value) {
    if (s->series_off) return;
    /* Events share times (ticks are coarse): mostly the last bucket. */
    uint32_t i = time == s->series_time ? s->series_bucket : series_bucket_of(s, time);
    if (!s->present[i]) {
        s->present[i] = 1;
        s->smin[i] = s->smax[i] = s->slast[i] = value;
    } else {
        if (value < s->smin[i]) s->smin[i] = value;
        if (value > s->smax[i]) s->smax[i] = value;
        s->slast[i] = value;
    }
}

static inline unsigned size_bucket(double size) {
    if (size <= 0) return 0;
    if (size >= 18446744073709551615.0) return 64;
    uint64_t v = (uint64_t)size;
    return v == 0 ? 0 : 64 - (unsigned)__builtin_clzll(v);
}

static inline unsigned latency_bucket(double ns) {
    double f = floor(ns);
    uint64_t v = f > 0 ? (f < 1.8e19 ? (uint64_t)f : UINT64_MAX) : 0;
    if (v < HH_LATENCY_SUB) return (unsigned)v;
    unsigned p = 63 - (unsigned)__builtin_clzll(v); /* >= 4 */
    unsigned sub = (unsigned)(v >> (p - 4)) - HH_LATENCY_SUB;
    unsigned k = (p - 3) * HH_LATENCY_SUB + sub;
    return k < HH_LATENCY_BUCKETS ? k : HH_LATENCY_BUCKETS - 1;
}

static inline bool latency_add(hh_scan *s, int op, double ns) {
    latency_hist *h = s->latency[op];
    if (h == NULL && (h = s->latency[op] = calloc(1, sizeof *h)) == NULL) return false;
    h->counts[latency_bucket(ns)]++;
    h->count++;
    h->sum += ns;
    if (ns > h->max) h->max = ns;
    return true;
}

/*
 * The record of addr when it is the one the decoder touched last, else NO_REC: an event's
 * report step mostly concerns the block its decoder step just found or made, so it takes the
 * record without a lookup. The record is checked, not trusted (it may have been given back).
 */
static inline uint32_t touched_rec(const hh_scan *s, uint64_t addr) {
    uint32_t r = s->last_touched;
    return r < s->blocks.rec_count && s->blocks.recs[r].addr == addr ? r : NO_REC;
}

/* The record of the report's live block at ptr, or NO_REC. */
static inline uint32_t live_find(const hh_scan *s, double ptr) {
    if (!(ptr > 0 && ptr <= MAX_EXACT)) return NO_REC; /* never a key */
    uint64_t key = (uint64_t)ptr;
    uint32_t r = touched_rec(s, key);
    if (r == NO_REC) r = store_find(&s->blocks, key);
    return r != NO_REC && s->blocks.recs[r].site != NO_SITE ? r : NO_REC;
}

/* The index of a stack's site, created on first use (NONE when out of memory). */
static inline uint64_t site_of(hh_scan *s, double stack) {
    if (stack == s->last_stack && s->site_count > 0) return s->last_site; /* loops repeat sites */
    uint64_t key = (uint64_t)stack + 1;
    uint64_t k = table_get(&s->site_index, key);
    if (k != NONE) {
        s->last_stack = stack;
        s->last_site = k;
        return k;
    }
    if (!grow_array((void **)&s->sites, &s->site_cap, s->site_count, sizeof(site))) return NONE;
    bool ok = true;
    k = s->site_count;
    table_set(&s->site_index, key, k, &ok);
    if (!ok) return NONE;
    s->sites[s->site_count++] = (site){.stack = stack};
    s->last_stack = stack;
    s->last_site = k;
    return k;
}

/* Before a site's live bytes change: if the peak moved since, its value then is its value now. */
static inline void touch(const hh_scan *s, site *x) {
    if (x->epoch != s->peak_epoch) {
        x->peak_bytes = x->live_bytes;
        x->epoch = s->peak_epoch;
    }
}

/* The report lets go of the block of record e: its site and the totals forget it. */
static inline void forget_block(hh_scan *s, block_rec *e, const double *time) {
    site *x = &s->sites[e->site];
    double weight = e->weight;
    e->site = NO_SITE;
    s->live_blocks--;
    touch(s, x);
    x->live_blocks--;
    x->live_bytes -= weight;
    s->live_bytes -= weight;
    if (time != NULL) {
        series_add(s, *time, s->live_bytes);
        if (s->timeline_buckets > 0) {
            bool temporary = (uint32_t)(e - s->blocks.recs) == s->temporary_rec;
            if (temporary) s->temporary_rec = NO_REC;
            timeline_free(s, x, e->bucket, weight, temporary);
        }
    }
}

static inline void remove_block(hh_scan *s, double ptr, const double *time) {
    uint32_t r = live_find(s, ptr);
    if (r == NO_REC) {
        if (s->flags & HH_PF_ATTACHED)
            s->freed_before_attach++;
        else
            s->unknown_frees++;
        return;
    }
    block_rec *e = &s->blocks.recs[r];
    forget_block(s, e, time);
    if (e->ordinal == 0) store_release(&s->blocks, r);
}

static inline bool add_block(hh_scan *s, int op, double ptr, double size, double weight,
                             double stack, double time) {
    uint64_t key = (uint64_t)ptr; /* in (0, 2^53) */
    uint32_t r = touched_rec(s, key);
    if (r == NO_REC && (r = store_insert(&s->blocks, key)) == NO_REC) return false;
    block_rec *e = &s->blocks.recs[r];
    if (e->site != NO_SITE) { /* already live: should not happen */
        s->anomalies++;
        forget_block(s, e, NULL);
    }
    e->op = (uint8_t)op;
    uint64_t index = site_of(s, stack);
    if (index == NONE) return false;
    site *x = &s->sites[index];
    touch(s, x);
    x->allocations++;
    x->bytes += weight;
    x->live_blocks++;
    x->live_bytes += weight;
    e->site = (uint32_t)index;
    e->weight = weight;
    s->live_blocks++;
    s->live_bytes += weight;
    s->allocated_bytes += weight;
    unsigned b = size_bucket(size);
    s->size_counts[b]++;
    s->size_bytes[b] += size;
    uint64_t epoch = s->peak_epoch;
    if (s->live_bytes > s->peak_bytes) {
        s->peak_bytes = s->live_bytes;
        s->peak_time = time;
        s->peak_epoch++;
    }
    if ((double)s->live_blocks > s->peak_blocks) {
        s->peak_blocks = (double)s->live_blocks;
        s->peak_blocks_time = time;
    }
    series_add(s, time, s->live_bytes);
    if (s->timeline_buckets > 0) {
        e->bucket = (uint8_t)s->timeline_bucket;
        timeline_alloc(s, x, weight, epoch);
    }
    return true;
}

/* One event, as ReportBuilder.apply; `duration` and `sample_weight` are NaN when not recorded. */
/* (Inlined into the block loop: one call site, and its dozen arguments cost more to pass than
 * most events take.) */
static inline __attribute__((always_inline)) bool replay(hh_scan *s, int code, double time,
                                                         thread_state *t, double stack, double ptr,
                                                         double old_ptr, double size, double count,
                                                         double duration, double sample_weight,
                                                         bool split) {
    s->calls[code]++;
    if (time > s->last_time) s->last_time = time;
    if (code != HH_OP_REALLOC_DONE) {
        s->events++;
        if (duration == duration && !latency_add(s, code, duration)) return false;
        /* A temporary allocation: the thread's very next event frees it. */
        double previous = t->last_ptr;
        if (previous != 0) {
            t->last_ptr = 0;
            bool frees_it = (code == HH_OP_FREE && ptr == previous) ||
                            ((code == HH_OP_REALLOC || code == HH_OP_REALLOCARRAY) &&
                             old_ptr == previous && ptr == 0 && size == 0);
            uint32_t r = frees_it ? live_find(s, previous) : NO_REC;
            if (r != NO_REC) {
                s->temporary++;
                s->sites[s->blocks.recs[r].site].temporary++;
                s->temporary_rec = r; /* this event frees it: the timeline counts it then */
            }
        }
    }
    double bytes = code == HH_OP_CALLOC || code == HH_OP_REALLOCARRAY ? count * size : size;
    double weight = sample_weight == sample_weight ? sample_weight : bytes;
    switch (code) {
        case HH_OP_FREE:
            remove_block(s, ptr, &time);
            return true;
        case HH_OP_REALLOC:
        case HH_OP_REALLOCARRAY:
            if (ptr == 0 && bytes > 0) {
                s->failed_calls++;
                return true;
            }
            if (old_ptr != 0) remove_block(s, old_ptr, &time);
            if (ptr == 0 || weight == 0) return true;
            if (split) {
                t->pending = true;
                t->pending_op = (uint8_t)code;
                t->pending_ptr = ptr;
                t->pending_size = bytes;
                t->pending_weight = weight;
                t->pending_stack = stack;
                return true;
            }
            if (!add_block(s, code, ptr, bytes, weight, stack, time)) return false;
            if (!thread_allocated(s, t, weight)) return false;
            t->last_ptr = ptr;
            return true;
        case HH_OP_REALLOC_DONE:
            if (t->pending) {
                t->pending = false;
                if (!add_block(s, t->pending_op, t->pending_ptr, t->pending_size, t->pending_weight,
                               t->pending_stack, time) ||
                    !thread_allocated(s, t, t->pending_weight))
                    return false;
                t->last_ptr = t->pending_ptr;
            }
            return true;
        default:
            if (ptr == 0) {
                s->failed_calls++;
                return true;
            }
            if (!add_block(s, code, ptr, bytes, weight, stack, time)) return false;
            if (!thread_allocated(s, t, weight)) return false;
            t->last_ptr = ptr;
            return true;
    }
}

#endif
