/*
 * results.c — what the addon reads when the log is done (scan.h): totals, latency histograms,
 * the heap series, threads, sites, live blocks, the allocation sequence and the timeline.
 */
#include <math.h>

#include "analyze/aggregates.h"

/* ---- Results ------------------------------------------------------------------------ */

int hh_scan_live_block(const hh_scan *s, double ptr, double *weight, double *stack,
                       double *bucket_start) {
    uint32_t r = live_find(s, ptr);
    if (r == NO_REC) return 0;
    const block_rec *e = &s->blocks.recs[r];
    *weight = e->weight;
    *stack = s->sites[e->site].stack;
    *bucket_start =
        s->timeline_buckets > 0 ? e->bucket * (s->width * s->points / s->timeline_buckets) : -1;
    return 1;
}

void hh_scan_get_totals(const hh_scan *s, hh_scan_totals *o) {
    memcpy(o->calls, s->calls, sizeof o->calls);
    o->events = s->events;
    o->allocated_bytes = s->allocated_bytes;
    o->live_bytes = s->live_bytes;
    o->peak_bytes = s->peak_bytes;
    o->peak_time = s->peak_time;
    o->peak_blocks = s->peak_blocks;
    o->peak_blocks_time = s->peak_blocks_time;
    o->last_time = s->last_time;
    o->temporary = s->temporary;
    o->unknown_frees = s->unknown_frees;
    o->failed_calls = s->failed_calls;
    o->anomalies = s->anomalies;
    o->freed_before_attach = s->freed_before_attach;
    memcpy(o->size_counts, s->size_counts, sizeof o->size_counts);
    memcpy(o->size_bytes, s->size_bytes, sizeof o->size_bytes);
}

void hh_scan_get_latency(const hh_scan *s, int op, hh_scan_latency *o) {
    const latency_hist *h = op >= 0 && op < HH_OP_COUNT ? s->latency[op] : NULL;
    *o = h == NULL ? (hh_scan_latency){0}
                   : (hh_scan_latency){
                         .counts = h->counts, .count = h->count, .max = h->max, .sum = h->sum};
}

void hh_scan_get_series(const hh_scan *s, hh_scan_series *o) {
    *o = (hh_scan_series){.points = s->points,
                          .width = s->width,
                          .present = s->present,
                          .min = s->smin,
                          .max = s->smax,
                          .last = s->slast};
}

size_t hh_scan_thread_series_count(const hh_scan *s) {
    return s->tseries_count;
}

void hh_scan_get_thread_series(const hh_scan *s, size_t i, hh_scan_thread_series *o) {
    const thread_series *ts = &s->tseries[i];
    *o = (hh_scan_thread_series){.tid = ts->tid,
                                 .allocations = ts->allocations,
                                 .bytes = ts->bytes,
                                 .counts = ts->counts,
                                 .sums = ts->sums};
}

size_t hh_scan_site_count(const hh_scan *s) {
    return s->site_count;
}

void hh_scan_get_sites(hh_scan *s, double *out) {
    for (size_t i = 0; i < s->site_count; i++)
        out[i * HH_SITE_FIELDS + HH_SITE_lowestLiveAddress] = INFINITY;
    for (uint32_t r = 0; r < s->blocks.rec_count; r++) {
        const block_rec *e = &s->blocks.recs[r];
        if (e->addr == 0 || e->site == NO_SITE) continue;
        double *lowest = &out[e->site * HH_SITE_FIELDS + HH_SITE_lowestLiveAddress];
        if ((double)e->addr < *lowest) *lowest = (double)e->addr;
    }
    for (size_t i = 0; i < s->site_count; i++) {
        site *x = &s->sites[i];
        touch(s, x);
        double *o = out + i * HH_SITE_FIELDS;
        o[HH_SITE_stack] = x->stack;
        o[HH_SITE_allocations] = x->allocations;
        o[HH_SITE_bytes] = x->bytes;
        o[HH_SITE_liveBlocks] = x->live_blocks;
        o[HH_SITE_liveBytes] = x->live_bytes;
        o[HH_SITE_peakBytes] = x->peak_bytes;
        o[HH_SITE_temporary] = x->temporary;
    }
}

size_t hh_scan_live_count(const hh_scan *s) {
    return s->live_blocks;
}

void hh_scan_get_live(const hh_scan *s, double *out) {
    double *o = out;
    for (uint32_t r = 0; r < s->blocks.rec_count; r++) {
        const block_rec *e = &s->blocks.recs[r];
        if (e->addr == 0 || e->site == NO_SITE) continue;
        o[HH_LIVE_address] = (double)e->addr;
        o[HH_LIVE_weight] = e->weight;
        o[HH_LIVE_site] = e->site;
        o[HH_LIVE_op] = e->op;
        o += HH_LIVE_FIELDS;
    }
}

int hh_scan_start_sequence(hh_scan *s, bool tally, double code_alloc, double code_free,
                           double code_realloc) {
    sequence *q = &s->seq;
    if (q->on || s->all_events > 0) return -1;
    if (!table_init(&q->slot_of, 1024)) return -1;
    q->on = true;
    q->tally = tally;
    q->code_alloc = code_alloc;
    q->code_free = code_free;
    q->code_realloc = code_realloc;
    q->largest_align = 1;
    return 0;
}

size_t hh_scan_sequence(const hh_scan *s, const double **ops, const double **events) {
    *ops = s->seq.ops;
    *events = s->seq.op_events;
    return s->seq.count;
}

void hh_scan_clear_sequence(hh_scan *s) {
    s->seq.count = 0;
}

void hh_scan_get_sequence_figures(const hh_scan *s, hh_scan_sequence_figures *o) {
    const sequence *q = &s->seq;
    *o = (hh_scan_sequence_figures){.peak_bytes = q->peak_bytes,
                                    .peak_footprint = q->peak_foot,
                                    .largest_request = q->largest_request,
                                    .largest_align = q->largest_align,
                                    .threads = q->threads};
}

int hh_scan_start_timeline(hh_scan *s, uint32_t buckets) {
    if (buckets < 1 || buckets > s->points || buckets > HH_TIMELINE_MAX_BUCKETS ||
        s->all_events > 0)
        return -1;
    s->timeline_buckets = buckets;
    s->series_time = NAN; /* series_add computes the timeline's bucket with the series' */
    return 0;
}

int hh_scan_skip_series(hh_scan *s) {
    if (s->timeline_buckets > 0 || s->all_events > 0) return -1;
    s->series_off = true;
    return 0;
}

bool hh_scan_timeline(const hh_scan *s, hh_scan_timeline_info *out) {
    size_t cells = 0;
    for (size_t i = 0; i < s->site_count; i++) cells += s->sites[i].cell_count;
    *out = (hh_scan_timeline_info){
        .buckets = s->timeline_lost ? 0 : s->timeline_buckets,
        .width = s->timeline_buckets > 0 ? s->width * s->points / s->timeline_buckets : 0,
        .cells = s->timeline_lost ? 0 : cells,
    };
    return !s->timeline_lost;
}

void hh_scan_get_timeline(hh_scan *s, double *out) {
    for (size_t i = 0; i < s->site_count; i++) {
        site *x = &s->sites[i];
        for (size_t k = 0; k < x->cell_count; k++) {
            time_cell *c = &x->cells[k];
            touch_cell(s, c);
#define PUT_COLUMN(name, value) out[HH_TIMELINE_##name] = (value);
            HH_TIMELINE_COLUMNS(PUT_COLUMN)
#undef PUT_COLUMN
            out += HH_TIMELINE_FIELDS;
        }
    }
}
