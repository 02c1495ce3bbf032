/*
 * table_unit.c — unit tests of the leak checker's live-block table (native/leaks/table.c) and
 * of the probing rule it shares with the report's pass (native/probe.h). The table's file is
 * included, so the cases can look at its shards; nothing else of the tracer is linked.
 *
 *   probe-rule         hh_probe_may_move against its definition, every (hole, slot, home) of a
 *                      16-slot table: an entry may fill the hole when the hole lies cyclically
 *                      in [home, slot), i.e. it stays reachable from its home
 *   insert-find-remove blocks go in with their sizes, come back from a copy, are removed once
 *                      (a second removal and a removal of an unknown block find nothing)
 *   no-tombstones      1,000,000 random inserts and removes over 4,000 live blocks: every shard
 *                      keeps each entry reachable from its home slot without crossing an empty
 *                      one, holds no stale entry, and never grew past what its live blocks need
 *   grow               20,000 blocks into one shard: it doubles as it fills, stays at most 3/4
 *                      full, and every block is still found
 *   apply              the event records of the drain thread (deferred mode) change the table
 *                      as the hooks would: malloc, calloc (and an overflowing one), a moved
 *                      realloc, a failed one, realloc(p, 0), free
 *   exhaustion         (not under AddressSanitizer) with the address space capped so that no
 *                      shard can grow, inserts that find no room are counted as lost and the
 *                      blocks already in stay found; with the cap lifted, inserts work again
 *
 * Prints one "ok <case>" line per case; on a failed expectation prints "FAIL <case>: <what>" on
 * stderr and exits with 1 (test/unit/table.test.ts runs it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "leaks/table.c"

static const char *g_case;

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "FAIL %s: %s\n", g_case, what);
        exit(1);
    }
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static bool found(uint64_t a) {
    return hh_table_modify((void *)(uintptr_t)a, -1, -1);
}

/* Every occupied slot of every shard is reachable from its home slot: no empty slot between. */
static void expect_probe_runs_unbroken(void) {
    for (unsigned k = 0; k < HH_SHARDS; k++) {
        hh_shard *s = &g_shards[k];
        uint64_t live = 0;
        for (uint64_t i = 0; s->e != NULL && i < s->cap; i++) {
            uint64_t a = s->e[i].addr;
            if (a == 0) {
                expect(s->e[i].meta == 0, "an empty slot keeps a stale meta (a tombstone)");
                continue;
            }
            live++;
            expect(hh_shard_of(hh_hash(a)) == s, "an entry sits in another address's shard");
            for (uint64_t j = hh_slot_of(hh_hash(a), a, s->cap); j != i; j = (j + 1) & (s->cap - 1))
                expect(s->e[j].addr != 0, "an empty slot between an entry and its home slot");
        }
        expect(live == s->live, "a shard's live count is not its occupied slots");
    }
}

static void empty_table(void) {
    for (unsigned k = 0; k < HH_SHARDS; k++) {
        hh_shard *s = &g_shards[k];
        for (uint64_t i = 0; s->e != NULL && i < s->cap; i++) {
            /* a removal shifts the run's next entry into slot i: remove until it is empty */
            while (s->e[i].addr != 0) hh_leaks_remove((void *)(uintptr_t)s->e[i].addr);
        }
    }
    expect(hh_table_live() == 0, "the table is not empty after removing everything");
}

static void case_probe_rule(void) {
    g_case = "probe-rule";
    const uint64_t cap = 16;
    for (uint64_t hole = 0; hole < cap; hole++) {
        for (uint64_t d = 1; d < cap; d++) {
            uint64_t j = (hole + d) % cap;
            for (uint64_t home = 0; home < cap; home++) {
                /* distance from home to the hole and to j, going forward */
                uint64_t to_hole = (hole + cap - home) % cap, to_j = (j + cap - home) % cap;
                bool may = to_hole < to_j;
                expect(hh_probe_may_move(hole, j, home) == may, "hh_probe_may_move disagrees");
            }
        }
    }
    printf("ok probe-rule\n");
}

static void case_insert_find_remove(void) {
    g_case = "insert-find-remove";
    enum { N = 5000 };
    static uint64_t addrs[N];
    for (int i = 0; i < N; i++) {
        addrs[i] = 0x7f0000000000ull + (uint64_t)i * 48;
        hh_leaks_insert((void *)(uintptr_t)addrs[i], (size_t)i + 1);
    }
    expect(hh_table_live() == N, "live count after inserts");
    static hh_entry copy[N + 1];
    hh_table_lock();
    uint64_t n = hh_table_copy(copy, N + 1);
    hh_table_unlock();
    expect(n == N, "the copy has not every entry");
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t idx = (copy[i].addr - 0x7f0000000000ull) / 48;
        expect(idx < N && copy[i].addr == addrs[idx], "a copied entry is not an inserted block");
        expect((copy[i].meta & HH_META_SIZE) == idx + 1, "a copied size is not the inserted one");
        expect((copy[i].meta & HH_META_PRESENT) != 0, "a live entry without the present bit");
        sum += idx;
    }
    expect(sum == (uint64_t)N * (N - 1) / 2, "the copy holds a block twice");
    hh_leaks_insert((void *)(uintptr_t)addrs[7], 999); /* handed out again: the size is updated */
    expect(hh_table_live() == N, "a second insert of a live block added an entry");
    for (int i = 0; i < N; i++) {
        uint64_t meta = hh_leaks_remove((void *)(uintptr_t)addrs[i]);
        expect((meta & HH_META_SIZE) == (i == 7 ? 999u : (uint64_t)i + 1), "remove's meta");
        expect(hh_leaks_remove((void *)(uintptr_t)addrs[i]) == 0, "a block removed twice");
    }
    expect(hh_leaks_remove((void *)(uintptr_t)0x1230) == 0, "an unknown block was found");
    expect(hh_table_live() == 0, "live count after removes");
    expect_probe_runs_unbroken();
    printf("ok insert-find-remove\n");
}

static void case_no_tombstones(void) {
    g_case = "no-tombstones";
    enum { LIVE = 4000 };
    static uint64_t slots[LIVE];
    uint64_t caps_before = 0;
    for (int round = 0; round < 1000000; round++) {
        uint64_t r = next_random();
        unsigned k = (unsigned)(r % LIVE);
        if (slots[k] != 0) {
            expect(hh_leaks_remove((void *)(uintptr_t)slots[k]) != 0, "a live block was lost");
            slots[k] = 0;
        } else {
            /* glibc-like addresses: 16-byte aligned, spread over 64 MiB of heap */
            uint64_t a = 0x555500000000ull + ((r >> 16) & ((64u << 20) - 1) & ~15ull) + 16;
            if (found(a)) continue; /* live in another slot already */
            slots[k] = a;
            hh_leaks_insert((void *)(uintptr_t)a, 64);
        }
        if (round == 100000) {
            for (unsigned s = 0; s < HH_SHARDS; s++) caps_before += g_shards[s].cap;
        }
    }
    uint64_t live = 0, caps = 0;
    for (int i = 0; i < LIVE; i++) {
        if (slots[i] == 0) continue;
        live++;
        expect(found(slots[i]), "a live block is not found");
    }
    for (unsigned s = 0; s < HH_SHARDS; s++) caps += g_shards[s].cap;
    expect(hh_table_live() == live, "the live count is not the live blocks");
    expect_probe_runs_unbroken();
    /* steady churn: the shards do not keep growing (as they would when deletions left marks) */
    expect(caps <= 2 * caps_before, "the shards kept growing under steady churn");
    empty_table();
    printf("ok no-tombstones\n");
}

static void case_grow(void) {
    g_case = "grow";
    enum { N = 20000 };
    hh_shard *target = &g_shards[0];
    uint64_t cap0 = target->cap, n = 0;
    static uint64_t addrs[N];
    /* one block per page, on pages whose hash falls in shard 0 */
    for (uint64_t page = 0x600000000ull >> 12; n < N; page++) {
        uint64_t a = (page << 12) + 32;
        if (hh_shard_of(hh_hash(a)) != target) continue;
        addrs[n++] = a;
        hh_leaks_insert((void *)(uintptr_t)a, 32);
        expect(target->live * 4 <= target->cap * 3, "a shard more than 3/4 full");
        expect((target->cap & (target->cap - 1)) == 0, "a shard's capacity is not a power of two");
    }
    expect(target->live == N, "the shard does not hold every block");
    expect(target->cap > cap0 && target->cap >= N, "the shard did not grow");
    for (uint64_t i = 0; i < N; i++)
        expect(found(addrs[i]), "a block was lost when the shard grew");
    expect_probe_runs_unbroken();
    empty_table();
    printf("ok grow\n");
}

static hh_rec_event *event(void *buf, uint8_t op, uint64_t addr, uint64_t size, uint64_t old,
                           uint64_t count) {
    hh_rec_event *e = buf;
    memset(buf, 0, sizeof(hh_rec_event) + sizeof(hh_rec_event_extra));
    e->op = op;
    e->addr = addr;
    e->size = size;
    e->flags = HH_EV_EXTRA;
    hh_rec_event_extra *x = (hh_rec_event_extra *)(e + 1);
    x->old = old;
    x->count = count;
    return e;
}

static uint64_t size_of(uint64_t a) {
    uint64_t meta = hh_leaks_remove((void *)(uintptr_t)a);
    if (meta != 0) hh_leaks_reinsert((void *)(uintptr_t)a, meta);
    return meta == 0 ? 0 : (meta & HH_META_SIZE);
}

static void case_apply(void) {
    g_case = "apply";
    uint64_t buf[16];
    hh_leaks_apply(event(buf, HH_OP_MALLOC, 0x1000, 100, 0, 0));
    hh_leaks_apply(event(buf, HH_OP_CALLOC, 0x2000, 8, 0, 10));
    hh_leaks_apply(event(buf, HH_OP_CALLOC, 0, 8, 0, UINT64_MAX)); /* overflowed: nothing */
    expect(size_of(0x1000) == 100 && size_of(0x2000) == 80, "malloc / calloc sizes");
    hh_leaks_apply(event(buf, HH_OP_REALLOC, 0x3000, 500, 0x1000, 0)); /* moved */
    expect(size_of(0x1000) == 0 && size_of(0x3000) == 500, "a moved realloc");
    hh_leaks_apply(event(buf, HH_OP_REALLOC, 0, 1u << 30, 0x3000, 0)); /* failed: block stays */
    expect(size_of(0x3000) == 500, "a failed realloc dropped its block");
    hh_leaks_apply(event(buf, HH_OP_REALLOCARRAY, 0, 0, 0x3000, 4)); /* realloc(p, 0): freed */
    expect(size_of(0x3000) == 0, "realloc to zero bytes kept its block");
    hh_leaks_apply(event(buf, HH_OP_REALLOC_DONE, 0x2000, 0, 0, 0));
    expect(size_of(0x2000) == 80, "realloc_done changed the table");
    hh_leaks_apply(event(buf, HH_OP_FREE, 0x2000, 0, 0, 0));
    expect(hh_table_live() == 0, "free left its block");
    printf("ok apply\n");
}

#if !defined(__SANITIZE_ADDRESS__) /* ASan reserves terabytes of shadow: no cap fits */
static void case_exhaustion(void) {
    g_case = "exhaustion";
    /* fill shard 0 up to its last free slot's worth, then cap the address space */
    hh_shard *target = &g_shards[0];
    uint64_t page = 0x700000000ull >> 12, n = 0;
    static uint64_t addrs[1 << 16];
    struct rlimit old;
    getrlimit(RLIMIT_AS, &old);
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    expect(f != NULL && fscanf(f, "%lu", &pages) == 1, "read /proc/self/statm");
    fclose(f);
    struct rlimit capped = {(rlim_t)pages * 4096 + (64u << 10), old.rlim_max};
    expect(setrlimit(RLIMIT_AS, &capped) == 0, "setrlimit(RLIMIT_AS)");
    uint64_t lost0 = atomic_load(&g_table_lost);
    while (atomic_load(&g_table_lost) == lost0 && n < (1 << 16)) {
        uint64_t a = (page++ << 12) + 48;
        if (hh_shard_of(hh_hash(a)) != target) continue;
        addrs[n++] = a;
        hh_leaks_insert((void *)(uintptr_t)a, 48);
    }
    expect(atomic_load(&g_table_lost) == lost0 + 1, "no insert was counted lost");
    expect(target->live == n - 1, "the lost insert is in the table");
    expect(target->live + 1 == target->cap, "a full shard left more than its last slot empty");
    for (uint64_t i = 0; i + 1 < n; i++) expect(found(addrs[i]), "a block was lost when full");
    expect(!found(addrs[n - 1]), "the lost block is found");
    expect_probe_runs_unbroken();
    expect(setrlimit(RLIMIT_AS, &old) == 0, "lift the cap");
    hh_leaks_insert((void *)(uintptr_t)addrs[n - 1], 48);
    expect(found(addrs[n - 1]) && target->live == n, "the table did not grow again");
    empty_table();
    printf("ok exhaustion\n");
}
#endif

int main(void) {
    case_probe_rule();
    case_insert_find_remove();
    case_no_tombstones();
    case_grow();
    case_apply();
#if !defined(__SANITIZE_ADDRESS__)
    case_exhaustion();
#endif
    return 0;
}
