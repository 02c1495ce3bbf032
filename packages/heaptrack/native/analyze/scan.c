/*
 * scan.c — the one replay of a heaplog, in C (scan.h says what and why).
 *
 * Read top-down: tunables; the hash table every lookup uses; the blocks (records, address
 * index) and the ordinals older than the ring; the decoder's address state (FORMAT.md,
 * "Addresses"); the report's aggregates (heap series, histograms, sites, live blocks); the
 * replay of one event (test/oracle/report.ts is the same in TypeScript); the allocation
 * sequence for recommend (test/oracle/sequence.ts); the block loop; the results.
 */
#include "analyze/scan.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/fields.h"
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
static size_t table_slots_for(size_t capacity) {
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

static bool table_init(u64_table *t, size_t capacity) {
    size_t n = table_slots_for(capacity);
    t->slots = calloc(2 * n, sizeof(uint64_t));
    if (t->slots == NULL) return false;
    t->mask = n - 1;
    t->shift = 64 - (unsigned)__builtin_ctzll(n);
    t->size = 0;
    return true;
}

static uint64_t table_get(const u64_table *t, uint64_t key) {
    if (key == 0) return NONE;
    const uint64_t *d = t->slots;
    for (uint64_t i = table_home(t, key);; i = (i + 1) & t->mask) {
        if (d[2 * i] == key) return d[2 * i + 1];
        if (d[2 * i] == 0) return NONE;
    }
}

static bool table_grow(u64_table *t);

/* Sets key (non-zero) to value; returns the previous value or NONE. *ok is false when out of
 * memory. */
static uint64_t table_set(u64_table *t, uint64_t key, uint64_t value, bool *ok) {
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
static uint64_t table_delete(u64_table *t, uint64_t key) {
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

static bool table_grow(u64_table *t) {
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
static bool store_index_build(block_store *b, size_t slots) {
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

static bool store_init(block_store *b) {
    *b = (block_store){.limit = HH_SCAN_DEFAULT_BLOCK_LIMIT};
    return store_index_build(b, TABLE_MIN);
}

static void store_free(block_store *b) {
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
static uint32_t store_new_rec(block_store *b, uint64_t addr) {
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
static uint32_t store_insert(block_store *b, uint64_t addr) {
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

static bool old_append(old_ordinals *o, uint64_t ordinal, uint32_t rec) {
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

static __attribute__((noinline)) void old_forget(old_ordinals *o, uint64_t ordinal) {
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
    uint64_t classes[HH_CLASSES * HH_CLASS_DEPTH];
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
    /* Timeline (hh_scan_start_timeline): buckets of width * points / timeline_buckets, merged
     * in pairs with the series' */
    uint32_t timeline_buckets; /* 0: off */
    uint32_t timeline_bucket;  /* the bucket of series_time */
    bool timeline_lost;        /* out of memory: the timeline stopped */
    uint32_t temporary_rec;    /* the temporary block the current event frees (NO_REC: none) */
    thread_series *tseries;    /* HH_THREAD_SERIES_MAX + 1 entries, allocated with the first */
    uint32_t tseries_count;

    /* Lookahead: a second reader of the tag and addr streams that runs ahead of the events */
    size_t la_tag, la_addr; /* its positions (la_tag SIZE_MAX: start from the events') */
    int64_t la_prev_ref;
    uint64_t la_events;             /* events it has passed in this block */
    bool la_stopped;                /* it met a record that is not an event, or damage */
    uint64_t la_ordinal[LOOKAHEAD]; /* event i's free, by ordinal (0: none), at i % LOOKAHEAD */

    sequence seq;

    uint64_t block_events, all_events;
    double anomalies; /* allocations at an address the report held live already */
    bool out_of_memory;
    char error[160];
};

hh_scan *hh_scan_new(uint32_t points, double width_ns) {
    if (points < 2 || points % 2 != 0) return NULL;
    hh_scan *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->unit = 1;
    s->points = points;
    s->width = width_ns > 1 ? width_ns : 1;
    s->series_time = NAN;
    s->present = calloc(points, 1);
    s->smin = calloc(points, sizeof(double));
    s->smax = calloc(points, sizeof(double));
    s->slast = calloc(points, sizeof(double));
    s->ring_rec = calloc(HH_ORDINAL_RING, sizeof(uint32_t));
    s->last_touched = NO_REC;
    s->temporary_rec = NO_REC;
    bool ok = s->present && s->smin && s->smax && s->slast && s->ring_rec;
    ok = ok && table_init(&s->tid_index, 16) && store_init(&s->blocks);
    ok = ok && table_init(&s->site_index, 1024);
    if (!ok) {
        hh_scan_free(s);
        return NULL;
    }
    return s;
}

void hh_scan_free(hh_scan *s) {
    if (s == NULL) return;
    free(s->thread_tid);
    free(s->thread_state);
    for (uint32_t i = 0; i < s->tseries_count; i++) {
        free(s->tseries[i].counts);
        free(s->tseries[i].sums);
    }
    free(s->tseries);
    free(s->thread_stack);
    for (size_t i = 0; i < s->state_count; i++) free(s->states[i]);
    free(s->states);
    free(s->tid_index.slots);
    store_free(&s->blocks);
    free(s->ring_rec);
    free(s->old_rec.entries);
    for (int i = 0; i < HH_OP_COUNT; i++) free(s->latency[i]);
    free(s->site_index.slots);
    for (size_t i = 0; i < s->site_count; i++) free(s->sites[i].cells);
    free(s->sites);
    free(s->present);
    free(s->smin);
    free(s->smax);
    free(s->slast);
    free(s->seq.slot_of.slots);
    free(s->seq.free_slots);
    free(s->seq.slot_bytes);
    free(s->seq.slot_foot);
    free(s->seq.ops);
    free(s->seq.op_events);
    free(s);
}

void hh_scan_set_block_limit(hh_scan *s, uint32_t limit) {
    s->blocks.limit = limit < REC_MAX ? limit : REC_MAX;
}

uint32_t hh_scan_block_limit(const hh_scan *s) {
    return s->blocks.limit;
}

void hh_scan_set_flags(hh_scan *s, uint32_t flags, double unit_ns) {
    s->flags = flags;
    s->unit = unit_ns > 0 ? unit_ns : 1;
}

/* Grows an array of `size`-byte elements to hold index `need`; new entries are zero. */
static bool grow_array(void **array, size_t *cap, size_t need, size_t size) {
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

int hh_scan_set_thread(hh_scan *s, uint64_t index, double tid) {
    if (index > HH_MAX_THREAD_INDEX) return -1; /* as the TypeScript decoder: a corrupt index */
    if (index >= s->threads) {
        size_t cap = s->threads, cap2 = s->threads, cap3 = s->threads;
        if (!grow_array((void **)&s->thread_tid, &cap, index, sizeof(double)) ||
            !grow_array((void **)&s->thread_state, &cap2, index, sizeof(thread_state *)) ||
            !grow_array((void **)&s->thread_stack, &cap3, index, sizeof(double)))
            return -1;
        for (size_t i = s->threads; i < cap; i++) s->thread_tid[i] = -1;
        s->threads = cap;
    }
    /* One state per tid, shared by every index that names it. */
    uint64_t key; /* the double's bits (+1: 0 marks empty): one key per tid, whatever its size */
    memcpy(&key, &tid, sizeof key);
    key++;
    uint64_t k = table_get(&s->tid_index, key);
    if (k == NONE) {
        thread_state *st = calloc(1, sizeof *st);
        if (st == NULL || !grow_array((void **)&s->states, &s->state_cap, s->state_count,
                                      sizeof(thread_state *))) {
            free(st);
            return -1;
        }
        st->tid = tid;
        st->series_slot = -1;
        bool ok = true;
        k = s->state_count;
        table_set(&s->tid_index, key, k, &ok);
        if (!ok) {
            free(st);
            return -1;
        }
        s->states[s->state_count++] = st;
    }
    s->thread_tid[index] = tid;
    s->thread_state[index] = s->states[k];
    return 0;
}

void hh_scan_start_block(hh_scan *s) {
    s->time = 0;
    s->addr = 0;
    if (s->threads > 0) {
        uint64_t last = s->max_thread < s->threads ? s->max_thread : s->threads - 1;
        memset(s->thread_stack, 0, (last + 1) * sizeof(double));
    }
    s->thread = 0;
    s->thread_checked = false;
    s->max_thread = 0;
    s->block_events = 0;
    s->la_tag = SIZE_MAX;
}

const char *hh_scan_error(const hh_scan *s) {
    return s->error;
}
uint64_t hh_scan_block_events(const hh_scan *s) {
    return s->block_events;
}
uint64_t hh_scan_events(const hh_scan *s) {
    return s->all_events;
}

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

static void forget_ordinal(hh_scan *s, uint64_t ordinal) {
    if (ordinal + HH_ORDINAL_RING > s->ordinal)
        s->ring_rec[ordinal & ORDINAL_MASK] = 0;
    else
        old_forget(&s->old_rec, ordinal);
}

/* The block at `ptr` ends (its record r, or NO_REC when not known yet): it leaves the live set
 * and joins the free lists. */
static void end_block(hh_scan *s, uint64_t ptr, uint32_t r) {
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
    if (cls < HH_CLASSES) {
        uint64_t *c = &s->classes[cls * HH_CLASS_DEPTH];
        memmove(c + 1, c, (HH_CLASS_DEPTH - 1) * sizeof *c);
        c[0] = ptr;
    }
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
static bool over_limit_or_oom(hh_scan *s) {
    if (s->blocks.over_limit)
        FAIL("more than %u blocks live at once, the analyser's limit", (unsigned)s->blocks.limit);
    s->out_of_memory = true;
    FAIL("out of memory");
}

/* The block named by an `old` reference v: its address, and its record (NO_REC when named by
 * address: end_block looks it up). */
static bool resolve_ref(hh_scan *s, uint64_t v, uint64_t *out, uint32_t *rec) {
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
static bool new_block(hh_scan *s, uint64_t v, double class_bytes, double request, uint64_t *out) {
    unsigned cls = class_of(class_bytes);
    uint64_t ptr;
    /* Where ptr is in its class list when coded from it (entries before it are checked for a
     * duplicate); HH_CLASS_DEPTH: not coded from it, so search all of it. */
    unsigned at = HH_CLASS_DEPTH;
    if (v & 1) {
        int64_t a = (int64_t)s->addr + unzigzag((v - 1) >> 1);
        if (a < 0 || a > MAX_EXACT_INT) FAIL("address out of range");
        ptr = (uint64_t)a;
    } else if ((v & 3) == 0) {
        uint64_t k = v / 4;
        ptr = cls < HH_CLASSES && k < HH_CLASS_DEPTH ? s->classes[cls * HH_CLASS_DEPTH + k] : 0;
        if (ptr == 0)
            FAIL("reference to unknown free %llu of size class %u", (unsigned long long)k, cls);
        at = (unsigned)k; /* mostly 0: the chunk freed last */
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
        ptr = k < HH_RECENT ? s->recent[(s->recent_head - 1 - k) & (HH_RECENT - 1)] : 0;
        if (ptr == 0) FAIL("reference to unknown recent free %llu", (unsigned long long)k);
    }
    if (ptr != 0) {
        if (cls < HH_CLASSES) {
            /* The address leaves its class list: its first entry there (the coded one, unless an
             * earlier entry holds the same address too). */
            uint64_t *c = &s->classes[cls * HH_CLASS_DEPTH];
            unsigned i = 0;
            while (i < at && c[i] != ptr) i++;
            if (i < HH_CLASS_DEPTH) {
                memmove(c + i, c + i + 1, (HH_CLASS_DEPTH - 1 - i) * sizeof *c);
                c[HH_CLASS_DEPTH - 1] = 0;
            }
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

/* ---- The report's aggregates ---------------------------------------------------------- */

/* Before a cell's live bytes change, in peak epoch `epoch`: as touch() for a site. */
static inline void touch_cell_in(time_cell *c, uint64_t epoch) {
    if (c->epoch != epoch) {
        c->peak = c->live;
        c->epoch = epoch;
    }
}

static inline void touch_cell(const hh_scan *s, time_cell *c) {
    touch_cell_in(c, s->peak_epoch);
}

/* The timeline's buckets merge in pairs, as the series' do (its width stays points /
 * timeline_buckets of theirs, so a time's bucket is always its series bucket's, scaled); so do
 * the buckets live blocks were allocated in. */
static void timeline_merge(hh_scan *s) {
    for (uint32_t r = 0; r < s->blocks.rec_count; r++) s->blocks.recs[r].bucket /= 2;
    for (size_t i = 0; i < s->site_count; i++) {
        site *x = &s->sites[i];
        size_t n = 0;
        for (size_t k = 0; k < x->cell_count; k++) {
            time_cell c = x->cells[k];
            touch_cell(s, &c);
            c.bucket /= 2;
            time_cell *o = n > 0 ? &x->cells[n - 1] : NULL;
            if (o != NULL && o->bucket == c.bucket) {
                o->allocations += c.allocations;
                o->bytes += c.bytes;
                o->freed += c.freed;
                o->temporary += c.temporary;
                o->live += c.live;
                o->peak += c.peak; /* both touched: values at the same peak */
            } else {
                x->cells[n++] = c;
            }
        }
        x->cell_count = n;
    }
}

/* Site x's cell of bucket b, made when missing (cells stay ascending: times may go back a
 * little between threads); NULL out of memory, when the timeline stops (timeline_lost) and the
 * report's other figures go on. The slow path of timeline_cell. */
static __attribute__((noinline)) time_cell *timeline_find_cell(hh_scan *s, site *x, uint32_t b) {
    size_t n = x->cell_count;
    size_t at = n;
    while (at > 0 && x->cells[at - 1].bucket > b) at--;
    if (at > 0 && x->cells[at - 1].bucket == b) return &x->cells[at - 1];
    if (n == x->cell_cap) { /* most sites have few cells: start small */
        size_t cap = n > 0 ? 2 * n : 4;
        time_cell *grown = realloc(x->cells, cap * sizeof(time_cell));
        if (grown == NULL) {
            s->timeline_lost = true;
            s->timeline_buckets = 0;
            return NULL;
        }
        x->cells = grown;
        x->cell_cap = cap;
    }
    memmove(&x->cells[at + 1], &x->cells[at], (n - at) * sizeof(time_cell));
    x->cells[at] = (time_cell){.bucket = b, .epoch = s->peak_epoch};
    x->cell_count = n + 1;
    return &x->cells[at];
}

/* The fast path: most often the site's last cell (events come in time order). The pointer is
 * valid until the next cell is made. */
static inline time_cell *timeline_cell(hh_scan *s, site *x, uint32_t b) {
    size_t n = x->cell_count;
    if (n > 0 && x->cells[n - 1].bucket == b) return &x->cells[n - 1];
    return timeline_find_cell(s, x, b);
}

/* A block of site x, `weight` bytes, allocated now (in the current bucket); `epoch`: the peak
 * epoch before the allocation (a peak it makes counts it, as the site's does). */
static inline void timeline_alloc(hh_scan *s, site *x, double weight, uint64_t epoch) {
    time_cell *c = timeline_cell(s, x, s->timeline_bucket);
    if (c == NULL) return;
    touch_cell_in(c, epoch);
    c->allocations++;
    c->bytes += weight;
    c->live += weight;
}

/* A block of site x allocated in bucket `born` is freed now; `temporary`: by the very next
 * event of its thread. */
static inline void timeline_free(hh_scan *s, site *x, uint32_t born, double weight,
                                 bool temporary) {
    time_cell *c = timeline_cell(s, x, s->timeline_bucket);
    if (c == NULL) return;
    c->freed += weight;
    c->temporary += temporary ? 1 : 0;
    time_cell *a = born == c->bucket ? c : timeline_cell(s, x, born); /* exists: no new cell */
    if (a == NULL) return;
    touch_cell(s, a);
    a->live -= weight;
}

static void series_merge(hh_scan *s) {
    uint32_t n = s->points;
    for (uint32_t i = 0; i < n; i += 2) {
        uint32_t o = i / 2;
        bool a = s->present[i], b = s->present[i + 1];
        if (a && b) {
            s->smin[o] = fmin(s->smin[i], s->smin[i + 1]);
            s->smax[o] = fmax(s->smax[i], s->smax[i + 1]);
            s->slast[o] = s->slast[i + 1];
        } else if (a || b) {
            uint32_t from = a ? i : i + 1;
            s->smin[o] = s->smin[from];
            s->smax[o] = s->smax[from];
            s->slast[o] = s->slast[from];
        }
        s->present[o] = a || b;
    }
    memset(s->present + n / 2, 0, n / 2);
    if (s->timeline_buckets > 0) timeline_merge(s);
    for (uint32_t k = 0; k < s->tseries_count; k++) {
        thread_series *ts = &s->tseries[k];
        for (uint32_t i = 0; i < n; i += 2) {
            ts->counts[i / 2] = ts->counts[i] + ts->counts[i + 1];
            ts->sums[i / 2] = ts->sums[i] + ts->sums[i + 1];
        }
        memset(ts->counts + n / 2, 0, n / 2 * sizeof(double));
        memset(ts->sums + n / 2, 0, n / 2 * sizeof(double));
    }
    s->width *= 2;
    s->series_time = NAN; /* the bucket of a time changed */
}

/* The series thread t's allocations go to: its own, or the one of the threads beyond
 * HH_THREAD_SERIES_MAX. NULL when out of memory. */
static thread_series *thread_series_of(hh_scan *s, thread_state *t) {
    if (t->series_slot >= 0) return &s->tseries[t->series_slot];
    if (s->tseries == NULL) {
        s->tseries = calloc(HH_THREAD_SERIES_MAX + 1, sizeof(thread_series));
        if (s->tseries == NULL) return NULL;
    }
    uint32_t slot =
        s->tseries_count < HH_THREAD_SERIES_MAX ? s->tseries_count : HH_THREAD_SERIES_MAX;
    if (slot == s->tseries_count) {
        thread_series *ts = &s->tseries[slot];
        ts->counts = calloc(s->points, sizeof(double));
        ts->sums = calloc(s->points, sizeof(double));
        if (ts->counts == NULL || ts->sums == NULL) {
            free(ts->counts);
            free(ts->sums);
            *ts = (thread_series){0};
            return NULL;
        }
        ts->tid = slot == HH_THREAD_SERIES_MAX ? -1 : t->tid;
        s->tseries_count++;
    }
    t->series_slot = (int32_t)slot;
    return &s->tseries[slot];
}

/* After add_block: thread t allocated `weight` bytes in the heap series' current bucket. */
static bool thread_allocated(hh_scan *s, thread_state *t, double weight) {
    thread_series *ts = thread_series_of(s, t);
    if (ts == NULL) return false;
    ts->allocations++;
    ts->bytes += weight;
    ts->counts[s->series_bucket]++;
    ts->sums[s->series_bucket] += weight;
    return true;
}

static inline void series_add(hh_scan *s, double time, double value) {
    uint32_t i = s->series_bucket;
    if (time != s->series_time) { /* events share times (ticks are coarse): the last bucket */
        double t = time > 0 ? time : 0;
        double at = t / s->width;
        while (at >= s->points) {
            series_merge(s);
            at = t / s->width;
        }
        i = (uint32_t)at; /* floor: at is >= 0 */
        s->series_time = time;
        s->series_bucket = i;
        if (s->timeline_buckets > 0) {
            double tb = t / (s->width * s->points / s->timeline_buckets);
            s->timeline_bucket = tb < s->timeline_buckets ? (uint32_t)tb : s->timeline_buckets - 1;
        }
    }
    if (!s->present[i]) {
        s->present[i] = 1;
        s->smin[i] = s->smax[i] = s->slast[i] = value;
    } else {
        if (value < s->smin[i]) s->smin[i] = value;
        if (value > s->smax[i]) s->smax[i] = value;
        s->slast[i] = value;
    }
}

static inline unsigned size_bucket(double size) {
    if (size <= 0) return 0;
    if (size >= 18446744073709551615.0) return 64;
    uint64_t v = (uint64_t)size;
    return v == 0 ? 0 : 64 - (unsigned)__builtin_clzll(v);
}

static inline unsigned latency_bucket(double ns) {
    double f = floor(ns);
    uint64_t v = f > 0 ? (f < 1.8e19 ? (uint64_t)f : UINT64_MAX) : 0;
    if (v < HH_LATENCY_SUB) return (unsigned)v;
    unsigned p = 63 - (unsigned)__builtin_clzll(v); /* >= 4 */
    unsigned sub = (unsigned)(v >> (p - 4)) - HH_LATENCY_SUB;
    unsigned k = (p - 3) * HH_LATENCY_SUB + sub;
    return k < HH_LATENCY_BUCKETS ? k : HH_LATENCY_BUCKETS - 1;
}

static bool latency_add(hh_scan *s, int op, double ns) {
    latency_hist *h = s->latency[op];
    if (h == NULL && (h = s->latency[op] = calloc(1, sizeof *h)) == NULL) return false;
    h->counts[latency_bucket(ns)]++;
    h->count++;
    h->sum += ns;
    if (ns > h->max) h->max = ns;
    return true;
}

/*
 * The record of addr when it is the one the decoder touched last, else NO_REC: an event's
 * report step mostly concerns the block its decoder step just found or made, so it takes the
 * record without a lookup. The record is checked, not trusted (it may have been given back).
 */
static inline uint32_t touched_rec(const hh_scan *s, uint64_t addr) {
    uint32_t r = s->last_touched;
    return r < s->blocks.rec_count && s->blocks.recs[r].addr == addr ? r : NO_REC;
}

/* The record of the report's live block at ptr, or NO_REC. */
static inline uint32_t live_find(const hh_scan *s, double ptr) {
    if (!(ptr > 0 && ptr <= MAX_EXACT)) return NO_REC; /* never a key */
    uint64_t key = (uint64_t)ptr;
    uint32_t r = touched_rec(s, key);
    if (r == NO_REC) r = store_find(&s->blocks, key);
    return r != NO_REC && s->blocks.recs[r].site != NO_SITE ? r : NO_REC;
}

/* The index of a stack's site, created on first use (NONE when out of memory). */
static uint64_t site_of(hh_scan *s, double stack) {
    if (stack == s->last_stack && s->site_count > 0) return s->last_site; /* loops repeat sites */
    uint64_t key = (uint64_t)stack + 1;
    uint64_t k = table_get(&s->site_index, key);
    if (k != NONE) {
        s->last_stack = stack;
        s->last_site = k;
        return k;
    }
    if (!grow_array((void **)&s->sites, &s->site_cap, s->site_count, sizeof(site))) return NONE;
    bool ok = true;
    k = s->site_count;
    table_set(&s->site_index, key, k, &ok);
    if (!ok) return NONE;
    s->sites[s->site_count++] = (site){.stack = stack};
    s->last_stack = stack;
    s->last_site = k;
    return k;
}

/* Before a site's live bytes change: if the peak moved since, its value then is its value now. */
static inline void touch(const hh_scan *s, site *x) {
    if (x->epoch != s->peak_epoch) {
        x->peak_bytes = x->live_bytes;
        x->epoch = s->peak_epoch;
    }
}

/* The report lets go of the block of record e: its site and the totals forget it. */
static void forget_block(hh_scan *s, block_rec *e, const double *time) {
    site *x = &s->sites[e->site];
    double weight = e->weight;
    e->site = NO_SITE;
    s->live_blocks--;
    touch(s, x);
    x->live_blocks--;
    x->live_bytes -= weight;
    s->live_bytes -= weight;
    if (time != NULL) {
        series_add(s, *time, s->live_bytes);
        if (s->timeline_buckets > 0) {
            bool temporary = (uint32_t)(e - s->blocks.recs) == s->temporary_rec;
            if (temporary) s->temporary_rec = NO_REC;
            timeline_free(s, x, e->bucket, weight, temporary);
        }
    }
}

static void remove_block(hh_scan *s, double ptr, const double *time) {
    uint32_t r = live_find(s, ptr);
    if (r == NO_REC) {
        if (s->flags & HH_PF_ATTACHED)
            s->freed_before_attach++;
        else
            s->unknown_frees++;
        return;
    }
    block_rec *e = &s->blocks.recs[r];
    forget_block(s, e, time);
    if (e->ordinal == 0) store_release(&s->blocks, r);
}

static bool add_block(hh_scan *s, int op, double ptr, double size, double weight, double stack,
                      double time) {
    uint64_t key = (uint64_t)ptr; /* in (0, 2^53) */
    uint32_t r = touched_rec(s, key);
    if (r == NO_REC && (r = store_insert(&s->blocks, key)) == NO_REC) return false;
    block_rec *e = &s->blocks.recs[r];
    if (e->site != NO_SITE) { /* already live: should not happen */
        s->anomalies++;
        forget_block(s, e, NULL);
    }
    e->op = (uint8_t)op;
    uint64_t index = site_of(s, stack);
    if (index == NONE) return false;
    site *x = &s->sites[index];
    touch(s, x);
    x->allocations++;
    x->bytes += weight;
    x->live_blocks++;
    x->live_bytes += weight;
    e->site = (uint32_t)index;
    e->weight = weight;
    s->live_blocks++;
    s->live_bytes += weight;
    s->allocated_bytes += weight;
    unsigned b = size_bucket(size);
    s->size_counts[b]++;
    s->size_bytes[b] += size;
    uint64_t epoch = s->peak_epoch;
    if (s->live_bytes > s->peak_bytes) {
        s->peak_bytes = s->live_bytes;
        s->peak_time = time;
        s->peak_epoch++;
    }
    if ((double)s->live_blocks > s->peak_blocks) {
        s->peak_blocks = (double)s->live_blocks;
        s->peak_blocks_time = time;
    }
    series_add(s, time, s->live_bytes);
    if (s->timeline_buckets > 0) {
        e->bucket = (uint8_t)s->timeline_bucket;
        timeline_alloc(s, x, weight, epoch);
    }
    return true;
}

/* One event, as ReportBuilder.apply; `duration` and `sample_weight` are NaN when not recorded. */
/* (Inlined into the block loop: one call site, and its dozen arguments cost more to pass than
 * most events take.) */
static inline __attribute__((always_inline)) bool replay(hh_scan *s, int code, double time,
                                                         thread_state *t, double stack, double ptr,
                                                         double old_ptr, double size, double count,
                                                         double duration, double sample_weight,
                                                         bool split) {
    s->calls[code]++;
    if (time > s->last_time) s->last_time = time;
    if (code != HH_OP_REALLOC_DONE) {
        s->events++;
        if (duration == duration && !latency_add(s, code, duration)) return false;
        /* A temporary allocation: the thread's very next event frees it. */
        double previous = t->last_ptr;
        if (previous != 0) {
            t->last_ptr = 0;
            bool frees_it = (code == HH_OP_FREE && ptr == previous) ||
                            ((code == HH_OP_REALLOC || code == HH_OP_REALLOCARRAY) &&
                             old_ptr == previous && ptr == 0 && size == 0);
            uint32_t r = frees_it ? live_find(s, previous) : NO_REC;
            if (r != NO_REC) {
                s->temporary++;
                s->sites[s->blocks.recs[r].site].temporary++;
                s->temporary_rec = r; /* this event frees it: the timeline counts it then */
            }
        }
    }
    double bytes = code == HH_OP_CALLOC || code == HH_OP_REALLOCARRAY ? count * size : size;
    double weight = sample_weight == sample_weight ? sample_weight : bytes;
    switch (code) {
        case HH_OP_FREE:
            remove_block(s, ptr, &time);
            return true;
        case HH_OP_REALLOC:
        case HH_OP_REALLOCARRAY:
            if (ptr == 0 && bytes > 0) {
                s->failed_calls++;
                return true;
            }
            if (old_ptr != 0) remove_block(s, old_ptr, &time);
            if (ptr == 0 || weight == 0) return true;
            if (split) {
                t->pending = true;
                t->pending_op = (uint8_t)code;
                t->pending_ptr = ptr;
                t->pending_size = bytes;
                t->pending_weight = weight;
                t->pending_stack = stack;
                return true;
            }
            if (!add_block(s, code, ptr, bytes, weight, stack, time)) return false;
            if (!thread_allocated(s, t, weight)) return false;
            t->last_ptr = ptr;
            return true;
        case HH_OP_REALLOC_DONE:
            if (t->pending) {
                t->pending = false;
                if (!add_block(s, t->pending_op, t->pending_ptr, t->pending_size, t->pending_weight,
                               t->pending_stack, time) ||
                    !thread_allocated(s, t, t->pending_weight))
                    return false;
                t->last_ptr = t->pending_ptr;
            }
            return true;
        default:
            if (ptr == 0) {
                s->failed_calls++;
                return true;
            }
            if (!add_block(s, code, ptr, bytes, weight, stack, time)) return false;
            if (!thread_allocated(s, t, weight)) return false;
            t->last_ptr = ptr;
            return true;
    }
}

/* ---- The allocation sequence (recommend) ------------------------------------------------- */

#define PAGE_SIZE_ASSUMED 4096.0 /* valloc/pvalloc: the log does not record it (x86-64 Linux) */
#define DEFAULT_ALIGN 16.0
#define BLOCK_OVERHEAD 8.0
#define BLOCK_MIN 32.0

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
    double f = ceil((size + BLOCK_OVERHEAD) / DEFAULT_ALIGN) * DEFAULT_ALIGN;
    return f > BLOCK_MIN ? f : BLOCK_MIN;
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
static __attribute__((noinline)) bool seq_event(hh_scan *s, int op, thread_state *t, uint64_t ptr,
                                                uint64_t old_ptr, double size, double count,
                                                double align, bool split, double event) {
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

#define READ_WITH(fn, stream, var)                                     \
    do {                                                               \
        const char *why_ = fn(buf, &pos[stream], end[stream], &(var)); \
        if (why_ != NULL) {                                            \
            snprintf(s->error, sizeof s->error, "%s", why_);           \
            return HH_SCAN_ERROR;                                      \
        }                                                              \
    } while (0)
#define READ(stream, var) READ_WITH(varint_exact, stream, var)
#define READ_NUM(var) READ_WITH(varint_num, HH_STREAM_NUM, var)

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
 * long before: they depend only on the addr stream. So a lookahead parses the tag and addr
 * streams up to LOOKAHEAD_FAR events ahead and prefetches the ring entry of each free; by the time
 * the events are LOOKAHEAD_NEAR ahead the entry is cached, and its record is prefetched. It
 * changes nothing but the cache: it stops at anything unusual (a record that is not an event,
 * damage), and the events' own decoding checks everything as before.
 */
static inline void lookahead(hh_scan *s, const uint8_t *buf, const size_t end[HH_STREAM_COUNT]) {
    uint64_t n = s->la_events, goal = s->block_events + LOOKAHEAD_FAR;
    if (n + LOOKAHEAD_STRIDE <= goal && !s->la_stopped) {
        size_t t = s->la_tag, a = s->la_addr;
        int64_t prev = s->la_prev_ref;
        const size_t tag_end = end[HH_STREAM_TAG], addr_end = end[HH_STREAM_ADDR];
        do {
            uint8_t tag = t < tag_end ? buf[t] : 0;
            int op = tag & HH_EVT_OP_MASK;
            if ((tag & HH_TAG_EVENT) == 0 || op > HH_OP_REALLOC_DONE) {
                s->la_stopped = true;
                break;
            }
            uint64_t v, ordinal = 0;
            if ((HH_OPS_ENDING >> op) & 1u) {
                if (varint_exact(buf, &a, addr_end, &v) != NULL) {
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
            if (((HH_OPS_BEGINNING >> op) & 1u) && varint_exact(buf, &a, addr_end, &v) != NULL) {
                s->la_stopped = true;
                break;
            }
            t++;
            s->la_ordinal[n & (LOOKAHEAD - 1)] = ordinal;
            n++;
        } while (n < goal);
        s->la_tag = t;
        s->la_addr = a;
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
    bool old_pending = false; /* an OLD read whose block is not ended yet */
    const bool aligned = ((HH_OPS_ALIGNED >> op) & 1u) != 0;
#define GET_NUM(var) READ_NUM(var)
#define GET_ALIGN(var) READ_NUM(var)
#define GET_OLD(var)                                \
    do {                                            \
        READ(HH_STREAM_ADDR, v);                    \
        CHECK(resolve_ref(s, v, &(var), &old_rec)); \
        old_pending = true;                         \
    } while (0)
    /* A failed call (new block 0 for bytes > 0) keeps the old block. */
#define GET_NEW(var)                                                                         \
    do {                                                                                     \
        double bytes_ = f->count * f->size;                                                  \
        READ(HH_STREAM_ADDR, v);                                                             \
        if (old_pending) {                                                                   \
            bool failed_ =                                                                   \
                bytes_ != 0 && (v & 1) && (int64_t)f->old + unzigzag((v - 1) >> 1) == 0;     \
            if (!failed_ && f->old != 0) end_block(s, f->old, old_rec);                      \
            old_pending = false;                                                             \
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
    if (old_pending) { /* free: the block it names ends */
        if (f->old != 0) end_block(s, f->old, old_rec);
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
        s->la_addr = pos[HH_STREAM_ADDR];
        s->la_prev_ref = s->prev_ref;
        s->la_events = s->block_events;
        s->la_stopped = false;
    }
    const bool sequence = s->seq.on;
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
            *out++ = (double)i;
            *out++ = c->bucket;
            *out++ = c->allocations;
            *out++ = c->bytes;
            *out++ = c->freed;
            *out++ = c->temporary;
            *out++ = c->live;
            *out++ = c->peak;
        }
    }
}
