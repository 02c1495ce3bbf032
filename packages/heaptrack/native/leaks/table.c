/*
 * table.c — the live-block table: address -> size, type, root flag (internal.h's hh_entry).
 * 64 shards, each a spin lock and an mmap'd table with linear probing and backward-shift
 * deletion (probe.h): no tombstones, so a program that allocates and frees forever keeps short
 * probes and never rebuilds its table. Nothing here allocates through malloc.
 *
 * Who fills it (leaks.h, hh_leaks_on): the hooks, after an allocation returns and before a
 * block is released (hh_leaks_insert, hh_leaks_remove); or, deferred, the drain thread from
 * the event records it reads off the ring (hh_leaks_apply, hh_leaks_prefetch). These run once
 * per allocation call: keep them short, and keep them in this file with the probing they call.
 *
 * Owns: the shards and their locks. May call: track/trace.h (records, spin locks), probe.h.
 */
#include <errno.h>

#include "leaks/internal.h"
#include "probe.h"
#include "track/fork.h"

#define HH_SHARD_BITS 6
#define HH_SHARDS (1u << HH_SHARD_BITS)
#define HH_SHARD_INIT 1024u
/* A heap page's blocks go to a window of 256 slots (hh_slot_of). Where the windows of two
 * pages overlap, one page's blocks fill the gaps between the other's and probe runs grow long
 * (README, "How the automatic check works"). An insert that probes more than
 * HH_CROWDED_PROBES slots has its shard doubled at the next insert, up to
 * HH_CROWDED_SLOTS_PER_BLOCK slots per live block (then only the load factor counts). */
#define HH_CROWDED_PROBES 16
#define HH_CROWDED_SLOTS_PER_BLOCK 16

typedef struct hh_shard {
    _Atomic int lock;
    bool crowded; /* an insert probed long: grow at the next one */
    hh_entry *e;
    uint64_t cap, live;
    char pad[32];
} hh_shard;

static hh_shard g_shards[HH_SHARDS];

/* A shard's rank in fork.c's order (track/fork.h) is HH_RANK_LEAK_SHARD + its index, so that
 * hh_table_lock, which takes them all in index order, keeps it: checked in a debug build. */
static inline void hh_shard_lock(hh_shard *s) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HH_RANK_LEAK_SHARD + (unsigned)(s - g_shards),
                               "a leak table shard lock (leaks/table.c)");
    hh_spin_lock(&s->lock);
}

static inline void hh_shard_unlock(hh_shard *s) {
    hh_spin_unlock(&s->lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HH_RANK_LEAK_SHARD + (unsigned)(s - g_shards));
}
static _Atomic uint64_t g_table_lost; /* entries that found no room (mmap failed) */

/* Blocks of one heap page go to one shard and to neighbouring slots (a hash of the page plus
 * the block's offset in it): allocations that follow each other in memory touch the same few
 * cache lines and pages of the table, where a hash of the whole address would miss the cache
 * (and the TLB) on nearly every insert. */
static inline uint64_t hh_hash(uint64_t a) {
    return (a >> 12) * 0x9e3779b97f4a7c15ull;
}

static inline hh_shard *hh_shard_of(uint64_t h) {
    return &g_shards[h >> (64 - HH_SHARD_BITS)];
}

static inline uint64_t hh_slot_of(uint64_t h, uint64_t a, uint64_t cap) {
    return ((h >> 20) + ((a >> 4) & 255)) & (cap - 1);
}

/* Room for one more entry (at most 3/4 full after it); false when the table cannot grow.
 * Lock held. */
static bool hh_shard_room(hh_shard *s) {
    if (s->e != NULL && !s->crowded && (s->live + 1) * 4 <= s->cap * 3) return true;
    uint64_t cap = HH_SHARD_INIT;
    while ((s->live + 1) * 2 > cap) cap *= 2;
    if (s->crowded && cap < s->cap * 2) cap = s->cap * 2;
    s->crowded = false;
    int saved = errno;
    hh_entry *e = hh_map(cap * sizeof *e);
    errno = saved;
    if (e == NULL) return s->e != NULL && s->live + 1 < s->cap;
    for (uint64_t i = 0; s->e != NULL && i < s->cap; i++) {
        uint64_t a = s->e[i].addr;
        if (a == 0) continue;
        uint64_t j = hh_slot_of(hh_hash(a), a, cap);
        while (e[j].addr != 0) j = (j + 1) & (cap - 1);
        e[j] = s->e[i];
    }
    if (s->e != NULL) hh_sys_munmap(s->e, s->cap * sizeof *s->e);
    s->e = e;
    s->cap = cap;
    HH_LEAKS_ASSERT((cap & (cap - 1)) == 0 && (s->live + 1) * 2 <= cap);
    return true;
}

static void hh_put(uint64_t a, uint64_t meta) {
    uint64_t h = hh_hash(a);
    hh_shard *s = hh_shard_of(h);
    hh_shard_lock(s);
    if (!hh_shard_room(s)) {
        atomic_fetch_add(&g_table_lost, 1);
        hh_shard_unlock(s);
        return;
    }
    uint64_t mask = s->cap - 1, i = hh_slot_of(h, a, s->cap);
    for (unsigned probes = 1;; i = (i + 1) & mask, probes++) {
        HH_LEAKS_ASSERT(probes <= s->cap); /* hh_shard_room left an empty slot */
        uint64_t v = s->e[i].addr;
        if (v == a) {
            s->e[i].meta = meta; /* released without us seeing it, and handed out again */
            break;
        }
        if (v == 0) {
            s->e[i].addr = a;
            s->e[i].meta = meta;
            s->live++;
            if (HH_UNLIKELY(probes > HH_CROWDED_PROBES) &&
                s->cap < (s->live + HH_SHARD_INIT / 4) * HH_CROWDED_SLOTS_PER_BLOCK) {
                s->crowded = true;
            }
            break;
        }
    }
    hh_shard_unlock(s);
}

/* Empties slot i (lock held). Backward-shift deletion (probe.h): the following entries of the
 * probe run move into the hole where they may, so the run stays unbroken, lookups stop at the
 * first empty slot and no tombstone is ever needed. */
static void hh_shard_erase(hh_shard *s, uint64_t i) {
    HH_LEAKS_ASSERT(s->e[i].addr != 0);
    const uint64_t mask = s->cap - 1;
    for (uint64_t j = i;;) {
        j = (j + 1) & mask;
        const uint64_t a = s->e[j].addr;
        if (a == 0) break;
        if (!hh_probe_may_move(i, j, hh_slot_of(hh_hash(a), a, s->cap))) continue;
        s->e[i] = s->e[j];
        i = j;
    }
    s->e[i].addr = 0;
    s->e[i].meta = 0;
}

/* The entry of a (lock held), or NULL. */
static hh_entry *hh_lookup(hh_shard *s, uint64_t h, uint64_t a) {
    if (s->e == NULL) return NULL;
    uint64_t mask = s->cap - 1;
    for (uint64_t i = hh_slot_of(h, a, s->cap);; i = (i + 1) & mask) {
        uint64_t v = s->e[i].addr;
        if (v == a) return &s->e[i];
        if (v == 0) return NULL;
    }
}

void hh_leaks_insert(void *p, size_t size) {
    uint64_t sz = size > HH_META_SIZE ? HH_META_SIZE : size;
    hh_put((uint64_t)(uintptr_t)p, sz | HH_META_PRESENT);
}

uint64_t hh_leaks_remove(void *p) {
    uint64_t a = (uint64_t)(uintptr_t)p, h = hh_hash(a);
    hh_shard *s = hh_shard_of(h);
    hh_shard_lock(s);
    hh_entry *e = hh_lookup(s, h, a);
    uint64_t meta = 0;
    if (e != NULL) {
        meta = e->meta;
        hh_shard_erase(s, (uint64_t)(e - s->e));
        HH_LEAKS_ASSERT(s->live > 0);
        s->live--;
    }
    hh_shard_unlock(s);
    return meta;
}

void hh_leaks_reinsert(void *p, uint64_t meta) {
    if (meta != 0 && p != NULL) hh_put((uint64_t)(uintptr_t)p, meta);
}

/* Deferred mode: the table's side of one event record, as the hooks would have done it. */
void hh_leaks_apply(const hh_rec_event *e) {
    uint64_t total = hh_event_bytes(e);
    switch (e->op) {
        case HH_OP_FREE:
            if (e->addr != 0) hh_leaks_remove((void *)(uintptr_t)e->addr);
            return;
        case HH_OP_REALLOC_DONE:
            return;
        case HH_OP_REALLOC:
        case HH_OP_REALLOCARRAY: {
            uint64_t old = hh_event_old_block(e);
            /* as hh_realloc_common: the old block goes unless the call failed (NULL for a size
             * above 0) */
            if (old != 0 && (e->addr != 0 || total == 0)) hh_leaks_remove((void *)(uintptr_t)old);
            if (e->addr != 0) hh_leaks_insert((void *)(uintptr_t)e->addr, total);
            return;
        }
        case HH_OP_CALLOC:
            if (total == UINT64_MAX) return; /* count * size overflowed: the hook tracks nothing */
            /* fall through */
        default:
            if (e->addr != 0) hh_leaks_insert((void *)(uintptr_t)e->addr, total);
            return;
    }
}

/* Reads the shard's array and size without its lock (relaxed loads): a leak check's catch-up
 * may be growing it meanwhile, and then the slot is a wrong one or in a freed mapping, which a
 * prefetch never faults on. */
static inline void hh_slot_prefetch(uint64_t a) {
    if (a == 0) return;
    uint64_t h = hh_hash(a);
    hh_shard *s = hh_shard_of(h);
    hh_entry *e = __atomic_load_n(&s->e, __ATOMIC_RELAXED);
    uint64_t cap = __atomic_load_n(&s->cap, __ATOMIC_RELAXED);
    if (e != NULL && cap != 0) hh_prefetch(&e[hh_slot_of(h, a, cap)]);
}

void hh_leaks_prefetch(const hh_rec_event *e) {
    hh_slot_prefetch(e->addr);
    hh_slot_prefetch(hh_event_old_block(e));
}

bool hh_table_modify(void *p, int type, int root) {
    uint64_t a = (uint64_t)(uintptr_t)p, h = hh_hash(a);
    hh_shard *s = hh_shard_of(h);
    hh_shard_lock(s);
    hh_entry *e = hh_lookup(s, h, a);
    if (e != NULL) {
        if (type >= 0) {
            e->meta = (e->meta & ((1ull << HH_META_TYPE_SHIFT) - 1)) |
                      ((uint64_t)type << HH_META_TYPE_SHIFT);
        }
        if (root == 1) e->meta |= HH_META_ROOT;
        if (root == 0) e->meta &= ~HH_META_ROOT;
    }
    hh_shard_unlock(s);
    return e != NULL;
}

void hh_table_lock(void) {
    for (unsigned i = 0; i < HH_SHARDS; i++) hh_shard_lock(&g_shards[i]);
}

void hh_table_unlock(void) {
    for (unsigned i = 0; i < HH_SHARDS; i++) hh_shard_unlock(&g_shards[i]);
}

uint64_t hh_table_live(void) {
    uint64_t n = 0;
    for (unsigned i = 0; i < HH_SHARDS; i++) n += g_shards[i].live;
    return n;
}

uint64_t hh_table_copy(hh_entry *out, uint64_t cap) {
    uint64_t k = 0;
    for (unsigned i = 0; i < HH_SHARDS; i++) {
        hh_shard *s = &g_shards[i];
        const uint64_t before = k;
        for (uint64_t j = 0; s->e != NULL && j < s->cap && k < cap; j++) {
            if (s->e[j].addr != 0) out[k++] = s->e[j];
        }
        /* every occupied slot is counted in live (unless out was full) */
        HH_LEAKS_ASSERT(k == cap || k - before == s->live);
        (void)before;
    }
    return k;
}
