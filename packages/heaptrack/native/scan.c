/*
 * scan.c — the report's pass over a heaplog in C (scan.h says what and why).
 *
 * Read top-down: tunables; the hash table every lookup uses; the decoder's address state
 * (FORMAT.md, "Addresses"); the report's aggregates (heap series, histograms, sites, live
 * blocks); the replay of one event (the port of ReportBuilder.apply); the block loop.
 */
#include "scan.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

/* ---- Tunables and format constants ------------------------------------------------------ */

#define RECENT 64               /* FORMAT.md: the 64 addresses freed last */
#define CLASSES 64              /* size classes 1..63 (0 unused) */
#define CLASS_DEPTH 16          /* the 16 addresses of a class freed last */
#define NO_CLASS 0xffu          /* requests over 1008 bytes and aligned calls */
#define ORDINAL_RING (1u << 16) /* live ordinals kept in a direct-mapped ring, older in a table */
#define ORDINAL_MASK (ORDINAL_RING - 1)
#define TABLE_MIN 1024u

#define EVT_THREAD 0x10
#define EVT_STACK 0x20
#define EVT_SPLIT 0x40
#define PF_TIMING 2u
#define PF_SAMPLING 4u
#define PF_FREE_STACKS 16u

#define NONE UINT64_MAX /* "no value" in the tables */
/* FORMAT.md: values of the time, stack and addr streams and the addresses they code stay below
 * 2^53, where a double (the TypeScript decoder's number) is exact, and addresses are not
 * negative; others are damage. */
#define MAX_EXACT 9007199254740991.0
#define MAX_EXACT_INT 9007199254740991LL

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

/* ---- The blocks table: every address the decoder or the report holds live -------------- */

/*
 * One entry per address for both sides, so that an event's decoder step and report step touch
 * one cache line: the decoder's address state (the block's ordinal and size class, from its
 * `new` reference until the `old` reference that ends it) and the report's live block (weight
 * and site, from the allocation as the allocator saw it until its free). They differ for a
 * moved realloc between the realloc and its realloc_done, for unsampled blocks and for
 * anomalies, so each side has its own "live" mark; an entry goes when neither holds it.
 */
#define NO_SITE UINT32_MAX

typedef struct block_entry {
    uint64_t addr;  /* 0: empty slot */
    uint64_t coded; /* decoder: ordinal << 8 | size class; 0 when it does not hold the block */
    double weight;  /* report: the bytes the block stands for */
    uint32_t site;  /* report: the site's index; NO_SITE when it does not hold the block */
    uint32_t unused;
} block_entry;

typedef struct block_table {
    block_entry *slots;
    uint64_t mask;
    unsigned shift;
    size_t size;
} block_table;

static inline uint64_t blocks_home(const block_table *t, uint64_t addr) {
    return table_hash(addr, t->shift);
}

static bool blocks_init(block_table *t, size_t capacity) {
    size_t n = table_slots_for(capacity);
    t->slots = calloc(n, sizeof(block_entry));
    if (t->slots == NULL) return false;
    t->mask = n - 1;
    t->shift = 64 - (unsigned)__builtin_ctzll(n);
    t->size = 0;
    return true;
}

/* The entry of addr, or NULL. */
static inline block_entry *blocks_find(const block_table *t, uint64_t addr) {
    if (addr == 0) return NULL;
    for (uint64_t i = blocks_home(t, addr);; i = (i + 1) & t->mask) {
        block_entry *e = &t->slots[i];
        if (e->addr == addr) return e;
        if (e->addr == 0) return NULL;
    }
}

/* The entry of addr (non-zero), new (held by neither side) when there was none; NULL when out
 * of memory. Entries found before may move: use the returned one. */
static block_entry *blocks_insert(block_table *t, uint64_t addr) {
    if ((t->size + 1) * 2 > t->mask + 1) {
        block_table bigger;
        if (!blocks_init(&bigger, t->mask + 1)) return NULL;
        for (uint64_t i = 0; i <= t->mask; i++) {
            block_entry *e = &t->slots[i];
            if (e->addr == 0) continue;
            uint64_t j = blocks_home(&bigger, e->addr);
            while (bigger.slots[j].addr != 0) j = (j + 1) & bigger.mask;
            bigger.slots[j] = *e;
        }
        bigger.size = t->size;
        free(t->slots);
        *t = bigger;
    }
    for (uint64_t i = blocks_home(t, addr);; i = (i + 1) & t->mask) {
        block_entry *e = &t->slots[i];
        if (e->addr == addr) return e;
        if (e->addr == 0) {
            *e = (block_entry){.addr = addr, .site = NO_SITE};
            t->size++;
            return e;
        }
    }
}

/* Removes an entry (backward shift: later entries of its probe run move into the hole). */
static void blocks_remove(block_table *t, block_entry *e) {
    uint64_t hole = (uint64_t)(e - t->slots);
    for (uint64_t j = (hole + 1) & t->mask; t->slots[j].addr != 0; j = (j + 1) & t->mask) {
        if (!hh_probe_may_move(hole, j, blocks_home(t, t->slots[j].addr))) continue;
        t->slots[hole] = t->slots[j];
        hole = j;
    }
    t->slots[hole].addr = 0;
    t->size--;
}

/* ---- Scanner state ------------------------------------------------------------------------ */

typedef struct latency_hist {
    double counts[HH_LATENCY_BUCKETS];
    double count, max, sum;
} latency_hist;

typedef struct site {
    double stack, allocations, bytes, live_blocks, live_bytes, peak_bytes, temporary;
    uint64_t epoch; /* the peak epoch peak_bytes was taken in */
} site;

/* Per tid: the block its previous event allocated (temporary allocations), and a moved
 * realloc's new block waiting for its realloc_done. */
typedef struct thread_state {
    double last_ptr;
    bool pending;
    double pending_ptr, pending_size, pending_weight, pending_stack;
} thread_state;

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
    double *thread_stack; /* by thread index */
    uint64_t max_thread;  /* highest index touched in this block */

    /* Address state (persists) */
    uint64_t ordinal;
    block_table blocks;    /* both sides' live blocks by address */
    uint64_t last_touched; /* slot of the entry the decoder touched last (see touched_entry) */
    uint64_t *ring_ptr;    /* ordinal -> address for the last ORDINAL_RING ordinals */
    u64_table old_ptr;     /* ordinal -> address for older live ones */
    uint64_t recent[RECENT];
    unsigned recent_head;
    uint64_t classes[CLASSES * CLASS_DEPTH];
    uint64_t bump_addr;
    double bump_bytes;
    int64_t prev_ref;

    /* The report's aggregates */
    double calls[HH_OPS];
    double events, last_time;
    latency_hist *latency[HH_OPS];
    size_t live_blocks;   /* blocks the report holds live */
    u64_table site_index; /* stack + 1 -> site index */
    site *sites;
    double last_stack; /* the last stack looked up, and its site */
    uint64_t last_site;
    size_t site_count, site_cap;
    double live_bytes, allocated_bytes, peak_bytes, peak_time;
    uint64_t peak_epoch;
    double peak_blocks, peak_blocks_time;
    double temporary, unknown_frees, failed_calls;
    double size_counts[HH_SIZE_BUCKETS], size_bytes[HH_SIZE_BUCKETS];
    /* Heap series (src/report/series.ts) */
    uint32_t points;
    double width;
    uint8_t *present;
    double *smin, *smax, *slast;

    uint64_t block_events, all_events;
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
    s->present = calloc(points, 1);
    s->smin = calloc(points, sizeof(double));
    s->smax = calloc(points, sizeof(double));
    s->slast = calloc(points, sizeof(double));
    s->ring_ptr = calloc(ORDINAL_RING, sizeof(uint64_t));
    bool ok = s->present && s->smin && s->smax && s->slast && s->ring_ptr;
    ok = ok && table_init(&s->tid_index, 16) && blocks_init(&s->blocks, 4096);
    ok = ok && table_init(&s->old_ptr, 16);
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
    free(s->thread_stack);
    for (size_t i = 0; i < s->state_count; i++) free(s->states[i]);
    free(s->states);
    free(s->tid_index.slots);
    free(s->blocks.slots);
    free(s->ring_ptr);
    free(s->old_ptr.slots);
    for (int i = 0; i < HH_OPS; i++) free(s->latency[i]);
    free(s->site_index.slots);
    free(s->sites);
    free(s->present);
    free(s->smin);
    free(s->smax);
    free(s->slast);
    free(s);
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
    if (index > 0xffffff) return -1; /* as the TypeScript decoder: a corrupt index */
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
    s->max_thread = 0;
    s->block_events = 0;
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
    return bytes >= 0 && bytes <= 1008 ? (unsigned)((bytes + 8 + 15) / 16) : NO_CLASS;
}

/* The address of live block `ordinal`, or 0 when none. */
static uint64_t ptr_of(const hh_scan *s, int64_t ordinal) {
    if (ordinal < 1 || (uint64_t)ordinal > s->ordinal) return 0;
    if ((uint64_t)ordinal + ORDINAL_RING > s->ordinal) return s->ring_ptr[ordinal & ORDINAL_MASK];
    uint64_t p = table_get(&s->old_ptr, (uint64_t)ordinal);
    return p == NONE ? 0 : p;
}

static void forget_ordinal(hh_scan *s, uint64_t ordinal) {
    if (ordinal + ORDINAL_RING > s->ordinal)
        s->ring_ptr[ordinal & ORDINAL_MASK] = 0;
    else
        table_delete(&s->old_ptr, ordinal);
}

/* The block at `ptr` ends: it leaves the live set and joins the free lists. */
static void end_block(hh_scan *s, uint64_t ptr) {
    block_entry *e = blocks_find(&s->blocks, ptr);
    unsigned cls = NO_CLASS;
    if (e != NULL) s->last_touched = (uint64_t)(e - s->blocks.slots);
    if (e != NULL && e->coded != 0) {
        forget_ordinal(s, e->coded >> 8);
        cls = (unsigned)(e->coded & 0xff);
        e->coded = 0;
        if (e->site == NO_SITE) blocks_remove(&s->blocks, e);
    }
    s->recent[s->recent_head] = ptr;
    s->recent_head = (s->recent_head + 1) & (RECENT - 1);
    if (cls < CLASSES) {
        uint64_t *c = &s->classes[cls * CLASS_DEPTH];
        memmove(c + 1, c, (CLASS_DEPTH - 1) * sizeof *c);
        c[0] = ptr;
    }
}

#define FAIL(...)                                         \
    do {                                                  \
        snprintf(s->error, sizeof s->error, __VA_ARGS__); \
        return false;                                     \
    } while (0)

/* The block named by an `old` reference v. */
static bool resolve_ref(hh_scan *s, uint64_t v, uint64_t *out) {
    uint64_t ptr;
    if ((v & 1) == 0) {
        int64_t ordinal = s->prev_ref + 1 + unzigzag(v >> 1);
        ptr = ptr_of(s, ordinal);
        if (ptr == 0) FAIL("reference to unknown block #%lld", (long long)ordinal);
        s->prev_ref = ordinal;
    } else {
        int64_t a = (int64_t)s->addr + unzigzag((v - 1) >> 1);
        if (a < 0 || a > MAX_EXACT_INT) FAIL("address out of range");
        ptr = (uint64_t)a;
    }
    s->addr = ptr;
    *out = ptr;
    return true;
}

/* A block that begins, from its `new` reference v. */
static bool new_block(hh_scan *s, uint64_t v, double class_bytes, double request, uint64_t *out) {
    unsigned cls = class_of(class_bytes);
    uint64_t ptr;
    if (v & 1) {
        int64_t a = (int64_t)s->addr + unzigzag((v - 1) >> 1);
        if (a < 0 || a > MAX_EXACT_INT) FAIL("address out of range");
        ptr = (uint64_t)a;
    } else if ((v & 3) == 0) {
        uint64_t k = v / 4;
        ptr = cls < CLASSES && k < CLASS_DEPTH ? s->classes[cls * CLASS_DEPTH + k] : 0;
        if (ptr == 0)
            FAIL("reference to unknown free %llu of size class %u", (unsigned long long)k, cls);
    } else if (v == 2) {
        if (s->bump_addr == 0) FAIL("reference to the block after none");
        double chunk = floor((s->bump_bytes + 8 + 15) / 16) * 16;
        double next = (double)s->bump_addr + fmax(32, chunk);
        if (!(next >= 0 && next <= MAX_EXACT)) FAIL("address out of range");
        ptr = (uint64_t)next;
    } else {
        uint64_t k = (v - 2) / 4 - 1;
        ptr = k < RECENT ? s->recent[(s->recent_head - 1 - k) & (RECENT - 1)] : 0;
        if (ptr == 0) FAIL("reference to unknown recent free %llu", (unsigned long long)k);
    }
    if (ptr != 0) {
        if (cls < CLASSES) {
            uint64_t *c = &s->classes[cls * CLASS_DEPTH];
            for (int i = 0; i < CLASS_DEPTH; i++) {
                if (c[i] == ptr) {
                    memmove(c + i, c + i + 1, (CLASS_DEPTH - 1 - i) * sizeof *c);
                    c[CLASS_DEPTH - 1] = 0;
                    break;
                }
            }
        }
        uint64_t ordinal = ++s->ordinal;
        /* The ring slot of the new ordinal held the one ORDINAL_RING before: keep it if live. */
        uint64_t slot = ordinal & ORDINAL_MASK;
        uint64_t evicted = s->ring_ptr[slot];
        bool ok = true;
        if (evicted != 0) table_set(&s->old_ptr, ordinal - ORDINAL_RING, evicted, &ok);
        s->ring_ptr[slot] = ptr;
        block_entry *e = ok ? blocks_insert(&s->blocks, ptr) : NULL;
        if (e == NULL) {
            s->out_of_memory = true;
            FAIL("out of memory");
        }
        if (e->coded != 0) forget_ordinal(s, e->coded >> 8);
        e->coded = ordinal << 8 | cls;
        s->last_touched = (uint64_t)(e - s->blocks.slots);
        s->bump_addr = ptr;
        s->bump_bytes = request;
    }
    s->addr = ptr;
    *out = ptr;
    return true;
}

/* ---- The report's aggregates ---------------------------------------------------------- */

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
    s->width *= 2;
}

static inline void series_add(hh_scan *s, double time, double value) {
    double t = time > 0 ? time : 0;
    double at = t / s->width;
    while (at >= s->points) {
        series_merge(s);
        at = t / s->width;
    }
    uint32_t i = (uint32_t)at; /* floor: at is >= 0 */
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
 * The entry of addr when it is the one the decoder touched last, else NULL: an event's report
 * step mostly concerns the block its decoder step just found or made, so it takes the entry
 * without a second probe. The slot is checked, not trusted (a removal may have moved entries).
 */
static inline block_entry *touched_entry(const hh_scan *s, uint64_t addr) {
    uint64_t i = s->last_touched;
    return i <= s->blocks.mask && s->blocks.slots[i].addr == addr ? &s->blocks.slots[i] : NULL;
}

/* The report's live block at ptr, or NULL. */
static inline block_entry *live_find(const hh_scan *s, double ptr) {
    if (!(ptr > 0 && ptr <= MAX_EXACT)) return NULL; /* never a key */
    uint64_t key = (uint64_t)ptr;
    block_entry *e = touched_entry(s, key);
    if (e == NULL) e = blocks_find(&s->blocks, key);
    return e != NULL && e->site != NO_SITE ? e : NULL;
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

/* The report lets go of the block of entry e: its site and the totals forget it. */
static void forget_block(hh_scan *s, block_entry *e, const double *time) {
    site *x = &s->sites[e->site];
    double weight = e->weight;
    e->site = NO_SITE;
    s->live_blocks--;
    touch(s, x);
    x->live_blocks--;
    x->live_bytes -= weight;
    s->live_bytes -= weight;
    if (time != NULL) series_add(s, *time, s->live_bytes);
}

static void remove_block(hh_scan *s, double ptr, const double *time) {
    block_entry *e = live_find(s, ptr);
    if (e == NULL) {
        s->unknown_frees++;
        return;
    }
    forget_block(s, e, time);
    if (e->coded == 0) blocks_remove(&s->blocks, e);
}

static bool add_block(hh_scan *s, double ptr, double size, double weight, double stack,
                      double time) {
    uint64_t key = (uint64_t)ptr; /* in (0, 2^53) */
    block_entry *e = touched_entry(s, key);
    if (e == NULL && (e = blocks_insert(&s->blocks, key)) == NULL) return false;
    if (e->site != NO_SITE) forget_block(s, e, NULL); /* already live: should not happen */
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
    return true;
}

/* One event, as ReportBuilder.apply; `duration` and `sample_weight` are NaN when not recorded. */
static bool replay(hh_scan *s, int code, double time, thread_state *t, double stack, double ptr,
                   double old_ptr, double size, double count, double duration, double sample_weight,
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
            block_entry *e = frees_it ? live_find(s, previous) : NULL;
            if (e != NULL) {
                s->temporary++;
                s->sites[e->site].temporary++;
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
                t->pending_ptr = ptr;
                t->pending_size = bytes;
                t->pending_weight = weight;
                t->pending_stack = stack;
                return true;
            }
            if (!add_block(s, ptr, bytes, weight, stack, time)) return false;
            t->last_ptr = ptr;
            return true;
        case HH_OP_REALLOC_DONE:
            if (t->pending) {
                t->pending = false;
                if (!add_block(s, t->pending_ptr, t->pending_size, t->pending_weight,
                               t->pending_stack, time))
                    return false;
                t->last_ptr = t->pending_ptr;
            }
            return true;
        default:
            if (ptr == 0) {
                s->failed_calls++;
                return true;
            }
            if (!add_block(s, ptr, bytes, weight, stack, time)) return false;
            t->last_ptr = ptr;
            return true;
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
static inline const char *varint_exact(const uint8_t *b, size_t *p, size_t end, uint64_t *v) {
    size_t i = *p;
    if (i < end && b[i] < 0x80) {
        *v = b[i];
        *p = i + 1;
        return NULL;
    }
    uint64_t result = 0;
    bool overflow = false; /* bits past the 64th: far out of range */
    for (unsigned shift = 0; shift < 70; shift += 7) {
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
    size_t i = *p;
    if (i < end && b[i] < 0x80) {
        *v = b[i];
        *p = i + 1;
        return NULL;
    }
    double result = 0, mul = 1;
    for (int k = 0; k < 10; k++) {
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

#define CHECK(ok)                                                               \
    do {                                                                        \
        if (!(ok)) return s->out_of_memory ? HH_SCAN_NO_MEMORY : HH_SCAN_ERROR; \
    } while (0)

int hh_scan_run(hh_scan *s, const uint8_t *buf, size_t pos[HH_STREAMS],
                const size_t end[HH_STREAMS]) {
    s->error[0] = '\0';
    while (pos[HH_STREAM_TAG] < end[HH_STREAM_TAG]) {
        uint8_t tag = buf[pos[HH_STREAM_TAG]];
        if ((tag & 0x80) == 0) return HH_SCAN_RECORD;
        pos[HH_STREAM_TAG]++;
        int op = tag & 0x0f;
        if (op > HH_OP_REALLOC_DONE) {
            snprintf(s->error, sizeof s->error, "unknown operation %d", op);
            return HH_SCAN_ERROR;
        }
        uint64_t v, w;
        READ(HH_STREAM_TIME, v);
        s->time += (double)unzigzag(v) * s->unit;
        if (tag & EVT_THREAD) READ(HH_STREAM_STACK, s->thread);
        uint64_t thread = s->thread;
        if (thread >= s->threads || s->thread_tid[thread] < 0) {
            snprintf(s->error, sizeof s->error, "event of undeclared thread index %llu",
                     (unsigned long long)thread);
            return HH_SCAN_ERROR;
        }
        if (thread > s->max_thread) s->max_thread = thread;
        bool carries_stack =
            op != HH_OP_REALLOC_DONE && (op != HH_OP_FREE || (s->flags & PF_FREE_STACKS) != 0);
        double stack = carries_stack ? s->thread_stack[thread] : 0;
        if (tag & EVT_STACK) {
            READ(HH_STREAM_STACK, v);
            stack = (double)v;
        }
        if (carries_stack) s->thread_stack[thread] = stack;
        uint64_t ptr = 0, old_ptr = 0;
        double size = 0, count = 1, align;
        switch (op) {
            case HH_OP_MALLOC:
            case HH_OP_VALLOC:
            case HH_OP_PVALLOC:
                READ_NUM(size);
                READ(HH_STREAM_ADDR, v);
                CHECK(new_block(s, v, size, size, &ptr));
                break;
            case HH_OP_CALLOC: {
                READ_NUM(count);
                READ_NUM(size);
                double bytes = count * size;
                READ(HH_STREAM_ADDR, v);
                CHECK(new_block(s, v, bytes, bytes, &ptr));
                break;
            }
            case HH_OP_REALLOC:
            case HH_OP_REALLOCARRAY: {
                if (op == HH_OP_REALLOCARRAY) READ_NUM(count);
                READ_NUM(size);
                double bytes = op == HH_OP_REALLOCARRAY ? count * size : size;
                READ(HH_STREAM_ADDR, v);
                CHECK(resolve_ref(s, v, &old_ptr));
                READ(HH_STREAM_ADDR, w);
                /* A failed call (new block 0 for a size > 0) keeps the old block. */
                bool failed =
                    bytes != 0 && (w & 1) && (int64_t)old_ptr + unzigzag((w - 1) >> 1) == 0;
                if (!failed && old_ptr != 0) end_block(s, old_ptr);
                CHECK(new_block(s, w, bytes, bytes, &ptr));
                break;
            }
            case HH_OP_FREE:
                READ(HH_STREAM_ADDR, v);
                CHECK(resolve_ref(s, v, &ptr));
                if (ptr != 0) end_block(s, ptr);
                break;
            case HH_OP_POSIX_MEMALIGN:
            case HH_OP_MEMALIGN:
            case HH_OP_ALIGNED_ALLOC:
                READ_NUM(align); /* not part of the report */
                READ_NUM(size);
                READ(HH_STREAM_ADDR, v);
                CHECK(new_block(s, v, 9007199254740991.0, size, &ptr));
                break;
            default: /* realloc_done */
                break;
        }
        double duration = NAN, weight = NAN;
        if (op != HH_OP_REALLOC_DONE) {
            if (s->flags & PF_TIMING) READ_NUM(duration);
            if ((s->flags & PF_SAMPLING) && op != HH_OP_FREE) READ_NUM(weight);
        }
        if (!replay(s, op, s->time, s->thread_state[thread], stack, (double)ptr, (double)old_ptr,
                    size, count, duration, weight, (tag & EVT_SPLIT) != 0)) {
            s->out_of_memory = true;
            snprintf(s->error, sizeof s->error, "out of memory");
            return HH_SCAN_NO_MEMORY;
        }
        s->block_events++;
        s->all_events++;
    }
    return HH_SCAN_BLOCK_END;
}

/* ---- Results ------------------------------------------------------------------------ */

int hh_scan_live_block(const hh_scan *s, double ptr, double *weight, double *stack) {
    const block_entry *e = live_find(s, ptr);
    if (e == NULL) return 0;
    *weight = e->weight;
    *stack = s->sites[e->site].stack;
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
    memcpy(o->size_counts, s->size_counts, sizeof o->size_counts);
    memcpy(o->size_bytes, s->size_bytes, sizeof o->size_bytes);
}

void hh_scan_get_latency(const hh_scan *s, int op, hh_scan_latency *o) {
    const latency_hist *h = op >= 0 && op < HH_OPS ? s->latency[op] : NULL;
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

size_t hh_scan_site_count(const hh_scan *s) {
    return s->site_count;
}

void hh_scan_get_sites(hh_scan *s, double *out) {
    for (size_t i = 0; i < s->site_count; i++) {
        site *x = &s->sites[i];
        touch(s, x);
        double *o = out + i * HH_SITE_FIELDS;
        o[0] = x->stack;
        o[1] = x->allocations;
        o[2] = x->bytes;
        o[3] = x->live_blocks;
        o[4] = x->live_bytes;
        o[5] = x->peak_bytes;
        o[6] = x->temporary;
    }
}

size_t hh_scan_live_count(const hh_scan *s) {
    return s->live_blocks;
}

void hh_scan_get_live(const hh_scan *s, double *out) {
    size_t n = 0;
    for (uint64_t i = 0; i <= s->blocks.mask; i++) {
        const block_entry *e = &s->blocks.slots[i];
        if (e->addr == 0 || e->site == NO_SITE) continue;
        out[n++] = (double)e->addr;
        out[n++] = e->weight;
        out[n++] = e->site;
    }
}
