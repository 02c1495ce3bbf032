/*
 * address.h — the decoder's address state (FORMAT.md, "Addresses"): references to live blocks
 * by ordinal, new blocks by size class, recent frees or delta, and the live-block store they
 * update. Static inline, for decode.c's loop.
 */
#ifndef HH_ANALYZE_ADDRESS_H
#define HH_ANALYZE_ADDRESS_H

#include <stdio.h>

#include "analyze/state.h"

/* ---- The decoder's address state (FORMAT.md, "Addresses") ------------------------------- */

static inline int64_t unzigzag(uint64_t z) {
    return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
}

/* (Conversions truncate: for the non-negative values here that is floor, without a libm call.) */
static inline unsigned class_of(double bytes) {
    return bytes >= 0 && bytes <= HH_CLASS_MAX_BYTES
               ? (unsigned)((bytes + HH_CHUNK_HEADER + (HH_CHUNK_ALIGN - 1)) / HH_CHUNK_ALIGN)
               : HH_NO_CLASS;
}

/* The record of live block `ordinal`, or NO_REC when none. */
static inline uint32_t rec_of(const hh_scan *s, int64_t ordinal) {
    if (ordinal < 1 || (uint64_t)ordinal > s->ordinal) return NO_REC;
    if ((uint64_t)ordinal + HH_ORDINAL_RING > s->ordinal)
        return s->ring_rec[ordinal & ORDINAL_MASK] - 1; /* 0 - 1 = NO_REC */
    const old_entry *e = old_find(&s->old_rec, (uint64_t)ordinal);
    return e == NULL ? NO_REC : e->rec;
}

static inline void forget_ordinal(hh_scan *s, uint64_t ordinal) {
    if (ordinal + HH_ORDINAL_RING > s->ordinal)
        s->ring_rec[ordinal & ORDINAL_MASK] = 0;
    else
        old_forget(&s->old_rec, ordinal);
}

/* ---- The size classes' lists of recent frees (FORMAT.md, "Addresses") ------------------------
 * Each is a ring of HH_CLASS_DEPTH slots; a log without HH_PF_DEEP_CLASSES (version 2) uses its
 * first HH_CLASS_DEPTH_V2 entries and keeps the others 0. Pushing and taking an entry out cost
 * O(1) and O(its index): a free and the allocation that reuses its address touch entry 0. */
#define CLASS_MASK (HH_CLASS_DEPTH - 1)

static inline unsigned class_depth(const hh_scan *s) {
    return (s->flags & HH_PF_DEEP_CLASSES) ? HH_CLASS_DEPTH : HH_CLASS_DEPTH_V2;
}

/* Entry k of class cls's list (0: freed last). */
static inline uint64_t *class_entry(hh_scan *s, unsigned cls, unsigned k) {
    return &s->classes[cls * HH_CLASS_DEPTH + ((s->class_head[cls] + k) & CLASS_MASK)];
}

/* ptr becomes entry 0; the entry pushed past the list's depth drops off. */
static inline void class_push(hh_scan *s, unsigned cls, uint64_t ptr) {
    unsigned depth = class_depth(s);
    s->class_head[cls] = (uint8_t)((s->class_head[cls] - 1) & CLASS_MASK);
    if (depth < HH_CLASS_DEPTH) *class_entry(s, cls, depth) = 0;
    *class_entry(s, cls, 0) = ptr;
}

/* Entry k leaves the list: the entries before it move up one, the last becomes 0. */
static inline void class_remove(hh_scan *s, unsigned cls, unsigned k) {
    for (unsigned i = k; i > 0; i--) *class_entry(s, cls, i) = *class_entry(s, cls, i - 1);
    *class_entry(s, cls, 0) = 0;
    s->class_head[cls] = (uint8_t)((s->class_head[cls] + 1) & CLASS_MASK);
}

/* The block at `ptr` ends (its record r, or NO_REC when not known yet): it leaves the live set
 * and joins the free lists. */
static inline void end_block(hh_scan *s, uint64_t ptr, uint32_t r) {
    if (r == NO_REC) r = store_find(&s->blocks, ptr);
    unsigned cls = HH_NO_CLASS;
    if (r != NO_REC) {
        s->last_touched = r;
        block_rec *e = &s->blocks.recs[r];
        if (e->ordinal != 0) {
            forget_ordinal(s, e->ordinal);
            cls = e->cls;
            e->ordinal = 0;
            if (e->site == NO_SITE) store_release(&s->blocks, r);
        }
    }
    s->recent[s->recent_head] = ptr;
    s->recent_head = (s->recent_head + 1) & (HH_RECENT - 1);
    if (cls < HH_CLASSES) class_push(s, cls, ptr);
    /* Allocators hand a freed address out again soon, and the block that gets it looks it up in
     * the index: fetch its entry now, while the events in between are decoded. */
    __builtin_prefetch(&s->blocks.index[store_home(&s->blocks, ptr)]);
}

#define FAIL(...)                                         \
    do {                                                  \
        snprintf(s->error, sizeof s->error, __VA_ARGS__); \
        return false;                                     \
    } while (0)

/* A record was refused: says why (the block limit, or memory) and returns false. */
static inline bool over_limit_or_oom(hh_scan *s) {
    if (s->blocks.over_limit)
        FAIL("more than %u blocks live at once, the analyser's limit", (unsigned)s->blocks.limit);
    s->out_of_memory = true;
    FAIL("out of memory");
}

/* The block named by an `old` reference v: its address, and its record (NO_REC when named by
 * address: end_block looks it up). */
static inline bool resolve_ref(hh_scan *s, uint64_t v, uint64_t *out, uint32_t *rec) {
    uint64_t ptr;
    uint32_t r = NO_REC;
    if ((v & 1) == 0) {
        int64_t ordinal = s->prev_ref + 1 + unzigzag(v >> 1);
        r = rec_of(s, ordinal);
        if (r == NO_REC) FAIL("reference to unknown block #%lld", (long long)ordinal);
        ptr = s->blocks.recs[r].addr;
        assert(s->blocks.recs[r].ordinal == (uint64_t)ordinal && ptr != 0);
        s->prev_ref = ordinal;
    } else {
        int64_t a = (int64_t)s->addr + unzigzag((v - 1) >> 1);
        if (a < 0 || a > MAX_EXACT_INT) FAIL("address out of range");
        ptr = (uint64_t)a;
    }
    s->addr = ptr;
    *out = ptr;
    *rec = r;
    return true;
}

/* A block that begins, from its `new` reference v. */
static inline bool new_block(hh_scan *s, uint64_t v, double class_bytes, double request,
                             uint64_t *out) {
    unsigned cls = class_of(class_bytes);
    uint64_t ptr;
    /* Where ptr is in its class list when coded from it (entries before it are checked for a
     * duplicate). Not coded from it: in a version 2 log search all of it; a deep-class log's
     * writer codes every address its class list holds from the list, so it is not there. */
    const unsigned depth = class_depth(s);
    unsigned at = depth == HH_CLASS_DEPTH ? 0 : depth;
    bool from_class = false;
    if (v & 1) {
        int64_t a = (int64_t)s->addr + unzigzag((v - 1) >> 1);
        if (a < 0 || a > MAX_EXACT_INT) FAIL("address out of range");
        ptr = (uint64_t)a;
    } else if ((v & 3) == 0) {
        uint64_t k = v / 4;
        ptr = cls < HH_CLASSES && k < depth ? *class_entry(s, cls, (unsigned)k) : 0;
        if (ptr == 0)
            FAIL("reference to unknown free %llu of size class %u", (unsigned long long)k, cls);
        at = (unsigned)k; /* mostly 0: the chunk freed last */
        from_class = true;
    } else if (v == 2) {
        if (s->bump_addr == 0) FAIL("reference to the block after none");
        double chunk =
            floor((s->bump_bytes + HH_CHUNK_HEADER + (HH_CHUNK_ALIGN - 1)) / HH_CHUNK_ALIGN) *
            HH_CHUNK_ALIGN;
        double next = (double)s->bump_addr + fmax(HH_CHUNK_MIN, chunk);
        if (!(next >= 0 && next <= MAX_EXACT)) FAIL("address out of range");
        ptr = (uint64_t)next;
    } else {
        uint64_t k = (v - 2) / 4 - 1;
        uint64_t depth = (s->flags & HH_PF_DEEP_RECENT) ? HH_RECENT : HH_RECENT_V3;
        ptr = k < depth ? s->recent[(s->recent_head - 1 - k) & (HH_RECENT - 1)] : 0;
        if (ptr == 0) FAIL("reference to unknown recent free %llu", (unsigned long long)k);
    }
    if (ptr != 0) {
        if (cls < HH_CLASSES) {
            /* The address leaves its class list: its first entry there (the coded one, unless an
             * earlier entry holds the same address too). */
            unsigned i = 0;
            while (i < at && *class_entry(s, cls, i) != ptr) i++;
            if (i < at || from_class) class_remove(s, cls, i);
        }
        uint64_t ordinal = ++s->ordinal;
        /* The ring slot of the new ordinal held the one HH_ORDINAL_RING before: keep it if live. */
        uint64_t slot = ordinal & ORDINAL_MASK;
        uint32_t evicted = s->ring_rec[slot];
        bool ok = true;
        if (evicted != 0) ok = old_append(&s->old_rec, ordinal - HH_ORDINAL_RING, evicted - 1);
        uint32_t r = ok ? store_insert(&s->blocks, ptr) : NO_REC;
        if (r == NO_REC) return over_limit_or_oom(s);
        s->ring_rec[slot] = r + 1;
        block_rec *e = &s->blocks.recs[r];
        if (e->ordinal != 0) forget_ordinal(s, e->ordinal); /* a block the log never saw end */
        e->ordinal = ordinal;
        e->cls = cls;
        s->last_touched = r;
        s->bump_addr = ptr;
        s->bump_bytes = request;
    }
    s->addr = ptr;
    *out = ptr;
    return true;
}

#endif
