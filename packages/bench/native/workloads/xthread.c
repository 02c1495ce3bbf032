/*
 * xthread: producer/consumer with cross-thread free.
 * Producers allocate messages of random size, fill them and pass them through a bounded
 * single-producer/single-consumer ring; consumers check and free them. Every block is freed by
 * a thread other than the one that allocated it (the pattern of a pipeline of ROS 2 nodes in
 * one process, or of a network server handing buffers to workers).
 * The consumer replays its producer's generator, so it knows the size and tag of every message.
 * --size: messages in total; --threads T: T/2 producer/consumer pairs (at least one pair).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench.h"

#define RING 1024

typedef struct {
    _Alignas(64) _Atomic uint64_t head; /* next slot the producer writes */
    _Alignas(64) _Atomic uint64_t tail; /* next slot the consumer reads */
    _Alignas(64) void *slots[RING];
    uint64_t seed;
    long long count;
    uint64_t checksum;
    uint64_t bytes;
} pair_t;

static size_t msg_size(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 60) return (size_t)rng_range(r, 16, 256);
    if (pct < 95) return (size_t)rng_range(r, 257, 2048);
    return (size_t)rng_range(r, 2049, 32768);
}

static inline void relax(unsigned *spins) {
    if (++*spins > 64) {
        sched_yield();
        *spins = 0;
    }
}

static void *producer(void *arg) {
    pair_t *q = (pair_t *)arg;
    rng_t r;
    rng_seed(&r, q->seed);
    for (long long i = 0; i < q->count; i++) {
        size_t n = msg_size(&r);
        uint64_t tag = mix_tag(q->seed, (uint64_t)i);
        void *p = bench_xmalloc(n);
        stamp(p, n, tag);
        uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
        unsigned spins = 0;
        while (h - atomic_load_explicit(&q->tail, memory_order_acquire) >= RING) relax(&spins);
        q->slots[h % RING] = p;
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
    }
    return NULL;
}

static void *consumer(void *arg) {
    pair_t *q = (pair_t *)arg;
    rng_t r;
    rng_seed(&r, q->seed);
    for (long long i = 0; i < q->count; i++) {
        size_t n = msg_size(&r);
        uint64_t tag = mix_tag(q->seed, (uint64_t)i);
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        unsigned spins = 0;
        while (atomic_load_explicit(&q->head, memory_order_acquire) == t) relax(&spins);
        void *p = q->slots[t % RING];
        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
        q->checksum += check_stamp(p, n, tag, "xthread");
        q->bytes += n;
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 2000000, 2);
    int P = a.threads / 2 < 1 ? 1 : a.threads / 2;
    pair_t *pairs = aligned_alloc(64, sizeof(pair_t) * (size_t)P);
    if (!pairs) bench_fail("aligned_alloc of rings");
    memset(pairs, 0, sizeof(pair_t) * (size_t)P);
    pthread_t *th = malloc(sizeof(pthread_t) * 2 * (size_t)P);
    long long t0 = now_ns();
    for (int i = 0; i < P; i++) {
        pairs[i].seed = a.seed * 7919 + (uint64_t)i;
        pairs[i].count = a.size / P;
        if (pthread_create(&th[2 * i], NULL, consumer, &pairs[i]) != 0)
            bench_fail("pthread_create");
        if (pthread_create(&th[2 * i + 1], NULL, producer, &pairs[i]) != 0)
            bench_fail("pthread_create");
    }
    for (int i = 0; i < 2 * P; i++) pthread_join(th[i], NULL);
    long long t1 = now_ns();
    uint64_t checksum = 0, bytes = 0;
    long long msgs = 0;
    for (int i = 0; i < P; i++) {
        checksum += pairs[i].checksum;
        bytes += pairs[i].bytes;
        msgs += pairs[i].count;
        if (atomic_load(&pairs[i].head) != (uint64_t)pairs[i].count ||
            atomic_load(&pairs[i].tail) != (uint64_t)pairs[i].count)
            bench_fail("xthread: pair %d passed %llu of %lld messages", i,
                       (unsigned long long)atomic_load(&pairs[i].tail), pairs[i].count);
    }
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"xthread\",\"ok\":true,\"threads\":%d,\"ops\":%lld,\"bytes\":%llu,"
        "\"checksum\":\"%016llx\","
        "\"elapsed_ns\":%lld,\"ops_per_s\":%.0f}\n",
        2 * P, msgs * 2, (unsigned long long)bytes, (unsigned long long)checksum, t1 - t0,
        (double)msgs * 2 / secs);
    free(th);
    free(pairs);
    return 0;
}
