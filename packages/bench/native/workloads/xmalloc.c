/*
 * xmalloc: one thread allocates, the others free, after Lever and Boreham's xmalloc-test.
 * A single producer allocates blocks of 16 B-8 KiB (mostly small) as fast as it can, stamps them
 * and deals them round robin into one bounded single-producer/single-consumer ring per consumer;
 * T-1 consumers check and free them. Every free is a remote free and the producer never frees:
 * an allocator that hands memory freed by another thread back to the allocating thread late, or
 * not at all, has to find new memory for the producer all the time, and its RSS grows while the
 * live set stays small. The producer waits only when the ring it deals to next is full, so the
 * rings bound the live set by design.
 * Dealing is strict round robin, so a consumer knows which blocks it gets: the tag comes from the
 * block's index, the size travels with the pointer in the ring.
 * It reports peak_live_bytes, the most bytes the rings let be live at once (computed after the
 * run from the same generator, not measured), to read the peak RSS against.
 * --size: blocks in total; --threads T: 1 producer and T-1 consumers (at least one).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench.h"

#define RING 4096

typedef struct {
    void *p;
    uint32_t size;
} msg_t;

typedef struct {
    _Alignas(64) _Atomic uint64_t head; /* next slot the producer writes */
    _Alignas(64) _Atomic uint64_t tail; /* next slot the consumer reads */
    _Alignas(64) msg_t slots[RING];
    int index;
    long long count;
    uint64_t checksum;
    uint64_t bytes;
} ring_t;

static ring_t *rings;
static int consumers;
static long long total;
static uint64_t seed;

static size_t block_size(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 70) return (size_t)rng_range(r, 16, 128);
    if (pct < 95) return (size_t)rng_range(r, 129, 1024);
    return (size_t)rng_range(r, 1025, 8192);
}

static inline void relax(unsigned *spins) {
    if (++*spins > 64) {
        sched_yield();
        *spins = 0;
    }
}

static void *producer(void *arg) {
    rng_t r;
    rng_seed(&r, seed);
    for (long long i = 0; i < total; i++) {
        size_t n = block_size(&r);
        void *p = bench_xmalloc(n);
        stamp(p, n, mix_tag(seed, (uint64_t)i));
        ring_t *q = &rings[i % consumers];
        uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
        unsigned spins = 0;
        while (h - atomic_load_explicit(&q->tail, memory_order_acquire) >= RING) relax(&spins);
        q->slots[h % RING] = (msg_t){p, (uint32_t)n};
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
    }
    return NULL;
}

static void *consumer(void *arg) {
    ring_t *q = (ring_t *)arg;
    for (long long k = 0; k < q->count; k++) {
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        unsigned spins = 0;
        while (atomic_load_explicit(&q->head, memory_order_acquire) == t) relax(&spins);
        msg_t m = q->slots[t % RING];
        uint64_t index = (uint64_t)q->index + (uint64_t)k * (uint64_t)consumers;
        q->checksum += check_stamp(m.p, m.size, mix_tag(seed, index), "xmalloc");
        q->bytes += m.size;
        free(m.p);
        /* the slot is given back after the free: a block in a ring is a live block */
        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
    }
    return NULL;
}

/* The most bytes live at once that the rings allow: every ring holds at most RING blocks, the
 * producer one more it has not dealt yet, and as dealing is round robin all of them are among
 * the last consumers * RING + 1 blocks allocated. The largest sum of sizes of that many
 * consecutive blocks, replayed from the producer's generator. */
static uint64_t peak_live_bound(void) {
    const long long window = (long long)consumers * RING + 1;
    uint32_t *sizes = calloc((size_t)window, sizeof(uint32_t));
    if (!sizes) bench_fail("calloc of the size window");
    rng_t r;
    rng_seed(&r, seed);
    uint64_t sum = 0, peak = 0;
    for (long long i = 0; i < total; i++) {
        uint32_t n = (uint32_t)block_size(&r);
        sum += n;
        sum -= sizes[i % window];
        sizes[i % window] = n;
        if (sum > peak) peak = sum;
    }
    free(sizes);
    return peak;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 2000000, 2);
    consumers = a.threads - 1 < 1 ? 1 : a.threads - 1;
    total = a.size;
    seed = a.seed * 7919 + 1;
    rings = aligned_alloc(64, sizeof(ring_t) * (size_t)consumers);
    if (!rings) bench_fail("aligned_alloc of rings");
    memset(rings, 0, sizeof(ring_t) * (size_t)consumers);
    for (int c = 0; c < consumers; c++) {
        rings[c].index = c;
        /* blocks c, c + consumers, c + 2 * consumers, ... */
        rings[c].count = (total - c + consumers - 1) / consumers;
    }
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)(consumers + 1));
    long long t0 = now_ns();
    for (int c = 0; c < consumers; c++)
        if (pthread_create(&th[c], NULL, consumer, &rings[c]) != 0) bench_fail("pthread_create");
    if (pthread_create(&th[consumers], NULL, producer, NULL) != 0) bench_fail("pthread_create");
    for (int i = 0; i <= consumers; i++) pthread_join(th[i], NULL);
    long long t1 = now_ns();
    uint64_t checksum = 0, bytes = 0;
    long long passed = 0;
    for (int c = 0; c < consumers; c++) {
        checksum += rings[c].checksum;
        bytes += rings[c].bytes;
        passed += (long long)atomic_load(&rings[c].tail);
    }
    if (passed != total)
        bench_fail("xmalloc: %lld of %lld blocks passed through the rings", passed, total);
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"xmalloc\",\"ok\":true,\"threads\":%d,\"consumers\":%d,\"ops\":%lld,"
        "\"bytes\":%llu,\"peak_live_bytes\":%llu,\"checksum\":\"%016llx\",\"elapsed_ns\":%lld,"
        "\"ops_per_s\":%.0f}\n",
        consumers + 1, consumers, total * 2, (unsigned long long)bytes,
        (unsigned long long)peak_live_bound(), (unsigned long long)checksum, t1 - t0,
        (double)total * 2 / secs);
    free(th);
    free(rings);
    return 0;
}
