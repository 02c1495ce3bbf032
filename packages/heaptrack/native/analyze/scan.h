/*
 * scan.h — the report's pass over a heaplog, in C: decodes the events of a block (FORMAT.md,
 * "Records" and "Addresses") and replays them into the report's aggregates (src/report/model.ts
 * describes each figure), with no object per event. The TypeScript side reads the file, checks
 * and decompresses the blocks, decodes the declarations (PROCESS, THREAD, NODE, ...) and hands
 * each block's payload here (scan_addon.c, src/report/native.ts).
 *
 * It is the same computation as src/decode/engine.ts followed by ReportBuilder.apply in
 * src/report/model.ts, figure for figure (a test compares the two on real logs); those stay the
 * reference and the fallback when the addon is missing. Numbers the report shows (bytes,
 * weights, sums) are kept as doubles, as in JavaScript, so both give the same results.
 *
 * Memory: bounded by the live blocks, the distinct stacks and the threads, never by events.
 */
#ifndef HH_SCAN_H
#define HH_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "format/heaplog.h" /* the streams (enum hh_stream) and operations (enum hh_op) */

typedef struct hh_scan hh_scan;

/* hh_scan_run's results. */
enum {
    HH_SCAN_BLOCK_END = 0, /* the tag stream is consumed */
    HH_SCAN_RECORD =
        1,             /* the next record is not an event: the caller decodes it, then runs again */
    HH_SCAN_ERROR = 2, /* the block is damaged here: hh_scan_error() says how */
    HH_SCAN_NO_MEMORY = 3,
};

#define HH_SIZE_BUCKETS 65 /* bucket 0: size 0; bucket k: [2^(k-1), 2^k) */
#define HH_LATENCY_SUB 16  /* sub-buckets per power of two */
#define HH_LATENCY_BUCKETS (16 * 48)

/* A new scanner; the heap series has `points` buckets (even, >= 2) of `width_ns` to begin with. */
hh_scan *hh_scan_new(uint32_t points, double width_ns);
void hh_scan_free(hh_scan *s);

/* From the PROCESS record: the log's flags and ns per time tick. */
void hh_scan_set_flags(hh_scan *s, uint32_t flags, double unit_ns);
/* From a THREAD record: thread index -> tid. Returns 0, or -1 when out of memory or range. */
int hh_scan_set_thread(hh_scan *s, uint64_t index, double tid);
/* Before the first record of every block: the delta state restarts. */
void hh_scan_start_block(hh_scan *s);

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

/* The live block at `ptr` (for LEAK records): 1 with its weight and stack, or 0. */
int hh_scan_live_block(const hh_scan *s, double ptr, double *weight, double *stack);

/* The aggregates, read when the log is done. */
typedef struct hh_scan_totals {
    double calls[HH_OP_COUNT];
    double events; /* realloc_done not counted */
    double allocated_bytes, live_bytes, peak_bytes, peak_time;
    double peak_blocks, peak_blocks_time, last_time; /* live blocks: hh_scan_live_count */
    double temporary, unknown_frees, failed_calls;
    double size_counts[HH_SIZE_BUCKETS], size_bytes[HH_SIZE_BUCKETS];
} hh_scan_totals;
void hh_scan_get_totals(const hh_scan *s, hh_scan_totals *out);

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

/* Sites in first-seen order, their peak figures brought up to date; 7 doubles each:
 * stack, allocations, bytes, live blocks, live bytes, peak bytes, temporary. */
#define HH_SITE_FIELDS 7
size_t hh_scan_site_count(const hh_scan *s);
void hh_scan_get_sites(hh_scan *s, double *out);

/* The live blocks, 3 doubles each: address, weight, site index. */
#define HH_LIVE_FIELDS 3
size_t hh_scan_live_count(const hh_scan *s);
void hh_scan_get_live(const hh_scan *s, double *out);

#endif
