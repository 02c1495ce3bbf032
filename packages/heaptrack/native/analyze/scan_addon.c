/*
 * scan_addon.c — heaplog_addon.node: the report's pass over a heaplog in C (scan.h) for
 * src/report/native.ts. One class:
 *
 *   new Scanner(points, widthNs)
 *   setFlags(flags, unitNs); setThread(index, tid); startBlock()
 *   run(payload, pos)   -> 0 block done | 1 a declaration is next | 2 damaged | 3 out of memory
 *                          pos: Float64Array(12), the six streams' positions then their ends
 *                          (offsets into payload); the positions are updated
 *   error() -> string; blockEvents() -> number; events() -> number
 *   liveBlock(ptr) -> [weight, stack] | null
 *   result() -> { totals, latency, series, sites, live }   (src/report/native.ts unpacks it)
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

#define TOTALS_SCALARS 11
#define TOTALS_FIELDS (HH_OP_COUNT + TOTALS_SCALARS + 2 * HH_SIZE_BUCKETS)

static void finalize(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    hh_scan_free(data);
}

/* The scanner behind `this`, and up to `max` arguments (missing ones undefined). */
static hh_scan *unwrap(napi_env env, napi_callback_info info, size_t max, napi_value *argv) {
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

static double number(napi_env env, napi_value v) {
    double d = 0;
    napi_get_value_double(env, v, &d);
    return d;
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
    if (napi_wrap(env, self, s, finalize, NULL, NULL) != napi_ok) {
        hh_scan_free(s);
        napi_throw_error(env, NULL, "heaplog addon: napi_wrap failed");
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
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s != NULL) hh_scan_start_block(s);
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

static napi_value live_block(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    hh_scan *s = unwrap(env, info, 1, argv);
    if (s == NULL) return NULL;
    double weight, stack;
    napi_value out;
    if (!hh_scan_live_block(s, number(env, argv[0]), &weight, &stack)) {
        CHECK(napi_get_null(env, &out));
        return out;
    }
    CHECK(napi_create_array_with_length(env, 2, &out));
    CHECK(napi_set_element(env, out, 0, js_number(env, weight)));
    CHECK(napi_set_element(env, out, 1, js_number(env, stack)));
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

static napi_value set(napi_env env, napi_value object, const char *name, napi_value value) {
    if (value == NULL) return NULL;
    CHECK(napi_set_named_property(env, object, name, value));
    return object;
}

static napi_value result(napi_env env, napi_callback_info info) {
    hh_scan *s = unwrap(env, info, 0, NULL);
    if (s == NULL) return NULL;
    napi_value out, latency, series, none;
    CHECK(napi_create_object(env, &out));
    CHECK(napi_get_null(env, &none));

    hh_scan_totals t;
    hh_scan_get_totals(s, &t);
    double totals[TOTALS_FIELDS], *o = totals;
    memcpy(o, t.calls, sizeof t.calls);
    o += HH_OP_COUNT;
    /* In the order src/report/native.ts reads them. */
    const double scalars[TOTALS_SCALARS] = {t.events,           t.allocated_bytes, t.live_bytes,
                                            t.peak_bytes,       t.peak_time,       t.peak_blocks,
                                            t.peak_blocks_time, t.last_time,       t.temporary,
                                            t.unknown_frees,    t.failed_calls};
    memcpy(o, scalars, sizeof scalars);
    o += TOTALS_SCALARS;
    memcpy(o, t.size_counts, sizeof t.size_counts);
    o += HH_SIZE_BUCKETS;
    memcpy(o, t.size_bytes, sizeof t.size_bytes);
    if (!set(env, out, "totals", typed_copy(env, napi_float64_array, totals, TOTALS_FIELDS, 8)))
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

    size_t sites = hh_scan_site_count(s), live = hh_scan_live_count(s);
    double *buf = malloc(((sites * HH_SITE_FIELDS) + (live * HH_LIVE_FIELDS) + 1) * sizeof(double));
    if (buf == NULL) {
        napi_throw_error(env, NULL, "heaplog addon: out of memory");
        return NULL;
    }
    hh_scan_get_sites(s, buf);
    napi_value v = typed_copy(env, napi_float64_array, buf, sites * HH_SITE_FIELDS, 8);
    if (v != NULL) {
        hh_scan_get_live(s, buf);
        napi_value w = typed_copy(env, napi_float64_array, buf, live * HH_LIVE_FIELDS, 8);
        free(buf);
        if (w == NULL || !set(env, out, "sites", v) || !set(env, out, "live", w)) return NULL;
        return out;
    }
    free(buf);
    return NULL;
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
    };
    napi_value cls;
    CHECK(napi_define_class(env, "Scanner", NAPI_AUTO_LENGTH, construct, NULL,
                            sizeof methods / sizeof methods[0], methods, &cls));
    CHECK(napi_set_named_property(env, exports, "Scanner", cls));
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
