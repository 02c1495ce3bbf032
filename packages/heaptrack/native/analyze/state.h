/*
 * state.h — the scanner's state (struct hh_scan) and what its parts are: latency histograms,
 * sites, threads, the allocation sequence. Shared by the files of analyze/ (scan.h lists
 * them).
 */
#ifndef HH_ANALYZE_STATE_H
#define HH_ANALYZE_STATE_H

#include "analyze/scan.h"
#include "analyze/store.h"

/* ---- Scanner state ------------------------------------------------------------------------ */

typedef struct latency_hist {
    double counts[HH_LATENCY_BUCKETS];
    double count, max, sum;
} latency_hist;

/* A site's calls in one bucket of the timeline (hh_scan_start_timeline), and the bytes of the
 * bucket's allocations live now and at the peak (peak and epoch as a site's, see touch). */
typedef struct time_cell {
    uint32_t bucket;
    double allocations, bytes, freed, temporary, live, peak;
    uint64_t epoch;
} time_cell;

typedef struct site {
    double stack, allocations, bytes, live_blocks, live_bytes, peak_bytes, temporary;
    uint64_t epoch;   /* the peak epoch peak_bytes was taken in */
    time_cell *cells; /* with a timeline: the buckets the site had calls in, ascending */
    size_t cell_count, cell_cap;
} site;

/* Per tid: the block its previous event allocated (temporary allocations), and a moved
 * realloc's new block waiting for its realloc_done. */
typedef struct thread_state {
    double last_ptr;
    bool pending;
    uint8_t pending_op;
    double pending_ptr, pending_size, pending_weight, pending_stack;
    /* The allocation sequence (below): a moved realloc's new block waiting for its
     * realloc_done, and whether the thread has had an event. */
    bool moving, seen;
    uint32_t moving_slot;
    uint64_t moving_ptr;
    /* Its kernel thread id, and its allocations' series (thread_series below; -1: none yet). */
    double tid;
    int32_t series_slot;
} thread_state;

/*
 * Allocations by thread over time (the Perfetto export's thread tracks): per thread, the
 * allocations and bytes each bucket of the heap series saw. The first HH_THREAD_SERIES_MAX
 * threads that allocate get a series of their own; the allocations of later ones are summed
 * into one more (tid -1). So the memory is bounded by HH_THREAD_SERIES_MAX x the series'
 * points, whatever number of threads a log declares.
 */
#define HH_THREAD_SERIES_MAX 64
typedef struct thread_series {
    double tid, allocations, bytes;
    double *counts, *sums; /* by bucket of the heap series */
} thread_series;

/*
 * The allocation sequence, for recommend (hh_scan_start_sequence): every event becomes the
 * operations a TLSF heap replays (TlsfHeap.replay of @heaphook/tlsf, 4 doubles each: code,
 * slot, size, alignment or new slot), blocks named by slots (one per live block, reused last
 * in, first out), with the request as the core hands it to the backend. With `tally`, it also
 * follows the live bytes and footprints per slot and their peaks.
 */
typedef struct sequence {
    bool on, tally;
    double code_alloc, code_free, code_realloc; /* the operation codes, TlsfHeap's */
    u64_table slot_of;                          /* log address -> slot */
    uint32_t *free_slots;
    size_t free_count, free_cap;
    uint32_t next_slot;
    double *slot_bytes, *slot_foot; /* with tally, per slot: request and footprint (0: not live) */
    size_t slot_cap;
    double *ops, *op_events; /* 4 doubles per operation; the event number (1-based) of each */
    size_t count, cap;
    double live_bytes, live_foot, peak_bytes, peak_foot, largest_request, largest_align;
    double threads; /* threads that had an event */
} sequence;

struct hh_scan {
    /* Declarations (persist) */
    uint32_t flags;
    double unit;
    double *thread_tid;          /* by thread index; -1: not declared */
    thread_state **thread_state; /* by thread index */
    size_t threads;              /* entries of the two arrays above */
    u64_table tid_index;         /* tid + 1 -> index into states */
    thread_state **states;
    size_t state_count, state_cap;

    /* Delta state (restarts every block) */
    double time;
    uint64_t addr;
    uint64_t thread;
    bool thread_checked;  /* thread is declared (and counted in max_thread) */
    double *thread_stack; /* by thread index */
    uint64_t max_thread;  /* highest index touched in this block */

    /* Address state (persists) */
    uint64_t ordinal;
    block_store blocks;    /* both sides' blocks */
    uint32_t last_touched; /* the record the decoder touched last (see touched_rec) */
    uint32_t *ring_rec; /* ordinal -> record + 1 (0: none) for the last HH_ORDINAL_RING ordinals */
    old_ordinals old_rec; /* ordinal -> record for older ones the decoder holds */
    uint64_t recent[HH_RECENT];
    unsigned recent_head;
    /* Per size class a ring of the addresses freed last (address.h, class_entry): entry k of
     * class c is classes[c * HH_CLASS_DEPTH + ((class_head[c] + k) & (HH_CLASS_DEPTH - 1))]. */
    uint64_t classes[HH_CLASSES * HH_CLASS_DEPTH];
    uint8_t class_head[HH_CLASSES];
    uint64_t bump_addr;
    double bump_bytes;
    int64_t prev_ref;

    /* The report's aggregates */
    double calls[HH_OP_COUNT];
    double events, last_time;
    latency_hist *latency[HH_OP_COUNT];
    size_t live_blocks;   /* blocks the report holds live */
    u64_table site_index; /* stack + 1 -> site index */
    site *sites;
    double last_stack; /* the last stack looked up, and its site */
    uint64_t last_site;
    size_t site_count, site_cap;
    double live_bytes, allocated_bytes, peak_bytes, peak_time;
    uint64_t peak_epoch;
    double peak_blocks, peak_blocks_time;
    double temporary, unknown_frees, failed_calls, freed_before_attach;
    double size_counts[HH_SIZE_BUCKETS], size_bytes[HH_SIZE_BUCKETS];
    /* Heap series (src/report/series.ts) */
    uint32_t points;
    double width;
    uint8_t *present;
    double *smin, *smax, *slast;
    double series_time;     /* the time series_add saw last (NaN: none) ... */
    uint32_t series_bucket; /* ... and its bucket */
    bool series_off;        /* hh_scan_skip_series: no heap series, no thread series */
    /* Timeline (hh_scan_start_timeline): buckets of width * points / timeline_buckets, merged
     * in pairs with the series' */
    uint32_t timeline_buckets; /* 0: off */
    uint32_t timeline_bucket;  /* the bucket of series_time */
    bool timeline_lost;        /* out of memory: the timeline stopped */
    uint32_t temporary_rec;    /* the temporary block the current event frees (NO_REC: none) */
    thread_series *tseries;    /* HH_THREAD_SERIES_MAX + 1 entries, allocated with the first */
    uint32_t tseries_count;

    /* The current block has ten streams: old addresses in HH_STREAM_OLD, and the varints of
     * num, addr and old split (heaplog.h); false: six streams, both addresses in
     * HH_STREAM_ADDR, no varint split (hh_scan_start_block) */
    bool split;

    /* Lookahead: a second reader of the tag and old streams that runs ahead of the events */
    size_t la_tag, la_addr, la_more; /* its positions in tag, old (or addr) and old_more (la_tag
                                        SIZE_MAX: start from the events') */
    int64_t la_prev_ref;
    uint64_t la_events;             /* events it has passed in this block */
    bool la_stopped;                /* it met a record that is not an event, or damage */
    uint64_t la_ordinal[LOOKAHEAD]; /* event i's free, by ordinal (0: none), at i % LOOKAHEAD */

    sequence seq;
    /* The events written out (events.c; off unless hh_scan_start_events), and whether they
     * are replayed too. */
    bool events_on, events_replay;
    hh_event_columns event_columns;

    uint64_t block_events, all_events;
    double anomalies; /* allocations at an address the report held live already */
    bool out_of_memory;
    char error[160];
};

static inline bool grow_array(void **array, size_t *cap, size_t need, size_t size) {
    if (need < *cap) return true;
    size_t n = *cap ? *cap : 64;
    while (n <= need) n *= 2;
    void *p = realloc(*array, n * size);
    if (p == NULL) return false;
    memset((char *)p + *cap * size, 0, (n - *cap) * size);
    *array = p;
    *cap = n;
    return true;
}

/* The allocation sequence's part of an event (sequence.c); false when out of memory. */
__attribute__((visibility("hidden"), noinline)) bool seq_event(hh_scan *s, int op, thread_state *t,
                                                               uint64_t ptr, uint64_t old_ptr,
                                                               double size, double count,
                                                               double align, bool split,
                                                               double event);

/* Writes the event just decoded into the event columns (events.c); false when they are full. */
__attribute__((visibility("hidden"), noinline)) bool events_put(hh_scan *s, int op, uint8_t tag,
                                                                uint64_t thread, double stack,
                                                                const hh_field_decoded *f);

#endif
