/*
 * tlsf_threads_stress.c — the backend's thread heaps driven through its table, for the
 * sanitizer tier (built with ThreadSanitizer by cmake/sanitize.cmake; the program's own malloc
 * stays the sanitizer's, so nothing is interposed).
 *
 * What runs at once, for ROUNDS rounds:
 *   - PAIRS producer/consumer pairs: the producer allocates blocks of 16 B to 8 KiB (some
 *     aligned to 64), stamps them and hands them over a ring; the consumer checks and frees
 *     them (every free a remote free, or a cached block of another heap), and frees a few of
 *     its own;
 *   - short-lived threads: each frees what a thread of the previous round left, allocates a
 *     table of its own and exits (heaps released and adopted, caches flushed at exit);
 *   - one thread that calls the backend's trim (malloc_trim) over and over: heaps left by
 *     exited threads are taken, drained and trimmed while threads start and exit.
 * Every block's contents are checked before it is freed. Prints "ok <blocks>" and exits 0.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heaphook/backend.h"

enum {
    ROUNDS = 6,
    PAIRS = 2,
    MESSAGES = 20000,   /* per pair and round */
    RING = 256,         /* blocks in flight per pair */
    SHORT_THREADS = 4,  /* per round */
    SHORT_BLOCKS = 600, /* each short-lived thread's table */
};

static const heaphook_backend *backend;

static int failed(const char *what) {
    fprintf(stderr, "tlsf_threads_stress: %s\n", what);
    exit(1);
}

static uint64_t next_random(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* A block: its size in its first word, then bytes derived from its address. */
static void *block_new(uint64_t *rng) {
    const size_t size = 16 + (size_t)(next_random(rng) % (8192 - 16));
    const size_t align = next_random(rng) % 8 == 0 ? 64 : 1;
    unsigned char *p = backend->alloc(size, align);
    if (!p) failed("alloc returned NULL");
    if (align > 1 && (uintptr_t)p % align) failed("misaligned block");
    memcpy(p, &size, sizeof size);
    for (size_t i = sizeof size; i < size; i += 61) p[i] = (unsigned char)((uintptr_t)p + i);
    return p;
}

static void block_free(void *block) {
    unsigned char *p = block;
    size_t size;
    memcpy(&size, p, sizeof size);
    if (size < 16 || size >= 8192 || backend->get_block_size(p) < size) failed("size damaged");
    for (size_t i = sizeof size; i < size; i += 61)
        if (p[i] != (unsigned char)((uintptr_t)p + i)) failed("contents damaged");
    backend->dealloc(p);
}

/* Producer/consumer: a single-producer single-consumer ring. */
typedef struct pair {
    void *slots[RING];
    _Atomic unsigned head, tail;
    uint64_t seed;
} pair;

static void *producer(void *arg) {
    pair *q = arg;
    uint64_t rng = q->seed;
    for (int m = 0; m < MESSAGES; m++) {
        void *p = block_new(&rng);
        unsigned h = atomic_load_explicit(&q->head, memory_order_relaxed);
        while (h - atomic_load_explicit(&q->tail, memory_order_acquire) == RING) sched_yield();
        q->slots[h % RING] = p;
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
        if (m % 16 == 0) block_free(block_new(&rng)); /* a block of its own, freed at once */
    }
    return NULL;
}

static void *consumer(void *arg) {
    pair *q = arg;
    uint64_t rng = q->seed ^ 0x9e3779b97f4a7c15ull;
    for (int m = 0; m < MESSAGES; m++) {
        unsigned t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        while (atomic_load_explicit(&q->head, memory_order_acquire) == t) sched_yield();
        void *p = q->slots[t % RING];
        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
        block_free(p);
        if (m % 32 == 0) block_free(block_new(&rng));
    }
    return NULL;
}

/* Short-lived threads: table k of this round was filled by thread k of the previous round. */
static void *tables[SHORT_THREADS][SHORT_BLOCKS];

static void *short_lived(void *arg) {
    const uintptr_t k = (uintptr_t)arg;
    uint64_t rng = 0x1234 + k * 7919 + (uint64_t)(uintptr_t)&rng;
    for (int i = 0; i < SHORT_BLOCKS; i++) {
        if (tables[k][i]) block_free(tables[k][i]);
        tables[k][i] = block_new(&rng);
    }
    return NULL;
}

static _Atomic int trimming;
static _Atomic long trims;

static void *trimmer(void *arg) {
    (void)arg;
    while (atomic_load(&trimming)) {
        backend->trim(0);
        atomic_fetch_add(&trims, 1);
        sched_yield();
    }
    return NULL;
}

int main(void) {
    backend = heaphook_backend_get();
    if (!backend->init || backend->init() != 0) failed("init");
    atomic_store(&trimming, 1);
    pthread_t trim_thread;
    if (pthread_create(&trim_thread, NULL, trimmer, NULL)) failed("pthread_create");
    static pair pairs[PAIRS];
    long blocks = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t threads[2 * PAIRS + SHORT_THREADS];
        int n = 0;
        for (int k = 0; k < PAIRS; k++) {
            pairs[k].seed = 0x5eed + (uint64_t)round * 131 + (uint64_t)k;
            if (pthread_create(&threads[n++], NULL, producer, &pairs[k]) ||
                pthread_create(&threads[n++], NULL, consumer, &pairs[k]))
                failed("pthread_create");
        }
        for (uintptr_t k = 0; k < SHORT_THREADS; k++)
            if (pthread_create(&threads[n++], NULL, short_lived, (void *)((k + 1) % SHORT_THREADS)))
                failed("pthread_create");
        for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
        blocks += (long)PAIRS * MESSAGES * 17 / 16 + (long)SHORT_THREADS * SHORT_BLOCKS;
    }
    atomic_store(&trimming, 0);
    pthread_join(trim_thread, NULL);
    for (int k = 0; k < SHORT_THREADS; k++)
        for (int i = 0; i < SHORT_BLOCKS; i++)
            if (tables[k][i]) block_free(tables[k][i]);
    /* Every block is free again: what the pool still counts in use is the heaps' own
     * structures and the chunks they borrowed (a few per heap), once this thread's cache is
     * flushed (trim does it). */
    backend->trim(0);
    heaphook_stats stats;
    if (!backend->get_stats || backend->get_stats(&stats) != 0) failed("get_stats");
    printf("ok %ld blocks, %ld trims, %zu blocks in use at the end\n", blocks, atomic_load(&trims),
           stats.used_blocks);
    if (stats.used_blocks > 200) failed("blocks left in use after every block was freed");
    return 0;
}
