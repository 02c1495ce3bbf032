/*
 * scan.h — the one replay of a heaplog: decodes the events of a block (FORMAT.md, "Records" and
 * "Addresses") and replays them into the heap's states, with no object per event: the report's
 * figures (src/report/model.ts describes each), the live blocks and their sites (the summary of
 * `dump --summary` and summarize(), the blocks LEAK records name) and, when asked, the
 * allocation sequence recommend replays through TLSF heaps. The TypeScript side reads the file,
 * checks and decompresses the blocks, decodes the declarations (PROCESS, THREAD, NODE, ...) and
 * hands each block's payload here (scan_addon.c, src/decode/replay.ts).
 *
 * It is the only decoder of events: with event columns given (hh_scan_set_event_columns, below)
 * it hands each event to TypeScript by named columns instead of, or besides, replaying it
 * (decodeLog, dump: src/decode/events.ts). test/oracle/ replays those columns as this does,
 * and tests compare the two on real and random logs. Numbers the report shows
 * (bytes, weights, sums) are kept as doubles, as in JavaScript, so both give the same results.
 *
 * Its files, by concern: store.h (the hash table, the live-block store), state.h (struct
 * hh_scan), address.h (address decoding), decode.c (varints, the event fields of
 * format/fields.h, the block loop: hh_scan_run), aggregates.h (the report's figures and the
 * replay of one event), sequence.c (recommend's sequence), events.c (the events written out),
 * results.c (the hh_scan_get_* readers), scan.c (the scanner's life).
 *
 * Memory: bounded by the live blocks, the distinct stacks and the threads, never by events; the
 * live blocks by a limit (hh_scan_set_block_limit): a crafted log of a few KB can declare
 * millions, and the replay stops at the limit instead of holding them all.
 */
#ifndef HH_SCAN_H
#define HH_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/fields.h"  /* the fields of an event (HH_EVENT_FIELDS) */
#include "format/heaplog.h" /* the streams (enum hh_stream) and operations (enum hh_op) */

typedef struct hh_scan hh_scan;

/* hh_scan_run's results. */
enum {
    HH_SCAN_BLOCK_END = 0, /* the tag stream is consumed */
    HH_SCAN_RECORD =
        1,             /* the next record is not an event: the caller decodes it, then runs again */
    HH_SCAN_ERROR = 2, /* the block is damaged here: hh_scan_error() says how */
    HH_SCAN_NO_MEMORY = 3,
    HH_SCAN_LIMIT = 4, /* more blocks live than the limit: hh_scan_error() names it */
};

/* Blocks live at once, unless hh_scan_set_block_limit says otherwise (~100 bytes each: about
 * 0.4 GB at this limit). */
#define HH_SCAN_DEFAULT_BLOCK_LIMIT (1u << 22)

#define HH_SIZE_BUCKETS 65 /* bucket 0: size 0; bucket k: [2^(k-1), 2^k) */
#define HH_LATENCY_SUB 16  /* sub-buckets per power of two */
#define HH_LATENCY_BUCKETS (16 * 48)

/* A new scanner; the heap series has `points` buckets (even, >= 2) of `width_ns` to begin with. */
hh_scan *hh_scan_new(uint32_t points, double width_ns);
void hh_scan_free(hh_scan *s);

/* At most `limit` blocks live at once (each replay side's together); an event that would make
 * more stops the replay with HH_SCAN_LIMIT, the events before it replayed. */
void hh_scan_set_block_limit(hh_scan *s, uint32_t limit);
uint32_t hh_scan_block_limit(const hh_scan *s);

/* From the PROCESS record: the log's flags and ns per time tick. */
void hh_scan_set_flags(hh_scan *s, uint32_t flags, double unit_ns);
/* From a THREAD record: thread index -> tid. Returns 0, or -1 when out of memory or range. */
int hh_scan_set_thread(hh_scan *s, uint64_t index, double tid);
/* Before the first record of every block: the delta state restarts. streams is the block's
 * number of streams: HH_STREAM_COUNT, or HH_STREAM_COUNT_SHARED_ADDR for the layout of versions
 * 1 to 3, whose old addresses are read from HH_STREAM_ADDR and whose varints are whole (pos[]
 * of the streams it lacks is not used). */
void hh_scan_start_block(hh_scan *s, unsigned streams);

/*
 * Decodes and replays events from buf at pos[stream] (each stream ends at end[stream]) up to
 * the end of the tag stream or the first record that is not an event; pos[] is left after the
 * last event taken. On HH_SCAN_ERROR the events before the damage have been replayed.
 */
int hh_scan_run(hh_scan *s, const uint8_t *buf, size_t pos[HH_STREAM_COUNT],
                const size_t end[HH_STREAM_COUNT]);
const char *hh_scan_error(const hh_scan *s);
/* Events replayed in the current block (realloc_done included), and in the whole log. */
uint64_t hh_scan_block_events(const hh_scan *s);
uint64_t hh_scan_events(const hh_scan *s);

/*
 * The events themselves (decodeLog and dump, src/decode/events.ts): once columns are given,
 * hh_scan_run also writes every event of the block into them, event k of the block (k:
 * hh_scan_block_events before it) at index k of each column: the common part
 * (HH_EVENT_COMMON_COLUMNS: operation, realloc's split bit, time in ns, tid, stack) and then
 * every field of format/fields.h's HH_EVENT_FIELDS, under the table's names, as decode_fields
 * gives them (a field the event does not carry: count 1, duration and weight NaN, else 0). A
 * field added to the table is a column here with no change to this file or to the addon.
 * Without the replay (hh_scan_start_events(s, false), before the first event) the events are
 * only decoded: the report's figures stay empty, and the pass costs the decoder alone.
 */
#define HH_EVENT_COMMON_COLUMNS(X) \
    X(op, uint8_t)                 \
    X(split, uint8_t)              \
    X(time, double)                \
    X(tid, double)                 \
    X(stack, double)
#define HH_EVENT_COMMON_MEMBER_(name, type) type *name;
#define HH_EVENT_FIELD_MEMBER_(name, coding, ops, flag) double *name;
typedef struct hh_event_columns {
    size_t capacity; /* entries of every column; an event past it is damage (HH_SCAN_ERROR) */
    HH_EVENT_COMMON_COLUMNS(HH_EVENT_COMMON_MEMBER_)
    HH_EVENT_FIELDS(HH_EVENT_FIELD_MEMBER_)
} hh_event_columns;
/* Before the first event; `replay` false: decode only. Returns 0, or -1 after the first event. */
int hh_scan_start_events(hh_scan *s, bool replay);
/* Where the next events go (copied; the arrays must outlive their use). Each block's events
 * start at index 0 again. */
void hh_scan_set_event_columns(hh_scan *s, const hh_event_columns *columns);

/* The live block at `ptr` (for LEAK records): 1 with its weight, stack and the start (ns) of the
 * timeline bucket it was allocated in (-1 without a timeline: a time, as buckets merge later),
 * or 0. */
int hh_scan_live_block(const hh_scan *s, double ptr, double *weight, double *stack,
                       double *bucket_start);

/* The aggregates, read when the log is done. */
typedef struct hh_scan_totals {
    double calls[HH_OP_COUNT];
    double events; /* realloc_done not counted */
    double allocated_bytes, live_bytes, peak_bytes, peak_time;
    double peak_blocks, peak_blocks_time, last_time; /* live blocks: hh_scan_live_count */
    double temporary, unknown_frees, failed_calls;
    double anomalies; /* allocations at an address already live (should be 0) */
    /* In a log that began with an attach (HH_PF_ATTACHED): frees (and reallocs) of blocks the
     * log never saw allocated, i.e. allocated before the attach; unknown_frees is then 0. */
    double freed_before_attach;
    double size_counts[HH_SIZE_BUCKETS], size_bytes[HH_SIZE_BUCKETS];
} hh_scan_totals;
void hh_scan_get_totals(const hh_scan *s, hh_scan_totals *out);
/* The scalars of hh_scan_totals by their names at the seam to TypeScript (ScannerTotals in
 * src/decode/replay.ts): X(member, name). The addon hands TypeScript an object of these names,
 * never a position. */
#define HH_SCAN_TOTALS_SCALARS(X)       \
    X(events, events)                   \
    X(allocated_bytes, allocatedBytes)  \
    X(live_bytes, liveBytes)            \
    X(peak_bytes, peakBytes)            \
    X(peak_time, peakTime)              \
    X(peak_blocks, peakBlocks)          \
    X(peak_blocks_time, peakBlocksTime) \
    X(last_time, lastTime)              \
    X(temporary, temporary)             \
    X(unknown_frees, unknownFrees)      \
    X(failed_calls, failedCalls)        \
    X(anomalies, anomalies)             \
    X(freed_before_attach, freedBeforeAttach)

/* Per function with durations: the latency histogram (NULL counts when none was recorded). */
typedef struct hh_scan_latency {
    const double *counts; /* HH_LATENCY_BUCKETS */
    double count, max, sum;
} hh_scan_latency;
void hh_scan_get_latency(const hh_scan *s, int op, hh_scan_latency *out);

/* The heap series: `points` buckets of `width` ns; present[i] says whether bucket i saw a value. */
typedef struct hh_scan_series {
    uint32_t points;
    double width;
    const uint8_t *present;
    const double *min, *max, *last;
} hh_scan_series;
void hh_scan_get_series(const hh_scan *s, hh_scan_series *out);

/* Allocations by thread, on the heap series' buckets (`points` of `width` ns each), in the order
 * the threads first allocated: a thread's tid (-1: the threads beyond the first 64, summed),
 * its allocations and their bytes (sampled weights when the log samples), and per bucket. */
typedef struct hh_scan_thread_series {
    double tid, allocations, bytes;
    const double *counts, *sums;
} hh_scan_thread_series;
size_t hh_scan_thread_series_count(const hh_scan *s);
void hh_scan_get_thread_series(const hh_scan *s, size_t i, hh_scan_thread_series *out);

/* Sites in first-seen order, their peak figures brought up to date; 8 doubles each:
 * stack, allocations, bytes, live blocks, live bytes, peak bytes, temporary, and the lowest
 * address of its live blocks (Infinity when none). */
#define HH_SITE_COLUMNS(X) \
    X(stack)               \
    X(allocations)         \
    X(bytes) X(liveBlocks) X(liveBytes) X(peakBytes) X(temporary) X(lowestLiveAddress)
#define HH_SITE_COLUMN_(name) HH_SITE_##name,
/* A site's column: HH_SITE_stack, ... (the names TypeScript gets: SiteColumns in replay.ts). */
enum hh_site_column { HH_SITE_COLUMNS(HH_SITE_COLUMN_) HH_SITE_FIELDS };
size_t hh_scan_site_count(const hh_scan *s);
void hh_scan_get_sites(hh_scan *s, double *out);

/* The live blocks, 4 doubles each: address, weight, site index, the allocating function. */
#define HH_LIVE_COLUMNS(X) X(address) X(weight) X(site) X(op)
#define HH_LIVE_COLUMN_(name) HH_LIVE_##name,
/* A live block's column: HH_LIVE_address, ... (LiveColumns in replay.ts). */
enum hh_live_column { HH_LIVE_COLUMNS(HH_LIVE_COLUMN_) HH_LIVE_FIELDS };
size_t hh_scan_live_count(const hh_scan *s);
void hh_scan_get_live(const hh_scan *s, double *out);

/*
 * No heap series and no thread series (`report --json` shows neither): result() gives them
 * empty. Before the first event and without a timeline (returns 0, or -1).
 */
int hh_scan_skip_series(hh_scan *s);

/*
 * The timeline (the interactive report's time ranges): per site and time bucket, its
 * allocations, the bytes they allocated, the bytes of its blocks freed then, its temporary
 * allocations (counted when freed) and, of the blocks allocated then, the bytes still live at
 * the end and at the heap's peak, so a range's figures need no events. `buckets` (1 ... points)
 * buckets of points / buckets series buckets each, merged in pairs as the series' are; sparse (only
 * the buckets a site had calls in). Off unless started, before the first event (returns 0, or -1).
 * Memory: at most `buckets` cells (64 bytes) per site; out of memory, the timeline stops and
 * reports itself lost.
 */
#define HH_TIMELINE_MAX_BUCKETS 256 /* a live block keeps its bucket in a byte */
int hh_scan_start_timeline(hh_scan *s, uint32_t buckets);
typedef struct hh_scan_timeline_info {
    uint32_t buckets; /* 0: off or lost */
    double width;     /* ns per bucket */
    size_t cells;
} hh_scan_timeline_info;
/* false when the timeline was lost (out of memory). */
bool hh_scan_timeline(const hh_scan *s, hh_scan_timeline_info *out);
/* A cell's columns, X(name, value) by the names TypeScript gets them under (TIMELINE_COLUMNS in
 * src/decode/replay.ts), each value an expression of the site's index `i` and its cell `c`
 * (results.c): the site's index (hh_scan_get_sites' order), the bucket, the allocations in it,
 * their bytes, the bytes freed in it, its temporary allocations, and of the bytes allocated in
 * it those live at the end and at the peak. */
#define HH_TIMELINE_COLUMNS(X)     \
    X(site, (double)i)             \
    X(bucket, c->bucket)           \
    X(allocations, c->allocations) \
    X(bytes, c->bytes)             \
    X(freedBytes, c->freed)        \
    X(temporary, c->temporary)     \
    X(liveAtEnd, c->live)          \
    X(liveAtPeak, c->peak)
#define HH_TIMELINE_COLUMN_(name, value) HH_TIMELINE_##name,
enum hh_timeline_column { HH_TIMELINE_COLUMNS(HH_TIMELINE_COLUMN_) HH_TIMELINE_FIELDS };
/* HH_TIMELINE_FIELDS doubles per cell (HH_TIMELINE_<column> the index of each), by site then
 * bucket. Brings the peak figures up to date. */
void hh_scan_get_timeline(hh_scan *s, double *out);

/*
 * The allocation sequence (recommend): from the first event on, when started before it, every
 * event also becomes the operations a TLSF heap replays (TlsfHeap.replay of @heaphook/tlsf:
 * 4 doubles each, [code_alloc, slot, size, align], [code_free, slot, 0, 0] or [code_realloc,
 * slot, size, new slot]) on blocks named by slots, with each request as the core hands it to
 * the backend (valloc and pvalloc with 4096-byte pages); failed calls and frees of blocks the
 * log never saw allocated reach no heap. With `tally`, the peaks below are kept too.
 * Returns 0, or -1 when out of memory or after the first event.
 */
int hh_scan_start_sequence(hh_scan *s, bool tally, double code_alloc, double code_free,
                           double code_realloc);
/* The operations since the last clear, and the event number (1-based, in the log; realloc_done
 * not counted) of each; valid until the next run. */
size_t hh_scan_sequence(const hh_scan *s, const double **ops, const double **events);
void hh_scan_clear_sequence(hh_scan *s);

/* The sequence's figures, X(member, name) by the names TypeScript gets them under
 * (SEQUENCE_FIGURES in src/decode/replay.ts): the peak of the live requests' bytes and of their
 * TLSF footprints, the largest request and alignment, and the threads that had an event. */
#define HH_SCAN_SEQUENCE_FIGURES(X)    \
    X(peak_bytes, peakBytes)           \
    X(peak_footprint, peakFootprint)   \
    X(largest_request, largestRequest) \
    X(largest_align, largestAlign)     \
    X(threads, threads)
#define HH_SCAN_SEQUENCE_FIGURE_MEMBER_(member, name) double member;
typedef struct hh_scan_sequence_figures {
    HH_SCAN_SEQUENCE_FIGURES(HH_SCAN_SEQUENCE_FIGURE_MEMBER_)
} hh_scan_sequence_figures;
void hh_scan_get_sequence_figures(const hh_scan *s, hh_scan_sequence_figures *out);

/* The sequence's rules for one event of function `op` (enum hh_op): the request the backend
 * gets (bytes and alignment, 1 = default), and the least bytes a block of `size` takes in a
 * TLSF pool (head and 16-byte rounding included). */
void hh_scan_request_of(int op, double size, double count, double align, double *request_bytes,
                        double *request_alignment);
double hh_scan_footprint_of(double size);

#endif
