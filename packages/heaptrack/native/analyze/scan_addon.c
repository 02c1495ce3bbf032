/*
 * scan_addon.c — heaplog_addon.node: the one replay of a heaplog, in C (scan.h), for
 * src/decode/replay.ts. One class:
 *
 *   new Scanner(points, widthNs)
 *   setBlockLimit(n); blockLimit() -> number
 *   startSequence(tally, allocCode, freeCode, reallocCode)   (before the first event)
 *   setFlags(flags, unitNs); setThread(index, tid); startBlock(streams)
 *   run(payload, pos)   -> 0 block done | 1 a declaration is next | 2 damaged | 3 out of memory
 *                          | 4 over the block limit
 *                          pos: Float64Array(12), the six streams' positions then their ends
 *                          (offsets into payload); the positions are updated
 *   error() -> string; blockEvents() -> number; events() -> number
 *   liveBlock(ptr) -> { weight, stack, bucketStartNs (its timeline bucket's start, when
 *                      there is a timeline) } | null
 *   sites() -> { stack, allocations, ... }: a Float64Array per column (HH_SITE_COLUMNS)
 *   liveBlocks() -> { address, weight, site, op }: a Float64Array per column (HH_LIVE_COLUMNS)
 *   takeSequence() -> { ops, events } (Float64Arrays; the sequence is cleared)
 *   sequenceFigures() -> { peakBytes, ... (HH_SCAN_SEQUENCE_FIGURES) }
 *   result() -> { totals: { calls, events, ... (HH_SCAN_TOTALS_SCALARS), sizeCounts, sizeBytes },
 *                 latency, series, threads, sites }   (ScannerResult in src/decode/replay.ts)
 *   startTimeline(buckets)   (before the first event)
 *   skipSeries()             (before the first event, without a timeline: no heap or
 *                            thread series; result() gives them empty)
 *   timeline() -> { buckets, width, cells: { site, bucket, ... }: a Float64Array per column
 *                 (HH_TIMELINE_COLUMNS) } | null (null: not started, or lost for want of memory)
 *   startEvents(replay)      (before the first event: run() also writes the events out; replay
 *                             false: decodes them only)
 *   eventColumns(capacity) -> { length: 0, op, split, time, tid, stack (HH_EVENT_COMMON_COLUMNS),
 *                 count, align, size, old, ptr, ... (format/fields.h's HH_EVENT_FIELDS) }: new
 *                 typed arrays (Uint8Array for op and split) that run() writes each block's
 *                 events into from index 0, until the next call
 *
 * and two functions of the allocation sequence's rules:
 *   requestOf(op, size, count, align) -> { size, align }; footprintOf(size) -> bytes
 */
#include <node_api.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/scan.h"

#define CHECK(call)                                                         \
    do {                                                                    \
        if ((call) != napi_ok) {                                            \
            napi_throw_error(env, NULL, "heaplog addon: " #call " failed"); \
            return NULL;                                                    \
        }                                                                   \
    } while (0)

/* What a Scanner object wraps: the scanner, and the event columns it writes into (held, so
 * that their memory lives while the scanner may write it). */
typedef struct wrapped {
    hh_scan *s;
    napi_ref columns; /* NULL: none given */
} wrapped;

static void finalize(napi_env env, void *data, void *hint) {
    (void)hint;
    wrapped *w = data;
    if (w->columns != NULL) napi_delete_reference(env, w->columns);
    hh_scan_free(w->s);
    free(w);
}

/* The object behind `this`, and up to `max` arguments (missing ones undefined). */
static wrapped *unwrap_object(napi_env env, napi_callback_info info, size_t max, napi_value *argv) {
    napi_value self;
    size_t argc = max;
    void *data = NULL;
    if (napi_get_cb_info(env, info, &argc, argv, &self, NULL) != napi_ok ||
        napi_unwrap(env, self, &data) != napi_ok || data == NULL) {
        napi_throw_error(env, NULL, "heaplog addon: not a Scanner");
        return NULL;
    }
    return data;
}

/* The scanner behind `this`, and up to `max` arguments (missing ones undefined). */
static hh_scan *unwrap(napi_env env, napi_callback_info info, size_t max, napi_value *argv) {
    wrapped *w = unwrap_object(env, info, max, argv);
    return w == NULL ? NULL : w->s;
}

static double number(napi_env env, napi_value v) {
    double d = 0;
    napi_get_value_double(env, v, &d);
    return d;
}

static bool boolean(napi_env env, napi_value v) {
    bool b = false;
    napi_get_value_bool(env, v, &b);
    return b;
}

static napi_value js_number(napi_env env, double d) {
    napi_value v;
    CHECK(napi_create_double(env, d, &v));
    return v;
}

static napi_value construct(napi_env env, napi_callback_info info) {
    napi_value argv[2], self;
    size_t argc = 2;
    CHECK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
    if (argc < 2) {
        napi_throw_type_error(env, NULL, "Scanner(points, widthNs)");
        return NULL;
    }
    hh_scan *s = hh_scan_new((uint32_t)number(env, argv[0]), number(env, argv[1]));
    if (s == NULL) {
        napi_throw_range_error(env, NULL,
                               "Scanner: points must be an even number >= 2 (or out of memory)");
        return NULL;
    }
    wrapped *w = calloc(1, sizeof *w);
    if (w == NULL || (w->s = s, napi_wrap(env, self, w, finalize, NULL, NULL) != napi_ok)) {
        free(w);
        hh_scan_free(s);
        napi_throw_error(env, NULL, "heaplog addon: napi_wrap failed (or out of memory)");
        return NULL;
    }
    return self;
}

static napi_value set_flags(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    hh_scan *s = unwrap(env, info, 2, argv);
    if (s == NULL) return NULL;
    hh_scan_set_flags(s, (uint32_t)number(env, argv[0]), number(env, argv[1]));
    return NULL;
}

static napi_value set_thread(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    hh_scan *s = unwrap(env, info, 2, argv);
    if (s == NULL) return NULL;
    if (hh_scan_set_thread(s, (uint64_t)number(env, argv[0]), number(env, argv[1])) != 0) {
        napi_throw_range_error(env, NULL, "thread index out of range (or out of memory)");
        return NULL;
    }
    return NULL;
}

static napi_value start_block(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    hh_scan *s = unwrap(env, info, 1, argv);
    if (s == NULL) return NULL;
    double streams = number(env, argv[0]);
    if (streams != HH_STREAM_COUNT && streams != HH_STREAM_COUNT_SHARED_ADDR) {
        napi_throw_range_error(env, NULL, "a block has 6 or 10 streams");
        return NULL;
    }
    hh_scan_start_block(s, (unsigned)streams);
    return NULL;
}

static napi_value run(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    hh_scan *s = unwrap(env, info, 2, argv);
    if (s == NULL) return NULL;
    void *data, *posData;
    size_t length, posLength;
    napi_typedarray_type type;
    napi_value ab;
    size_t offset;
    if (napi_get_typedarray_info(env, argv[0], &type, &length, &data, &ab, &offset) != napi_ok ||
        type != napi_uint8_array ||
        napi_get_typedarray_info(env, argv[1], &type, &posLength, &posData, &ab, &offset) !=
            napi_ok ||
        type != napi_float64_array || posLength != 2 * HH_STREAM_COUNT) {
        napi_throw_type_error(env, NULL, "run(payload: Uint8Array, pos: Float64Array(12))");
        return NULL;
    }
    double *p = posData;
    size_t pos[HH_STREAM_COUNT], end[HH_STREAM_COUNT];
    for (int i = 0; i < HH_STREAM_COUNT; i++) {
        pos[i] = (size_t)p[i];
        end[i] = (size_t)p[HH_STREAM_COUNT + i];
        if (pos[i] > end[i] || end[i] > length) {
            napi_throw_range_error(env, NULL, "run: stream bounds outside the payload");
            return NULL;
        }
    }
    int status = hh_scan_run(s, data, pos, end);
    for (int i = 0; i < HH_STREAM_COUNT; i++) p[i] = (double)pos[i];
    return js_number(env, status);
}

static napi_value error(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s == NULL) return NULL;
    napi_value v;
    CHECK(napi_create_string_utf8(env, hh_scan_error(s), NAPI_AUTO_LENGTH, &v));
    return v;
}

static napi_value block_events(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    return s == NULL ? NULL : js_number(env, (double)hh_scan_block_events(s));
}

static napi_value events(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    return s == NULL ? NULL : js_number(env, (double)hh_scan_events(s));
}

static napi_value set(napi_env env, napi_value object, const char *name, napi_value value) {
    if (value == NULL) return NULL;
    CHECK(napi_set_named_property(env, object, name, value));
    return object;
}

static napi_value live_block(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    hh_scan *s = unwrap(env, info, 1, argv);
    if (s == NULL) return NULL;
    double weight, stack, bucket_start;
    napi_value out;
    if (!hh_scan_live_block(s, number(env, argv[0]), &weight, &stack, &bucket_start)) {
        CHECK(napi_get_null(env, &out));
        return out;
    }
    CHECK(napi_create_object(env, &out));
    if (!set(env, out, "weight", js_number(env, weight)) ||
        !set(env, out, "stack", js_number(env, stack)) ||
        (bucket_start >= 0 && !set(env, out, "bucketStartNs", js_number(env, bucket_start))))
        return NULL;
    return out;
}

/* A new typed array holding a copy of n elements of `size` bytes. */
static napi_value typed_copy(napi_env env, napi_typedarray_type type, const void *src, size_t n,
                             size_t size) {
    void *data;
    napi_value ab, array;
    CHECK(napi_create_arraybuffer(env, n * size, &data, &ab));
    if (n > 0) memcpy(data, src, n * size);
    CHECK(napi_create_typedarray(env, type, n, ab, 0, &array));
    return array;
}

static void fill_live(hh_scan *s, double *out) {
    hh_scan_get_live(s, out);
}

/* Rows of `fields` doubles (rows * fields, written by fill) as an object of one Float64Array per
 * column, each under its name: TypeScript reads columns by name, never by position. */
static napi_value named_columns(napi_env env, hh_scan *s, size_t rows, size_t fields,
                                const char *const *names, void (*fill)(hh_scan *, double *)) {
    double *all = malloc((rows * fields + 1) * sizeof *all);
    if (all == NULL) {
        napi_throw_error(env, NULL, "heaplog addon: out of memory");
        return NULL;
    }
    fill(s, all);
    napi_value out = NULL;
    if (napi_create_object(env, &out) != napi_ok) out = NULL;
    for (size_t f = 0; out != NULL && f < fields; f++) {
        void *data;
        napi_value ab, column;
        if (napi_create_arraybuffer(env, rows * sizeof(double), &data, &ab) != napi_ok ||
            napi_create_typedarray(env, napi_float64_array, rows, ab, 0, &column) != napi_ok) {
            out = NULL;
            break;
        }
        double *c = data;
        for (size_t r = 0; r < rows; r++) c[r] = all[r * fields + f];
        out = set(env, out, names[f], column);
    }
    free(all);
    return out;
}

#define COLUMN_NAME_(name) #name,
static const char *const site_columns[HH_SITE_FIELDS] = {HH_SITE_COLUMNS(COLUMN_NAME_)};
static const char *const live_columns[HH_LIVE_FIELDS] = {HH_LIVE_COLUMNS(COLUMN_NAME_)};

/* The sites (hh_scan_get_sites) by named columns. */
static napi_value sites_array(napi_env env, hh_scan *s) {
    return named_columns(env, s, hh_scan_site_count(s), HH_SITE_FIELDS, site_columns,
                         hh_scan_get_sites);
}

static napi_value result(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s == NULL) return NULL;
    napi_value out, latency, series, none;
    CHECK(napi_create_object(env, &out));
    CHECK(napi_get_null(env, &none));

    hh_scan_totals t;
    hh_scan_get_totals(s, &t);
    napi_value totals;
    CHECK(napi_create_object(env, &totals));
    if (!set(env, totals, "calls", typed_copy(env, napi_float64_array, t.calls, HH_OP_COUNT, 8)))
        return NULL;
#define SET_SCALAR(member, name) \
    if (!set(env, totals, #name, js_number(env, t.member))) return NULL;
    HH_SCAN_TOTALS_SCALARS(SET_SCALAR)
#undef SET_SCALAR
    if (!set(env, totals, "sizeCounts",
             typed_copy(env, napi_float64_array, t.size_counts, HH_SIZE_BUCKETS, 8)) ||
        !set(env, totals, "sizeBytes",
             typed_copy(env, napi_float64_array, t.size_bytes, HH_SIZE_BUCKETS, 8)) ||
        !set(env, out, "totals", totals))
        return NULL;

    CHECK(napi_create_array_with_length(env, HH_OP_COUNT, &latency));
    for (int op = 0; op < HH_OP_COUNT; op++) {
        hh_scan_latency l;
        hh_scan_get_latency(s, op, &l);
        napi_value h = none;
        if (l.counts != NULL) {
            CHECK(napi_create_object(env, &h));
            if (!set(env, h, "counts",
                     typed_copy(env, napi_float64_array, l.counts, HH_LATENCY_BUCKETS, 8)) ||
                !set(env, h, "count", js_number(env, l.count)) ||
                !set(env, h, "max", js_number(env, l.max)) ||
                !set(env, h, "sum", js_number(env, l.sum)))
                return NULL;
        }
        CHECK(napi_set_element(env, latency, (uint32_t)op, h));
    }
    if (!set(env, out, "latency", latency)) return NULL;

    hh_scan_series sr;
    hh_scan_get_series(s, &sr);
    CHECK(napi_create_object(env, &series));
    if (!set(env, series, "width", js_number(env, sr.width)) ||
        !set(env, series, "present", typed_copy(env, napi_uint8_array, sr.present, sr.points, 1)) ||
        !set(env, series, "min", typed_copy(env, napi_float64_array, sr.min, sr.points, 8)) ||
        !set(env, series, "max", typed_copy(env, napi_float64_array, sr.max, sr.points, 8)) ||
        !set(env, series, "last", typed_copy(env, napi_float64_array, sr.last, sr.points, 8)) ||
        !set(env, out, "series", series))
        return NULL;

    napi_value threads;
    size_t thread_count = hh_scan_thread_series_count(s);
    CHECK(napi_create_array_with_length(env, thread_count, &threads));
    for (size_t i = 0; i < thread_count; i++) {
        hh_scan_thread_series ts;
        hh_scan_get_thread_series(s, i, &ts);
        napi_value t;
        CHECK(napi_create_object(env, &t));
        if (!set(env, t, "tid", js_number(env, ts.tid)) ||
            !set(env, t, "allocations", js_number(env, ts.allocations)) ||
            !set(env, t, "bytes", js_number(env, ts.bytes)) ||
            !set(env, t, "counts", typed_copy(env, napi_float64_array, ts.counts, sr.points, 8)) ||
            !set(env, t, "sums", typed_copy(env, napi_float64_array, ts.sums, sr.points, 8)))
            return NULL;
        CHECK(napi_set_element(env, threads, (uint32_t)i, t));
    }
    if (!set(env, out, "threads", threads)) return NULL;

    napi_value sites = sites_array(env, s);
    if (sites == NULL || !set(env, out, "sites", sites)) return NULL;
    return out;
}

static napi_value start_timeline(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    hh_scan *s = unwrap(env, info, 1, argv);
    if (s == NULL) return NULL;
    double n = number(env, argv[0]);
    if (!(n >= 1 && n <= HH_TIMELINE_MAX_BUCKETS) || hh_scan_start_timeline(s, (uint32_t)n) != 0) {
        napi_throw_range_error(
            env, NULL,
            "startTimeline(buckets): buckets must be 1 ... 256 and the series' points, "
            "and the timeline started before the first event");
        return NULL;
    }
    return NULL;
}

static napi_value skip_series(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s == NULL) return NULL;
    if (hh_scan_skip_series(s) != 0) {
        napi_throw_error(env, NULL, "skipSeries(): before the first event and without a timeline");
        return NULL;
    }
    return NULL;
}

static void fill_timeline(hh_scan *s, double *out) {
    hh_scan_get_timeline(s, out);
}

#define TIMELINE_COLUMN_NAME_(name, value) #name,
static const char *const timeline_columns[HH_TIMELINE_FIELDS] = {
    HH_TIMELINE_COLUMNS(TIMELINE_COLUMN_NAME_)};

static napi_value timeline(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s == NULL) return NULL;
    hh_scan_timeline_info t;
    napi_value out;
    if (!hh_scan_timeline(s, &t) || t.buckets == 0) {
        CHECK(napi_get_null(env, &out));
        return out;
    }
    CHECK(napi_create_object(env, &out));
    if (!set(env, out, "buckets", js_number(env, t.buckets)) ||
        !set(env, out, "width", js_number(env, t.width)) ||
        !set(env, out, "cells",
             named_columns(env, s, t.cells, HH_TIMELINE_FIELDS, timeline_columns, fill_timeline)))
        return NULL;
    return out;
}

static napi_value sites(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    return s == NULL ? NULL : sites_array(env, s);
}

static napi_value live_blocks(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    return s == NULL ? NULL
                     : named_columns(env, s, hh_scan_live_count(s), HH_LIVE_FIELDS, live_columns,
                                     fill_live);
}

static napi_value set_block_limit(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    hh_scan *s = unwrap(env, info, 1, argv);
    if (s == NULL) return NULL;
    double n = number(env, argv[0]);
    if (!(n >= 1)) {
        napi_throw_range_error(env, NULL, "setBlockLimit(n): n must be at least 1");
        return NULL;
    }
    hh_scan_set_block_limit(s, n < 4294967295.0 ? (uint32_t)n : UINT32_MAX);
    return NULL;
}

static napi_value block_limit(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    return s == NULL ? NULL : js_number(env, hh_scan_block_limit(s));
}

static napi_value start_sequence(napi_env env, napi_callback_info info) {
    napi_value argv[4];
    hh_scan *s = unwrap(env, info, 4, argv);
    if (s == NULL) return NULL;
    if (hh_scan_start_sequence(s, boolean(env, argv[0]), number(env, argv[1]), number(env, argv[2]),
                               number(env, argv[3])) != 0) {
        napi_throw_error(env, NULL,
                         "startSequence: call it once, before the first event (or out of memory)");
        return NULL;
    }
    return NULL;
}

static napi_value take_sequence(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s == NULL) return NULL;
    const double *ops, *events;
    size_t n = hh_scan_sequence(s, &ops, &events);
    napi_value out;
    CHECK(napi_create_object(env, &out));
    if (!set(env, out, "ops", typed_copy(env, napi_float64_array, ops, 4 * n, 8)) ||
        !set(env, out, "events", typed_copy(env, napi_float64_array, events, n, 8)))
        return NULL;
    hh_scan_clear_sequence(s);
    return out;
}

static napi_value sequence_figures(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s == NULL) return NULL;
    hh_scan_sequence_figures f;
    hh_scan_get_sequence_figures(s, &f);
    napi_value out;
    CHECK(napi_create_object(env, &out));
#define SET_FIGURE(member, name) \
    if (!set(env, out, #name, js_number(env, f.member))) return NULL;
    HH_SCAN_SEQUENCE_FIGURES(SET_FIGURE)
#undef SET_FIGURE
    return out;
}

static napi_value start_events(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    hh_scan *s = unwrap(env, info, 1, argv);
    if (s != NULL && hh_scan_start_events(s, boolean(env, argv[0])) != 0)
        napi_throw_error(env, NULL, "startEvents: call it before the first event");
    return NULL;
}

/* A new column of n elements of `size` bytes under `name` in `object`: its memory, or NULL (an
 * exception pending). */
static void *new_column(napi_env env, napi_value object, const char *name,
                        napi_typedarray_type type, size_t n, size_t size) {
    void *data;
    napi_value ab, column;
    if (napi_create_arraybuffer(env, n * size, &data, &ab) != napi_ok ||
        napi_create_typedarray(env, type, n, ab, 0, &column) != napi_ok ||
        napi_set_named_property(env, object, name, column) != napi_ok) {
        napi_throw_error(env, NULL, "heaplog addon: cannot make an event column");
        return NULL;
    }
    return data;
}

#define COLUMN_TYPE_uint8_t napi_uint8_array
#define COLUMN_TYPE_double napi_float64_array

/* eventColumns(capacity): new columns the scanner writes the next events into (scan.h,
 * hh_event_columns), each under its name, and `length` 0 (the caller's count of them). */
static napi_value event_columns(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    wrapped *w = unwrap_object(env, info, 1, argv);
    if (w == NULL) return NULL;
    double n = number(env, argv[0]);
    if (!(n >= 1 && n <= HH_MAX_BLOCK_PAYLOAD)) {
        napi_throw_range_error(env, NULL, "eventColumns(capacity): 1 to a block's bytes");
        return NULL;
    }
    hh_event_columns c = {.capacity = (size_t)n};
    napi_value out;
    CHECK(napi_create_object(env, &out));
    if (!set(env, out, "length", js_number(env, 0))) return NULL;
#define MAKE_COMMON(name, type)                                                                 \
    if ((c.name = new_column(env, out, #name, COLUMN_TYPE_##type, c.capacity, sizeof(type))) == \
        NULL)                                                                                   \
        return NULL;
    HH_EVENT_COMMON_COLUMNS(MAKE_COMMON)
#undef MAKE_COMMON
#define MAKE_FIELD(name, coding, ops, flag)                                                       \
    if ((c.name = new_column(env, out, #name, napi_float64_array, c.capacity, sizeof(double))) == \
        NULL)                                                                                     \
        return NULL;
    HH_EVENT_FIELDS(MAKE_FIELD)
#undef MAKE_FIELD
    napi_ref held;
    CHECK(napi_create_reference(env, out, 1, &held));
    if (w->columns != NULL) napi_delete_reference(env, w->columns);
    w->columns = held;
    hh_scan_set_event_columns(w->s, &c);
    return out;
}

static napi_value request_of(napi_env env, napi_callback_info info) {
    napi_value argv[4];
    size_t argc = 4;
    CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc < 4) {
        napi_throw_type_error(env, NULL, "requestOf(op, size, count, align)");
        return NULL;
    }
    double bytes, align;
    hh_scan_request_of((int)number(env, argv[0]), number(env, argv[1]), number(env, argv[2]),
                       number(env, argv[3]), &bytes, &align);
    napi_value out;
    CHECK(napi_create_object(env, &out));
    if (!set(env, out, "size", js_number(env, bytes)) ||
        !set(env, out, "align", js_number(env, align)))
        return NULL;
    return out;
}

static napi_value footprint_of(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    size_t argc = 1;
    CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    return js_number(env, hh_scan_footprint_of(argc < 1 ? 0 : number(env, argv[0])));
}

static napi_value init(napi_env env, napi_value exports) {
    napi_property_descriptor methods[] = {
        {"setFlags", NULL, set_flags, NULL, NULL, NULL, napi_default, NULL},
        {"setThread", NULL, set_thread, NULL, NULL, NULL, napi_default, NULL},
        {"startBlock", NULL, start_block, NULL, NULL, NULL, napi_default, NULL},
        {"run", NULL, run, NULL, NULL, NULL, napi_default, NULL},
        {"error", NULL, error, NULL, NULL, NULL, napi_default, NULL},
        {"blockEvents", NULL, block_events, NULL, NULL, NULL, napi_default, NULL},
        {"events", NULL, events, NULL, NULL, NULL, napi_default, NULL},
        {"liveBlock", NULL, live_block, NULL, NULL, NULL, napi_default, NULL},
        {"result", NULL, result, NULL, NULL, NULL, napi_default, NULL},
        {"sites", NULL, sites, NULL, NULL, NULL, napi_default, NULL},
        {"startTimeline", NULL, start_timeline, NULL, NULL, NULL, napi_default, NULL},
        {"skipSeries", NULL, skip_series, NULL, NULL, NULL, napi_default, NULL},
        {"timeline", NULL, timeline, NULL, NULL, NULL, napi_default, NULL},
        {"liveBlocks", NULL, live_blocks, NULL, NULL, NULL, napi_default, NULL},
        {"setBlockLimit", NULL, set_block_limit, NULL, NULL, NULL, napi_default, NULL},
        {"blockLimit", NULL, block_limit, NULL, NULL, NULL, napi_default, NULL},
        {"startSequence", NULL, start_sequence, NULL, NULL, NULL, napi_default, NULL},
        {"takeSequence", NULL, take_sequence, NULL, NULL, NULL, napi_default, NULL},
        {"sequenceFigures", NULL, sequence_figures, NULL, NULL, NULL, napi_default, NULL},
        {"startEvents", NULL, start_events, NULL, NULL, NULL, napi_default, NULL},
        {"eventColumns", NULL, event_columns, NULL, NULL, NULL, napi_default, NULL},
    };
    napi_value cls;
    CHECK(napi_define_class(env, "Scanner", NAPI_AUTO_LENGTH, construct, NULL,
                            sizeof methods / sizeof methods[0], methods, &cls));
    CHECK(napi_set_named_property(env, exports, "Scanner", cls));
    napi_value fn;
    CHECK(napi_create_function(env, "requestOf", NAPI_AUTO_LENGTH, request_of, NULL, &fn));
    CHECK(napi_set_named_property(env, exports, "requestOf", fn));
    CHECK(napi_create_function(env, "footprintOf", NAPI_AUTO_LENGTH, footprint_of, NULL, &fn));
    CHECK(napi_set_named_property(env, exports, "footprintOf", fn));
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
