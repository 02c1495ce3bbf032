/*
 * decode.c — the block loop: the varints of the streams, the lookahead that prefetches frees,
 * the fields of an event as format/fields.h declares them, and hh_scan_run, which decodes each
 * event and replays it (aggregates.h) and, for recommend, adds it to the sequence (sequence.c).
 */
#include <math.h>
#include <stdio.h>

#include "analyze/aggregates.h"
#include "format/fields.h"

/* ---- The block loop ------------------------------------------------------------------ */

/*
 * Varints, read as the TypeScript decoder reads them (FORMAT.md: at most 10 bytes): each returns
 * NULL, or the error's text. varint_exact is for the time, stack and addr streams, whose values
 * stay below 2^53; varint_num for the num stream (sizes, counts, durations, weights), whose value
 * is the double the TypeScript decoder computes, byte by byte, so both agree on any input (a
 * failed malloc(SIZE_MAX) logs a size above 2^53).
 */
/* The common case of both: a varint of up to 3 bytes (a value below 2^21, in range for every
 * stream and exact in a double however it is summed), read when 3 bytes are left, or of 1 byte
 * at the stream's end. False: the caller reads it the long way. */
static inline bool varint_short(const uint8_t *b, size_t *p, size_t end, uint64_t *v) {
    size_t i = *p;
    if (HH_SCAN_LIKELY(i + 2 < end)) {
        uint64_t b0 = b[i];
        if (b0 < 0x80) {
            *v = b0;
            *p = i + 1;
            return true;
        }
        uint64_t b1 = b[i + 1];
        if (b1 < 0x80) {
            *v = (b0 & 0x7f) | b1 << 7;
            *p = i + 2;
            return true;
        }
        uint64_t b2 = b[i + 2];
        if (b2 < 0x80) {
            *v = (b0 & 0x7f) | (b1 & 0x7f) << 7 | b2 << 14;
            *p = i + 3;
            return true;
        }
        return false;
    }
    if (i < end && b[i] < 0x80) {
        *v = b[i];
        *p = i + 1;
        return true;
    }
    return false;
}

static inline const char *varint_exact(const uint8_t *b, size_t *p, size_t end, uint64_t *v) {
    if (varint_short(b, p, end, v)) return NULL;
    size_t i = *p;
    uint64_t result = 0;
    bool overflow = false; /* bits past the 64th: far out of range */
    for (unsigned shift = 0; shift < 7 * HH_MAX_VARINT_BYTES; shift += 7) {
        if (i >= end) return "record runs past the end of its block";
        uint8_t byte = b[i++];
        uint64_t x = byte & 0x7f;
        if (shift >= 64)
            overflow = overflow || x != 0;
        else {
            if (shift > 0 && (x >> (64 - shift)) != 0) overflow = true;
            result |= x << shift;
        }
        if (byte < 0x80) {
            if (overflow || result > (uint64_t)MAX_EXACT_INT) return "value out of range";
            *v = result;
            *p = i;
            return NULL;
        }
    }
    return "varint longer than 10 bytes";
}

static inline const char *varint_num(const uint8_t *b, size_t *p, size_t end, double *v) {
    uint64_t small;
    if (varint_short(b, p, end, &small)) {
        *v = (double)small;
        return NULL;
    }
    size_t i = *p;
    double result = 0, mul = 1;
    for (int k = 0; k < HH_MAX_VARINT_BYTES; k++) {
        if (i >= end) return "record runs past the end of its block";
        uint8_t x = b[i++];
        double term = (double)(x & 0x7f) * mul; /* two roundings, as in JavaScript (no FMA) */
        result += term;
        if (x < 0x80) {
            *v = result;
            *p = i;
            return NULL;
        }
        mul *= 128;
    }
    return "varint longer than 10 bytes";
}

/*
 * A varint of a split stream (num, addr, old in a block of ten streams: heaplog.h): its first
 * byte at *p, the bytes after it at *pm, in the stream of those (they are the varint of the
 * value >> 7). exact: varint_exact's range check; else varint_num's double.
 */
static inline const char *varint_split_exact(const uint8_t *b, size_t *p, size_t end, size_t *pm,
                                             size_t endm, uint64_t *v) {
    size_t i = *p;
    if (i >= end) return "record runs past the end of its block";
    uint64_t first = b[i], rest;
    if (first < 0x80) {
        *v = first;
        *p = i + 1;
        return NULL;
    }
    const char *why = varint_exact(b, pm, endm, &rest);
    if (why != NULL) return why;
    if (rest == 0) return "over-long varint";
    if (rest > (uint64_t)MAX_EXACT_INT >> 7) return "value out of range";
    *v = (first & 0x7f) | rest << 7;
    *p = i + 1;
    return NULL;
}

static inline const char *varint_split_num(const uint8_t *b, size_t *p, size_t end, size_t *pm,
                                           size_t endm, double *v) {
    size_t i = *p;
    if (i >= end) return "record runs past the end of its block";
    uint8_t first = b[i];
    if (first < 0x80) {
        *v = first;
        *p = i + 1;
        return NULL;
    }
    double rest;
    const char *why = varint_num(b, pm, endm, &rest);
    if (why != NULL) return why;
    if (rest == 0) return "over-long varint";
    *v = (double)(first & 0x7f) + rest * 128;
    *p = i + 1;
    return NULL;
}

/* A varint reader's call: on an error, its text becomes the scan's error. */
#define READ_CHECKED(call)                                   \
    do {                                                     \
        const char *why_ = (call);                           \
        if (why_ != NULL) {                                  \
            snprintf(s->error, sizeof s->error, "%s", why_); \
            return HH_SCAN_ERROR;                            \
        }                                                    \
    } while (0)
#define READ_WITH(fn, stream, var) READ_CHECKED(fn(buf, &pos[stream], end[stream], &(var)))
#define READ(stream, var) READ_WITH(varint_exact, stream, var)
#define READ_SPLIT_WITH(fn, stream, more, var) \
    READ_CHECKED(fn(buf, &pos[stream], end[stream], &pos[more], end[more], &(var)))
/* A field of a split stream: in a block of ten streams from stream and more, in a block of six
 * whole from six_stream (s->split). */
#define READ_FIELD(split_fn, whole_fn, stream, more, six_stream, var) \
    do {                                                              \
        if (s->split)                                                 \
            READ_SPLIT_WITH(split_fn, stream, more, var);             \
        else                                                          \
            READ_WITH(whole_fn, six_stream, var);                     \
    } while (0)
#define READ_NUM(var) \
    READ_FIELD(varint_split_num, varint_num, HH_STREAM_NUM, HH_STREAM_NUM_MORE, HH_STREAM_NUM, var)
#define READ_NEW(var)                                                                 \
    READ_FIELD(varint_split_exact, varint_exact, HH_STREAM_ADDR, HH_STREAM_ADDR_MORE, \
               HH_STREAM_ADDR, var)
#define READ_OLD(var)                                                               \
    READ_FIELD(varint_split_exact, varint_exact, HH_STREAM_OLD, HH_STREAM_OLD_MORE, \
               HH_STREAM_ADDR, var)

#define CHECK(ok)                            \
    do {                                     \
        if (!(ok)) return refused_status(s); \
    } while (0)
/* An HH_SCAN_* status from a reader of fields (-1: none). */
#define CHECK_READ(call)                  \
    do {                                  \
        int status_ = (call);             \
        if (status_ >= 0) return status_; \
    } while (0)

/* The status of a failed event: out of memory, over the block limit, or damage. */
static int refused_status(const hh_scan *s) {
    if (s->out_of_memory) return HH_SCAN_NO_MEMORY;
    return s->blocks.over_limit ? HH_SCAN_LIMIT : HH_SCAN_ERROR;
}

/*
 * Prefetching for frees. A free names its block by ordinal, and finding the block costs two
 * dependent reads at random (the ring entry, then the record): with tens of thousands of live
 * blocks both are mostly cache misses, the largest cost of the pass. The ordinals are known
 * long before: they depend only on the old stream. So a lookahead parses the tag and old
 * streams (in a block of six, the addr stream, new addresses included) up to LOOKAHEAD_FAR events
 * ahead and prefetches the ring entry of each free; by the time the events are LOOKAHEAD_NEAR ahead
 * the entry is cached, and its record is prefetched. It changes nothing but the cache: it stops at
 * anything unusual (a record that is not an event, damage), and the events' own decoding checks
 * everything as before.
 */
static inline void lookahead(hh_scan *s, const uint8_t *buf, const size_t end[HH_STREAM_COUNT]) {
    uint64_t n = s->la_events, goal = s->block_events + LOOKAHEAD_FAR;
    if (n + LOOKAHEAD_STRIDE <= goal && !s->la_stopped) {
        size_t t = s->la_tag, a = s->la_addr, m = s->la_more;
        int64_t prev = s->la_prev_ref;
        const bool split = s->split;
        const size_t tag_end = end[HH_STREAM_TAG],
                     addr_end = end[split ? HH_STREAM_OLD : HH_STREAM_ADDR],
                     more_end = end[HH_STREAM_OLD_MORE];
        do {
            uint8_t tag = t < tag_end ? buf[t] : 0;
            int op = tag & HH_EVT_OP_MASK;
            if ((tag & HH_TAG_EVENT) == 0 || op > HH_OP_REALLOC_DONE) {
                s->la_stopped = true;
                break;
            }
            uint64_t v = 0, ordinal = 0;
            if ((HH_OPS_ENDING >> op) & 1u) {
                if ((split ? varint_split_exact(buf, &a, addr_end, &m, more_end, &v)
                           : varint_exact(buf, &a, addr_end, &v)) != NULL) {
                    s->la_stopped = true;
                    break;
                }
                if ((v & 1) == 0) {
                    prev += 1 + unzigzag(v >> 1);
                    if (prev >= 1) {
                        ordinal = (uint64_t)prev;
                        __builtin_prefetch(&s->ring_rec[ordinal & ORDINAL_MASK]);
                    }
                }
            }
            if (!split && ((HH_OPS_BEGINNING >> op) & 1u) &&
                varint_exact(buf, &a, addr_end, &v) != NULL) {
                s->la_stopped = true;
                break;
            }
            t++;
            s->la_ordinal[n & (LOOKAHEAD - 1)] = ordinal;
            n++;
        } while (n < goal);
        s->la_tag = t;
        s->la_addr = a;
        s->la_more = m;
        s->la_prev_ref = prev;
        s->la_events = n;
    }
    uint64_t near = s->block_events + LOOKAHEAD_NEAR;
    if (near < n) {
        uint64_t ordinal = s->la_ordinal[near & (LOOKAHEAD - 1)];
        if (ordinal != 0 && ordinal + HH_ORDINAL_RING > s->ordinal && ordinal <= s->ordinal) {
            uint32_t r = s->ring_rec[ordinal & ORDINAL_MASK];
            if (r != 0 && r - 1 < s->blocks.rec_count) __builtin_prefetch(&s->blocks.recs[r - 1]);
        }
    }
}

/*
 * The fields of an event after its common part, in the order and under the conditions
 * format/fields.h declares, into *f; the addresses resolved and the blocks they end or begin
 * ended and begun (for the replay). A free's block (the OLD it ends) is its ptr, its old 0.
 * Returns an HH_SCAN_* status other than HH_SCAN_BLOCK_END on an error, else -1.
 */
static inline __attribute__((always_inline)) int decode_fields(hh_scan *s, int op,
                                                               const uint8_t *buf,
                                                               size_t pos[HH_STREAM_COUNT],
                                                               const size_t end[HH_STREAM_COUNT],
                                                               hh_field_decoded *f) {
#define FIELD_DEFAULT(name, coding, ops, flag) f->name = 0;
    HH_EVENT_FIELDS(FIELD_DEFAULT)
#undef FIELD_DEFAULT
    f->count = 1;
    f->duration = NAN;
    f->weight = NAN;
    uint64_t v;
    uint32_t old_rec = NO_REC;
    const bool aligned = ((HH_OPS_ALIGNED >> op) & 1u) != 0;
    const bool ends = ((HH_OPS_ENDING >> op) & 1u) != 0,
               begins = ((HH_OPS_BEGINNING >> op) & 1u) != 0;
#define GET_NUM(var) READ_NUM(var)
#define GET_ALIGN(var) READ_NUM(var)
    /* A block that ends and none begins (free): it ends here, before the fields after it. */
#define GET_OLD(var)                                             \
    do {                                                         \
        READ_OLD(v);                                             \
        CHECK(resolve_ref(s, v, &(var), &old_rec));              \
        if (!begins && (var) != 0) end_block(s, (var), old_rec); \
    } while (0)
    /* A failed call (new block 0 for bytes > 0) keeps the old block. */
#define GET_NEW(var)                                                                         \
    do {                                                                                     \
        double bytes_ = f->count * f->size;                                                  \
        READ_NEW(v);                                                                         \
        if (ends) {                                                                          \
            bool failed_ =                                                                   \
                bytes_ != 0 && (v & 1) && (int64_t)f->old + unzigzag((v - 1) >> 1) == 0;     \
            if (!failed_ && f->old != 0) end_block(s, f->old, old_rec);                      \
        }                                                                                    \
        CHECK(new_block(s, v, aligned ? NO_CLASS_BYTES : bytes_, aligned ? f->size : bytes_, \
                        &(var)));                                                            \
    } while (0)
#define GET_FIELD(name, coding, ops, flag) \
    if (HH_FIELD_CARRIED(op, s->flags, ops, flag)) GET_##coding(f->name);
    HH_EVENT_FIELDS(GET_FIELD)
#undef GET_FIELD
#undef GET_NEW
#undef GET_OLD
#undef GET_ALIGN
#undef GET_NUM
#ifdef HH_SCAN_FIELDS_TAP /* a test's view of the fields as the table names them */
    HH_SCAN_FIELDS_TAP(op, f);
#endif
    if (ends && !begins) { /* free: the event's block is the one it ended */
        f->ptr = f->old;
        f->old = 0;
    }
    return -1;
}

int hh_scan_run(hh_scan *s, const uint8_t *buf, size_t pos[HH_STREAM_COUNT],
                const size_t end[HH_STREAM_COUNT]) {
    s->error[0] = '\0';
    if (s->la_tag == SIZE_MAX || s->la_tag < pos[HH_STREAM_TAG]) {
        /* (Re)start the lookahead where the events are: a block's start, or after a record. */
        s->la_tag = pos[HH_STREAM_TAG];
        s->la_addr = pos[s->split ? HH_STREAM_OLD : HH_STREAM_ADDR];
        s->la_more = pos[HH_STREAM_OLD_MORE];
        s->la_prev_ref = s->prev_ref;
        s->la_events = s->block_events;
        s->la_stopped = false;
    }
    const bool sequence = s->seq.on, events = s->events_on;
    while (pos[HH_STREAM_TAG] < end[HH_STREAM_TAG]) {
        lookahead(s, buf, end);
        uint8_t tag = buf[pos[HH_STREAM_TAG]];
        if ((tag & HH_TAG_EVENT) == 0) return HH_SCAN_RECORD;
        pos[HH_STREAM_TAG]++;
        int op = tag & HH_EVT_OP_MASK;
        if (op > HH_OP_REALLOC_DONE) {
            snprintf(s->error, sizeof s->error, "unknown operation %d", op);
            return HH_SCAN_ERROR;
        }
        uint64_t v;
        READ(HH_STREAM_TIME, v);
        s->time += (double)unzigzag(v) * s->unit;
        if (tag & HH_EVT_THREAD) {
            READ(HH_STREAM_STACK, s->thread);
            s->thread_checked = false;
        }
        uint64_t thread = s->thread;
        if (!s->thread_checked) { /* declarations are never taken back: once is enough */
            if (thread >= s->threads || s->thread_tid[thread] < 0) {
                snprintf(s->error, sizeof s->error, "event of undeclared thread index %llu",
                         (unsigned long long)thread);
                return HH_SCAN_ERROR;
            }
            if (thread > s->max_thread) s->max_thread = thread;
            s->thread_checked = true;
        }
        bool carries_stack =
            op != HH_OP_REALLOC_DONE && (op != HH_OP_FREE || (s->flags & HH_PF_FREE_STACKS) != 0);
        double stack = carries_stack ? s->thread_stack[thread] : 0;
        if (tag & HH_EVT_STACK) {
            READ(HH_STREAM_STACK, v);
            stack = (double)v;
        }
        if (carries_stack) s->thread_stack[thread] = stack;
        hh_field_decoded f;
        CHECK_READ(decode_fields(s, op, buf, pos, end, &f));
        if (__builtin_expect(events, 0)) { /* the events themselves (events.c) */
            if (!events_put(s, op, tag, thread, stack, &f)) return HH_SCAN_ERROR;
            if (!s->events_replay) { /* decode only */
                s->block_events++;
                s->all_events++;
                continue;
            }
        }
        const uint64_t ptr = f.ptr, old_ptr = f.old;
        const double size = f.size, count = f.count, align = f.align;
        const double duration = f.duration, weight = f.weight;
        bool split = (tag & HH_EVT_SPLIT) != 0;
        /* (Before the replay, whose state it does not share: nothing of it stays live across the
         * replay's inlined code, which the report's pass runs alone.) */
        if (__builtin_expect(sequence, 0) &&
            !seq_event(s, op, s->thread_state[thread], ptr, old_ptr, size, count, align, split,
                       s->events + (op != HH_OP_REALLOC_DONE))) {
            s->out_of_memory = true;
            snprintf(s->error, sizeof s->error, "out of memory");
            return HH_SCAN_NO_MEMORY;
        }
        if (!replay(s, op, s->time, s->thread_state[thread], stack, (double)ptr, (double)old_ptr,
                    size, count, duration, weight, split)) {
            s->out_of_memory = !s->blocks.over_limit; /* else the limit refused a record */
            over_limit_or_oom(s);
            return refused_status(s);
        }
        s->block_events++;
        s->all_events++;
    }
    return HH_SCAN_BLOCK_END;
}
