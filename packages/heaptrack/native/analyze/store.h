/*
 * store.h — the replay's storage (analyze/, scan.h): its tunables, the open-addressing table
 * from u64 keys to u64 values every lookup uses, the live blocks (a slab of records, an address
 * index, the ordinal ring) and the ordinals older than the ring. Static inline: decode.c's
 * loop inlines them.
 */
#ifndef HH_ANALYZE_STORE_H
#define HH_ANALYZE_STORE_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/heaplog.h"
#include "probe.h"

/* ---- Tunables (the format's constants are format/heaplog.h's) ---------------------------- */

#define ORDINAL_MASK (HH_ORDINAL_RING - 1)
#define TABLE_MIN 1024u
/* Prefetching (see lookahead): the ring entries of the frees 32-48 events ahead (the lookahead
 * runs in strides of 16), the records of those LOOKAHEAD_NEAR events ahead. */
#define LOOKAHEAD 64u /* a power of two above LOOKAHEAD_FAR */
#define LOOKAHEAD_FAR 48u
#define LOOKAHEAD_STRIDE 16u
#define LOOKAHEAD_NEAR 12u

#define NONE UINT64_MAX /* "no value" in the tables */
#define HH_SCAN_LIKELY(x) __builtin_expect(!!(x), 1)
/* HH_MAX_EXACT: values of the time, stack and addr streams and the addresses they code stay
 * below 2^53, where a double (the TypeScript decoder's number) is exact, and addresses are not
 * negative; others are damage. */
#define MAX_EXACT ((double)HH_MAX_EXACT)
#define MAX_EXACT_INT ((int64_t)HH_MAX_EXACT)
/* The class bytes of a block with no size class (an aligned allocation): beyond every class. */
#define NO_CLASS_BYTES ((double)HH_MAX_EXACT)

/* ---- Open addressing, shared by both tables below ---------------------------------------- */

/* Both tables: 2^k slots, at most half full, Fibonacci hashing, linear probing and
 * backward-shift deletion; key 0 marks an empty slot. */
static inline size_t table_slots_for(size_t capacity) {
    size_t n = TABLE_MIN;
    while (n < capacity * 2) n *= 2;
    return n;
}

static inline uint64_t table_hash(uint64_t key, unsigned shift) {
    return (key * 0x9e3779b97f4a7c15ull) >> shift;
}

/* ---- An open-addressing table from non-zero u64 keys to u64 values ------------------------ */

typedef struct u64_table {
    uint64_t *slots; /* key at 2i, value at 2i + 1 */
    uint64_t mask;
    unsigned shift;
    size_t size;
} u64_table;

static inline uint64_t table_home(const u64_table *t, uint64_t key) {
    return table_hash(key, t->shift);
}

static inline bool table_init(u64_table *t, size_t capacity) {
    size_t n = table_slots_for(capacity);
    t->slots = calloc(2 * n, sizeof(uint64_t));
    if (t->slots == NULL) return false;
    t->mask = n - 1;
    t->shift = 64 - (unsigned)__builtin_ctzll(n);
    t->size = 0;
    return true;
}

static inline uint64_t table_get(const u64_table *t, uint64_t key) {
    if (key == 0) return NONE;
    const uint64_t *d = t->slots;
    for (uint64_t i = table_home(t, key);; i = (i + 1) & t->mask) {
        if (d[2 * i] == key) return d[2 * i + 1];
        if (d[2 * i] == 0) return NONE;
    }
}

static inline bool table_grow(u64_table *t);

/* Sets key (non-zero) to value; returns the previous value or NONE. *ok is false when out of
 * memory. */
static inline uint64_t table_set(u64_table *t, uint64_t key, uint64_t value, bool *ok) {
    if ((t->size + 1) * 2 > t->mask + 1 && !table_grow(t)) {
        *ok = false;
        return NONE;
    }
    uint64_t *d = t->slots;
    for (uint64_t i = table_home(t, key);; i = (i + 1) & t->mask) {
        if (d[2 * i] == key) {
            uint64_t old = d[2 * i + 1];
            d[2 * i + 1] = value;
            return old;
        }
        if (d[2 * i] == 0) {
            d[2 * i] = key;
            d[2 * i + 1] = value;
            t->size++;
            return NONE;
        }
    }
}

/* Removes key; returns its value or NONE. */
static inline uint64_t table_delete(u64_table *t, uint64_t key) {
    if (key == 0) return NONE;
    uint64_t *d = t->slots;
    uint64_t i = table_home(t, key);
    for (;; i = (i + 1) & t->mask) {
        if (d[2 * i] == key) break;
        if (d[2 * i] == 0) return NONE;
    }
    uint64_t value = d[2 * i + 1];
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & t->mask; d[2 * j] != 0; j = (j + 1) & t->mask) {
        if (!hh_probe_may_move(hole, j, table_home(t, d[2 * j]))) continue;
        d[2 * hole] = d[2 * j];
        d[2 * hole + 1] = d[2 * j + 1];
        hole = j;
    }
    d[2 * hole] = 0;
    d[2 * hole + 1] = 0;
    t->size--;
    return value;
}

static inline bool table_grow(u64_table *t) {
    u64_table bigger;
    if (!table_init(&bigger, t->mask + 1)) return false;
    bool ok = true;
    for (uint64_t i = 0; i <= t->mask; i++)
        if (t->slots[2 * i] != 0) table_set(&bigger, t->slots[2 * i], t->slots[2 * i + 1], &ok);
    free(t->slots);
    *t = bigger;
    return true;
}

/* ---- Blocks: a slab of records, an address index, the ordinal ring ----------------------- */

/*
 * One record per block that either side holds: the decoder's address state (the block's
 * ordinal and size class, from its `new` reference until the `old` reference that ends it) and
 * the report's live block (weight and site, from the allocation as the allocator saw it until
 * its free). The two differ for a moved realloc between the realloc and its realloc_done, for
 * unsampled blocks and for anomalies, so each side has its own mark; a record is given back
 * when neither holds it.
 *
 * Records live in a slab: their indices are stable and recycled last in, first out, so the
 * records in use stay as compact as the live set (20,000 live blocks: 640 KB, within a core's
 * L2). The ordinal ring names records by index, so a free (an `old` reference by ordinal)
 * reaches its record without hashing. The address index (address -> record) is consulted when
 * a block begins (is that address live already?) and for references by address. Its entries
 * are not removed when a record is given back: an entry whose record no longer holds its
 * address is stale, is taken over by the next block at that address (allocators reuse
 * addresses) and is dropped when the index is rebuilt. That keeps frees out of the index.
 */
#define NO_SITE UINT32_MAX
#define NO_REC UINT32_MAX
#define REC_MAX (UINT32_MAX - 1) /* records are u32 indices; NO_REC is not one */

typedef struct block_rec {
    uint64_t addr;    /* 0: the record is free */
    uint64_t ordinal; /* decoder: the block's ordinal; 0 when it does not hold the block */
    double weight;    /* report: the bytes the block stands for */
    uint32_t site;    /* report: the site's index; NO_SITE when it does not hold the block */
    uint8_t cls;      /* decoder: the size class of the block's request (or HH_NO_CLASS) */
    uint8_t op;       /* report: the function that allocated it (enum hh_op) */
    uint8_t bucket;   /* report, with a timeline: the bucket it was allocated in */
} block_rec;
_Static_assert(HH_NO_CLASS <= UINT8_MAX && HH_OP_COUNT <= UINT8_MAX, "cls and op fit a byte");
_Static_assert(sizeof(block_rec) == 32, "records are 32 bytes");

/* 12 bytes (packed): the index is read at random, and the smaller it is, the more of it stays
 * in the cache next to the records and the ring. */
typedef struct __attribute__((packed)) addr_slot {
    uint64_t addr; /* 0: empty */
    uint32_t rec;  /* the record that held addr when the entry was written */
} addr_slot;
_Static_assert(sizeof(addr_slot) == 12, "index entries are 12 bytes");

typedef struct block_store {
    block_rec *recs;
    uint32_t rec_count; /* records ever used (the slab's high-water mark) */
    uint32_t rec_cap;
    uint32_t *free_recs; /* given-back records, a stack */
    uint32_t free_count;
    addr_slot *index;
    uint64_t mask;
    unsigned shift;
    size_t index_used; /* entries, stale ones included */
    uint32_t limit;    /* records in use at most (hh_scan_set_block_limit) */
    bool over_limit;   /* a record was refused for the limit, not for memory */
} block_store;

static inline uint64_t store_home(const block_store *b, uint64_t addr) {
    return table_hash(addr, b->shift);
}

/* An index of `slots` (a power of two) entries over the records in use. */
static inline bool store_index_build(block_store *b, size_t slots) {
    addr_slot *index = calloc(slots, sizeof *index);
    if (index == NULL) return false;
    free(b->index);
    b->index = index;
    b->mask = slots - 1;
    b->shift = 64 - (unsigned)__builtin_ctzll(slots);
    b->index_used = 0;
    for (uint32_t r = 0; r < b->rec_count; r++) {
        uint64_t addr = b->recs[r].addr;
        if (addr == 0) continue;
        uint64_t i = store_home(b, addr);
        while (index[i].addr != 0) i = (i + 1) & b->mask;
        index[i] = (addr_slot){.addr = addr, .rec = r};
        b->index_used++;
    }
    return true;
}

static inline bool store_init(block_store *b) {
    *b = (block_store){.limit = HH_SCAN_DEFAULT_BLOCK_LIMIT};
    return store_index_build(b, TABLE_MIN);
}

static inline void store_free(block_store *b) {
    free(b->recs);
    free(b->free_recs);
    free(b->index);
}

/* The record holding addr, or NO_REC. */
static inline uint32_t store_find(const block_store *b, uint64_t addr) {
    if (addr == 0) return NO_REC;
    for (uint64_t i = store_home(b, addr);; i = (i + 1) & b->mask) {
        const addr_slot *x = &b->index[i];
        if (x->addr == addr) return b->recs[x->rec].addr == addr ? x->rec : NO_REC;
        if (x->addr == 0) return NO_REC;
    }
}

/* A free record for addr, held by neither side (the slab may move: re-read pointers). NO_REC
 * when out of memory, or when `limit` records are in use (over_limit is set then). */
static inline uint32_t store_new_rec(block_store *b, uint64_t addr) {
    uint32_t r;
    if (b->free_count > 0) {
        r = b->free_recs[--b->free_count];
    } else {
        /* Records in use never outnumber the slab's high-water mark, which grows only here. */
        if (b->rec_count >= b->limit) {
            b->over_limit = true;
            return NO_REC;
        }
        if (b->rec_count == b->rec_cap) {
            if (b->rec_cap >= REC_MAX / 2) return NO_REC;
            uint32_t cap = b->rec_cap ? b->rec_cap * 2 : 4096;
            block_rec *recs = realloc(b->recs, cap * sizeof *recs);
            if (recs == NULL) return NO_REC;
            b->recs = recs;
            uint32_t *free_recs = realloc(b->free_recs, cap * sizeof *free_recs);
            if (free_recs == NULL) return NO_REC;
            b->free_recs = free_recs;
            b->rec_cap = cap;
        }
        r = b->rec_count++;
    }
    b->recs[r] = (block_rec){.addr = addr, .site = NO_SITE, .cls = HH_NO_CLASS};
    return r;
}

/* Gives record r back: neither side holds its block any more. */
static inline void store_release(block_store *b, uint32_t r) {
    b->recs[r].addr = 0;
    b->free_recs[b->free_count++] = r;
}

/* The record holding addr (non-zero); a new one, held by neither side, when there was none.
 * NO_REC when out of memory. The slab may move: re-read record pointers after the call. */
static inline uint32_t store_insert(block_store *b, uint64_t addr) {
    if ((b->index_used + 1) * 2 > b->mask + 1) {
        /* Rebuilt with room for as many inserts again as records in use (stale entries go). */
        size_t in_use = (size_t)b->rec_count - b->free_count;
        if (!store_index_build(b, table_slots_for(2 * in_use + 2))) return NO_REC;
    }
    for (uint64_t i = store_home(b, addr);; i = (i + 1) & b->mask) {
        addr_slot *x = &b->index[i];
        if (x->addr == addr) {
            if (b->recs[x->rec].addr == addr) return x->rec;
            uint32_t r = store_new_rec(b, addr);
            if (r != NO_REC) x->rec = r;
            return r;
        }
        if (x->addr == 0) {
            uint32_t r = store_new_rec(b, addr);
            if (r == NO_REC) return NO_REC;
            *x = (addr_slot){.addr = addr, .rec = r};
            b->index_used++;
            return r;
        }
    }
}

/* ---- Old ordinals: blocks the decoder holds that the ordinal ring no longer names ---------- */

/*
 * The ring evicts ordinals in increasing order, so they are appended here sorted and found by
 * binary search (frees of blocks that old are the rarer ones). An ended block leaves a tombstone
 * (rec NO_REC); the array is compacted once half of it is tombstones. 12 bytes a block, where a
 * hash table at most half full took 32 or more: a log of a few KB can hold millions of them.
 */
typedef struct __attribute__((packed)) old_entry {
    uint64_t ordinal;
    uint32_t rec; /* NO_REC: the block ended */
} old_entry;

typedef struct old_ordinals {
    old_entry *entries;
    size_t count, cap, ended;
} old_ordinals;

static inline bool old_append(old_ordinals *o, uint64_t ordinal, uint32_t rec) {
    assert(o->count == 0 || o->entries[o->count - 1].ordinal < ordinal);
    if (o->count == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1024;
        old_entry *entries = realloc(o->entries, cap * sizeof *entries);
        if (entries == NULL) return false;
        o->entries = entries;
        o->cap = cap;
    }
    o->entries[o->count++] = (old_entry){.ordinal = ordinal, .rec = rec};
    return true;
}

/* The entry of ordinal (a tombstone included), or NULL. (Inlined: a call would make its
 * callers save registers on every lookup, the ring's included.) */
static inline __attribute__((always_inline)) old_entry *old_find(const old_ordinals *o,
                                                                 uint64_t ordinal) {
    size_t lo = 0, hi = o->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->entries[mid].ordinal < ordinal)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->count && o->entries[lo].ordinal == ordinal ? &o->entries[lo] : NULL;
}

static __attribute__((noinline, unused)) void old_forget(old_ordinals *o, uint64_t ordinal) {
    old_entry *e = old_find(o, ordinal);
    if (e == NULL || e->rec == NO_REC) return;
    e->rec = NO_REC;
    if (++o->ended * 2 <= o->count) return;
    size_t n = 0;
    for (size_t i = 0; i < o->count; i++)
        if (o->entries[i].rec != NO_REC) o->entries[n++] = o->entries[i];
    o->count = n;
    o->ended = 0;
}

#endif
