/*
 * sequence.c — recommend's allocation sequence (test/oracle/sequence.ts is the same in
 * TypeScript): every allocating event becomes a TLSF operation on a slot, with the request the
 * core hands the backend and the footprint the block takes in a TLSF pool (TLSF's own block
 * overhead and minimum size, from packages/tlsf's tlsf_block.h).
 */
#include <math.h>

#include "analyze/state.h"
#include "tlsf_block.h"

/* ---- The allocation sequence (recommend) ------------------------------------------------- */

#define PAGE_SIZE_ASSUMED 4096.0 /* valloc/pvalloc: the log does not record it (x86-64 Linux) */
#define DEFAULT_ALIGN 16.0

/* What the core hands the backend for an allocating event (core/native/interpose.c). */
static double request_size(int op, double bytes) {
    double n = bytes > 1 ? bytes : 1;
    return op == HH_OP_PVALLOC ? ceil(n / PAGE_SIZE_ASSUMED) * PAGE_SIZE_ASSUMED : n;
}

static double request_align(int op, double align) {
    if (op == HH_OP_VALLOC || op == HH_OP_PVALLOC) return PAGE_SIZE_ASSUMED;
    if (op != HH_OP_POSIX_MEMALIGN && op != HH_OP_MEMALIGN && op != HH_OP_ALIGNED_ALLOC) return 1;
    if (!(align > DEFAULT_ALIGN)) return 1;
    double p = 2 * DEFAULT_ALIGN; /* memalign rounds an alignment up to a power of two */
    while (p < align && p < 0x1p1000) p *= 2;
    return p;
}

/* Bytes a used block of this request takes in a TLSF pool at least (head included). */
static double footprint_of(double size) {
    /* TLSF's own figures (tlsf_block.h): the head in front of the payload, footprints in steps
     * of its alignment, and the smallest block (head, two links, the boundary tag). */
    const double align = (double)TLSF_ALIGN, min = (double)BLOCK_SIZE_MIN;
    double f = ceil((size + (double)BLOCK_OVERHEAD) / align) * align;
    return f > min ? f : min;
}

void hh_scan_request_of(int op, double size, double count, double align, double *request_bytes,
                        double *request_alignment) {
    double bytes = op == HH_OP_CALLOC || op == HH_OP_REALLOCARRAY ? count * size : size;
    *request_bytes = request_size(op, bytes);
    *request_alignment = request_align(op, align);
}

double hh_scan_footprint_of(double size) {
    return footprint_of(size);
}

static bool seq_emit(sequence *q, double code, uint32_t slot, double size, double arg,
                     double event) {
    if (q->count == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 4096;
        double *ops = realloc(q->ops, cap * 4 * sizeof(double));
        if (ops == NULL) return false;
        q->ops = ops;
        double *events = realloc(q->op_events, cap * sizeof(double));
        if (events == NULL) return false;
        q->op_events = events;
        q->cap = cap;
    }
    double *o = &q->ops[4 * q->count];
    o[0] = code;
    o[1] = slot;
    o[2] = size;
    o[3] = arg;
    q->op_events[q->count++] = event;
    return true;
}

static bool seq_acquire(sequence *q, uint32_t *slot) {
    if (q->free_count > 0) {
        *slot = q->free_slots[--q->free_count];
        return true;
    }
    if (q->next_slot == REC_MAX) return false;
    *slot = q->next_slot++;
    if (q->tally && *slot >= q->slot_cap) {
        size_t cap = q->slot_cap; /* both arrays grow to the same capacity */
        if (!grow_array((void **)&q->slot_bytes, &cap, *slot, sizeof(double)) ||
            !grow_array((void **)&q->slot_foot, &q->slot_cap, *slot, sizeof(double)))
            return false;
    }
    return true;
}

/* The block in `slot` is gone: its slot is free, its bytes no longer live. */
static bool seq_release(sequence *q, uint32_t slot) {
    if (!grow_array((void **)&q->free_slots, &q->free_cap, q->free_count, sizeof(uint32_t)))
        return false;
    q->free_slots[q->free_count++] = slot;
    if (q->tally) {
        q->live_bytes -= q->slot_bytes[slot];
        q->live_foot -= q->slot_foot[slot];
        q->slot_bytes[slot] = 0;
        q->slot_foot[slot] = 0;
    }
    return true;
}

/* The block in `slot` (noted) becomes live. */
static void seq_count_live(sequence *q, uint32_t slot) {
    if (!q->tally) return;
    q->live_bytes += q->slot_bytes[slot];
    q->live_foot += q->slot_foot[slot];
    if (q->live_bytes > q->peak_bytes) q->peak_bytes = q->live_bytes;
    if (q->live_foot > q->peak_foot) q->peak_foot = q->live_foot;
}

/* Notes the request of the block in `slot`; it counts as live when `live`. */
static void seq_note(sequence *q, uint32_t slot, double size, double align, bool live) {
    if (!q->tally) return;
    if (size > q->largest_request) q->largest_request = size;
    if (align > q->largest_align) q->largest_align = align;
    q->slot_bytes[slot] = size;
    q->slot_foot[slot] = footprint_of(size);
    if (live) seq_count_live(q, slot);
}

/* Names the block in `slot` by the log address ptr; a block still named so is freed (the log
 * saw its address freed late). */
static bool seq_bind(sequence *q, uint64_t ptr, uint32_t slot, double event) {
    bool ok = true;
    uint64_t old = table_set(&q->slot_of, ptr, slot, &ok);
    if (!ok) return false;
    if (old != NONE)
        return seq_emit(q, q->code_free, (uint32_t)old, 0, 0, event) &&
               seq_release(q, (uint32_t)old);
    return true;
}

static bool seq_alloc(sequence *q, uint64_t ptr, double size, double align, double event) {
    uint64_t old = table_delete(&q->slot_of, ptr);
    if (old != NONE &&
        !(seq_emit(q, q->code_free, (uint32_t)old, 0, 0, event) && seq_release(q, (uint32_t)old)))
        return false;
    uint32_t slot;
    if (!seq_acquire(q, &slot) || !seq_emit(q, q->code_alloc, slot, size, align, event))
        return false;
    bool ok = true;
    table_set(&q->slot_of, ptr, slot, &ok);
    seq_note(q, slot, size, align, true);
    return ok;
}

static bool seq_free(sequence *q, uint64_t ptr, double event) {
    uint64_t slot = table_delete(&q->slot_of, ptr);
    if (slot == NONE) return true; /* allocated before the log began */
    return seq_emit(q, q->code_free, (uint32_t)slot, 0, 0, event) && seq_release(q, (uint32_t)slot);
}

static bool seq_realloc(sequence *q, thread_state *t, uint64_t old_ptr, uint64_t new_ptr,
                        double size, bool split, double event) {
    uint64_t slot = table_delete(&q->slot_of, old_ptr);
    uint32_t to; /* acquired before the old slot is released: the block moves between two */
    if (!seq_acquire(q, &to)) return false;
    if (slot == NONE) { /* a block from before the log: count the new one */
        if (!seq_emit(q, q->code_alloc, to, size, 1, event)) return false;
    } else if (!seq_emit(q, q->code_realloc, (uint32_t)slot, size, to, event) ||
               !seq_release(q, (uint32_t)slot)) {
        return false;
    }
    seq_note(q, to, size, 1, false);
    if (split) { /* counted from its realloc_done */
        t->moving = true;
        t->moving_ptr = new_ptr;
        t->moving_slot = to;
        return true;
    }
    if (!seq_bind(q, new_ptr, to, event)) return false;
    seq_count_live(q, to);
    return true;
}

/* One event of the log as the backend would see it, `event` its number (realloc_done not
 * counted): failed calls and frees of NULL reach no heap. False when out of memory. */
bool seq_event(hh_scan *s, int op, thread_state *t, uint64_t ptr, uint64_t old_ptr, double size,
               double count, double align, bool split, double event) {
    sequence *q = &s->seq;
    if (!t->seen) {
        t->seen = true;
        q->threads++;
    }
    switch (op) {
        case HH_OP_REALLOC_DONE:
            if (!t->moving) return true;
            t->moving = false;
            if (!seq_bind(q, t->moving_ptr, t->moving_slot, event)) return false;
            seq_count_live(q, t->moving_slot);
            return true;
        case HH_OP_FREE:
            return ptr == 0 || seq_free(q, ptr, event);
        case HH_OP_REALLOC:
        case HH_OP_REALLOCARRAY: {
            double bytes = op == HH_OP_REALLOCARRAY ? count * size : size;
            if (ptr == 0 && bytes > 0) return true; /* failed: the old block stays */
            if (old_ptr == 0)
                return ptr == 0 || seq_alloc(q, ptr, request_size(op, bytes), 1, event);
            if (ptr == 0) return seq_free(q, old_ptr, event); /* realloc(p, 0) frees p */
            return seq_realloc(q, t, old_ptr, ptr, request_size(op, bytes), split, event);
        }
        default: {
            if (ptr == 0) return true;
            double bytes = op == HH_OP_CALLOC ? count * size : size;
            return seq_alloc(q, ptr, request_size(op, bytes), request_align(op, align), event);
        }
    }
}
