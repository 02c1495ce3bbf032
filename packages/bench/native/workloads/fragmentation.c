/*
 * fragmentation: a long-running program whose objects have mixed lifetimes and whose size mix
 * changes over time (a service that goes through phases: small records, then bulk buffers, then
 * small records again). Most objects die young, some live for a while, a few live very long and
 * pin the memory around them.
 * It measures what that costs in memory: the process's peak RSS against the peak of live bytes
 * (rss_over_live; the program itself needs about 1-2 MB, so about 1.05 is ideal), the RSS while
 * the final live set is held, and what stays resident after every object has been freed. RSS is
 * the whole process's, so an allocator that maps and touches a big pool up front pays for it.
 * Time is counted in steps; each step frees the objects due at that step and allocates PER_STEP
 * new ones. Objects sit on a timing wheel, linked through a header inside the block itself (no
 * bookkeeping allocations). --size: number of steps.
 */
#include "bench.h"

#define PER_STEP 4
#define WHEEL (1 << 16)
#define PHASES 8

typedef struct obj {
    struct obj *next;
    uint64_t tag;
    uint32_t size;
    uint32_t death;
} obj_t;

static obj_t *wheel[WHEEL];

static size_t obj_size(rng_t *r, int phase) {
    unsigned pct = rng_pct(r);
    switch (phase % 4) {
        case 0: /* small records */
            return pct < 85 ? (size_t)rng_range(r, 32, 256) : (size_t)rng_range(r, 257, 2048);
        case 1: /* mixed */
            if (pct < 60) return (size_t)rng_range(r, 32, 512);
            if (pct < 98) return (size_t)rng_range(r, 513, 8192);
            return (size_t)rng_range(r, 8193, 131072);
        case 2: /* bulk buffers */
            if (pct < 40) return (size_t)rng_range(r, 32, 256);
            if (pct < 92) return (size_t)rng_range(r, 1024, 16384);
            return (size_t)rng_range(r, 16385, 262144);
        default: /* small records of other sizes */
            return pct < 85 ? (size_t)rng_range(r, 48, 512) : (size_t)rng_range(r, 513, 4096);
    }
}

static uint32_t lifetime(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 75) return (uint32_t)rng_range(r, 1, 32);
    if (pct < 96) return (uint32_t)rng_range(r, 33, 2048);
    return (uint32_t)rng_range(r, 2049, WHEEL - 1);
}

static void obj_stamp(obj_t *o) {
    unsigned char *b = (unsigned char *)o;
    size_t body = o->size - sizeof(obj_t);
    if (body > 8) memset(b + sizeof(obj_t), (int)(o->tag & 0xff), body - 8);
    memcpy(b + o->size - 8, &o->tag, 8);
}

static uint64_t obj_check(obj_t *o, uint32_t now) {
    unsigned char *b = (unsigned char *)o;
    uint64_t tail;
    memcpy(&tail, b + o->size - 8, 8);
    size_t body = o->size - sizeof(obj_t);
    unsigned char mid =
        body > 8 ? b[sizeof(obj_t) + (body - 8) / 2] : (unsigned char)(o->tag & 0xff);
    if (o->death != now || tail != o->tag || mid != (unsigned char)(o->tag & 0xff))
        bench_fail("fragmentation: object %p (%u bytes, due at step %u) corrupted at step %u",
                   (void *)o, o->size, o->death, now);
    return o->tag;
}

/* Free every object due at step `now`. Lifetimes are shorter than the wheel, so every object in
 * the slot is due now; anything else (or a list longer than the live set) means the memory under
 * the list was overwritten. */
static void free_due(uint32_t now, long long *live, uint64_t *frees, uint64_t *checksum,
                     uint64_t allocated) {
    obj_t *o = wheel[now % WHEEL];
    uint64_t walked = 0;
    while (o) {
        if (++walked > allocated - *frees + 1)
            bench_fail("fragmentation: the list of step %u loops", now);
        obj_t *next = o->next;
        *checksum += obj_check(o, now);
        *live -= o->size;
        free(o);
        (*frees)++;
        o = next;
    }
    wheel[now % WHEEL] = NULL;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 200000, 1);
    rng_t r;
    rng_seed(&r, a.seed);
    uint32_t steps = (uint32_t)a.size;
    long long start_rss = self_rss_bytes();
    uint64_t serial = 0, frees = 0, checksum = 0;
    long long live = 0, peak_live = 0;
    long long t0 = now_ns();
    uint32_t now = 0;
    for (; now < steps; now++) {
        free_due(now, &live, &frees, &checksum, serial);
        int phase = (int)((uint64_t)now * PHASES / steps);
        for (int k = 0; k < PER_STEP; k++) {
            size_t n = obj_size(&r, phase);
            uint32_t life = lifetime(&r);
            obj_t *x = bench_xmalloc(n);
            x->tag = mix_tag(serial++, n);
            x->size = (uint32_t)n;
            x->death = now + life;
            obj_stamp(x);
            x->next = wheel[x->death % WHEEL];
            wheel[x->death % WHEEL] = x;
            live += (long long)n;
        }
        if (live > peak_live) peak_live = live;
    }
    long long end_live = live;
    long long end_rss = self_rss_bytes();
    /* drain: let the survivors die in order */
    for (uint32_t t = now; live > 0; t++) {
        free_due(t, &live, &frees, &checksum, serial);
        if (t > now + WHEEL + 1)
            bench_fail("fragmentation: %lld bytes still live after the drain", live);
    }
    long long t1 = now_ns();
    if (frees != serial)
        bench_fail("fragmentation: %llu allocations, %llu frees", (unsigned long long)serial,
                   (unsigned long long)frees);
    long long peak_rss = self_maxrss_bytes();
    long long retained = self_rss_bytes();
    printf(
        "{\"workload\":\"fragmentation\",\"ok\":true,\"ops\":%llu,\"checksum\":\"%016llx\","
        "\"elapsed_ns\":%lld,"
        "\"peak_live_bytes\":%lld,\"peak_rss_bytes\":%lld,\"rss_over_live\":%.3f,\"end_live_"
        "bytes\":%lld,"
        "\"end_rss_bytes\":%lld,\"end_rss_over_live\":%.3f,\"start_rss_bytes\":%lld,\"rss_after_"
        "free_bytes\":%lld}\n",
        (unsigned long long)(serial + frees), (unsigned long long)checksum, t1 - t0, peak_live,
        peak_rss, (double)peak_rss / (double)peak_live, end_live, end_rss,
        end_live ? (double)end_rss / (double)end_live : 0.0, start_rss, retained);
    return 0;
}
