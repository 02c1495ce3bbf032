/*
 * mixed: the allocation pattern of compute-bound programs that build and drop structures in
 * phases, after espresso and cfrac of mimalloc-bench.
 * Each phase allocates a batch of MIN_BATCH-MAX_BATCH blocks of many sizes (8 B-2 KiB, mostly
 * 64 B or less, and 1 in 100 of 4-64 KiB), grows or shrinks some of them and some older blocks
 * with realloc, then goes through the batch in random order: a quarter of the blocks survive and
 * move to a random place of a table of OLD blocks, freeing the block that was there, the others
 * are freed. So most blocks die within their phase and the rest live for a few phases to many,
 * and every phase frees blocks of many sizes and ages in no particular order.
 * --size: allocations in total.
 */
#include "bench.h"

#define MIN_BATCH 32
#define MAX_BATCH 1024
#define OLD 4096
#define SURVIVE_PCT 25
#define RESIZE_PCT 10
/* older blocks resized per phase */
#define OLD_RESIZES 8

typedef struct {
    void *p;
    uint32_t size;
    uint64_t tag;
} block_t;

static block_t batch[MAX_BATCH];
static uint32_t order[MAX_BATCH];
static block_t old[OLD];

static uint64_t serial, allocs, frees, resizes, live_bytes, peak_live_bytes, checksum;

static size_t block_size(rng_t *r) {
    unsigned per_mille = (unsigned)(rng_next(r) % 1000);
    if (per_mille < 600) return (size_t)rng_range(r, 8, 64);
    if (per_mille < 850) return (size_t)rng_range(r, 65, 256);
    if (per_mille < 990) return (size_t)rng_range(r, 257, 2048);
    return (size_t)rng_range(r, 4096, 65536);
}

/* stamp() needs 16 bytes; a block of 8-15 bytes gets the tag in its first 8 and the tag's low
 * byte after, so every byte of it is still written and checked. */
static void stamp_block(const block_t *b) {
    if (b->size >= 16) {
        stamp(b->p, b->size, b->tag);
        return;
    }
    unsigned char *c = (unsigned char *)b->p;
    memcpy(c, &b->tag, 8);
    memset(c + 8, (int)(b->tag & 0xff), b->size - 8);
}

static void check_block(const block_t *b, const char *what) {
    if (b->size >= 16) {
        checksum += check_stamp(b->p, b->size, b->tag, what);
        return;
    }
    const unsigned char *c = (const unsigned char *)b->p;
    uint64_t head;
    memcpy(&head, c, 8);
    int ok = head == b->tag;
    for (uint32_t k = 8; k < b->size; k++) ok &= c[k] == (unsigned char)(b->tag & 0xff);
    if (!ok)
        bench_fail("%s: block %p of %u bytes corrupted (tag %016llx, head %016llx)", what, b->p,
                   b->size, (unsigned long long)b->tag, (unsigned long long)head);
    checksum += head;
}

static void allocate(block_t *b, rng_t *r) {
    b->size = (uint32_t)block_size(r);
    b->tag = mix_tag(serial++, b->size);
    b->p = bench_xmalloc(b->size);
    stamp_block(b);
    allocs++;
    live_bytes += b->size;
    if (live_bytes > peak_live_bytes) peak_live_bytes = live_bytes;
}

static void release(block_t *b, const char *what) {
    check_block(b, what);
    free(b->p);
    b->p = NULL;
    frees++;
    live_bytes -= b->size;
}

/* Grows a block of 16 bytes or more by up to its size, or shrinks one of 32 or more to half, as a
 * program does with a buffer whose length it did not know. The bytes realloc must keep are
 * checked (the tag at both ends of the old block, or its head and the new last byte, a fill
 * byte); then the program rewrites the whole block. */
static void resize(block_t *b, rng_t *r) {
    check_block(b, "mixed (before realloc)");
    const uint32_t n = b->size;
    const int shrink = n >= 32 && rng_pct(r) < 25;
    const uint32_t m = shrink ? n / 2 : n + (uint32_t)rng_range(r, 1, n);
    unsigned char *q = realloc(b->p, m);
    if (!q) bench_fail("realloc(%p, %u) returned NULL", b->p, m);
    uint64_t head, tail = b->tag;
    memcpy(&head, q, 8);
    if (!shrink) memcpy(&tail, q + n - 8, 8);
    if (head != b->tag || tail != b->tag || (shrink && q[m - 1] != (unsigned char)(b->tag & 0xff)))
        bench_fail(
            "mixed: realloc from %u to %u bytes lost data (tag %016llx, head %016llx, tail "
            "%016llx)",
            n, m, (unsigned long long)b->tag, (unsigned long long)head, (unsigned long long)tail);
    live_bytes += (uint64_t)m - n;
    if (live_bytes > peak_live_bytes) peak_live_bytes = live_bytes;
    b->p = q;
    b->size = m;
    b->tag = mix_tag(serial++, m);
    stamp_block(b);
    resizes++;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 4000000, 1);
    rng_t r;
    rng_seed(&r, a.seed);
    long long phases = 0;
    long long t0 = now_ns();
    while ((long long)allocs < a.size) {
        uint32_t n = (uint32_t)rng_range(&r, MIN_BATCH, MAX_BATCH);
        if ((long long)n > a.size - (long long)allocs) n = (uint32_t)(a.size - (long long)allocs);
        for (uint32_t k = 0; k < n; k++) allocate(&batch[k], &r);
        for (uint32_t k = 0; k < n; k++)
            if (batch[k].size >= 16 && rng_pct(&r) < RESIZE_PCT) resize(&batch[k], &r);
        for (int j = 0; j < OLD_RESIZES; j++) {
            block_t *b = &old[rng_next(&r) % OLD];
            if (b->p && b->size >= 16) resize(b, &r);
        }
        /* the batch in random order (Fisher-Yates) */
        for (uint32_t k = 0; k < n; k++) order[k] = k;
        for (uint32_t k = n; k > 1; k--) {
            uint32_t j = (uint32_t)(rng_next(&r) % k), x = order[k - 1];
            order[k - 1] = order[j];
            order[j] = x;
        }
        for (uint32_t j = 0; j < n; j++) {
            block_t *b = &batch[order[j]];
            if (rng_pct(&r) < SURVIVE_PCT) {
                block_t *o = &old[rng_next(&r) % OLD];
                if (o->p) release(o, "mixed (old)");
                *o = *b;
                b->p = NULL;
            } else {
                release(b, "mixed");
            }
        }
        phases++;
    }
    for (int k = 0; k < OLD; k++)
        if (old[k].p) release(&old[k], "mixed (final)");
    long long t1 = now_ns();
    if (allocs != frees || live_bytes != 0)
        bench_fail("mixed: %llu allocations, %llu frees, %llu bytes left",
                   (unsigned long long)allocs, (unsigned long long)frees,
                   (unsigned long long)live_bytes);
    const uint64_t ops = allocs + frees + resizes;
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"mixed\",\"ok\":true,\"ops\":%llu,\"phases\":%lld,\"reallocs\":%llu,"
        "\"peak_live_bytes\":%llu,\"checksum\":\"%016llx\",\"elapsed_ns\":%lld,"
        "\"ops_per_s\":%.0f}\n",
        (unsigned long long)ops, phases, (unsigned long long)resizes,
        (unsigned long long)peak_live_bytes, (unsigned long long)checksum, t1 - t0,
        (double)ops / secs);
    return 0;
}
