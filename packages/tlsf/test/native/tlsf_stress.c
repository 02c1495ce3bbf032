/*
 * tlsf_stress: a heap history meant to reach every path of the library's malloc and free, for
 * counting the instructions of each call (scripts/worst-case-instructions.mjs runs it under
 * callgrind, one dump per call).
 *
 * ROUNDS rounds; in each, THREADS threads start (adopting the thread heaps the previous round's
 * threads released, with their chunks and caches) and each makes --size calls on a table of
 * SLOTS blocks, half of it left by the previous round's threads (so a good part of the frees
 * are of blocks another thread allocated: remote frees, and blocks that go to the freeing
 * thread's cache and back to their owner when it flushes). Sizes 8 B to 512 KiB log-uniform
 * (small blocks for the thread cache, medium ones split from chunks, large ones served by the
 * shared heap under its lock), one call in 16 a posix_memalign of 32 B to 64 KiB alignment,
 * one in 32 a realloc; each round ends with a burst that frees most of the table at once and
 * allocates it again (coalescing into large blocks, chunks borrowed again). Every block is
 * filled and checked. Prints "calls <n>": the malloc-family calls it made.
 * The threads of a round are all alive (each keeps its heap) but take turns, BATCH calls at a
 * time: only one runs between two calls, so that under callgrind no call's instructions are
 * mixed with another thread's (it would switch threads in the middle of a call otherwise).
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 4
#define THREADS 2
#define SLOTS 2048
#define BATCH 256

typedef struct {
    void *p;
    size_t size;
    unsigned char fill;
} slot_t;

static slot_t table[THREADS][SLOTS];
static long calls_per_thread = 4000;
static _Atomic long calls;
static sem_t turn[THREADS]; /* turn[i] posted: thread i runs its next batch */

static uint64_t next_random(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t random_size(uint64_t *s) {
    const unsigned log2 = 3 + (unsigned)(next_random(s) % 16); /* 8 B .. 512 KiB */
    const size_t lo = (size_t)1 << log2;
    return lo + (size_t)(next_random(s) % lo);
}

static void check(const slot_t *x) {
    const unsigned char *b = x->p;
    if (b[0] != x->fill || b[x->size - 1] != x->fill || b[x->size / 2] != x->fill) {
        fprintf(stderr, "tlsf_stress: block %p of %zu bytes corrupted\n", x->p, x->size);
        abort();
    }
}

static void put(slot_t *x, uint64_t *s) {
    const unsigned kind = (unsigned)(next_random(s) % 32);
    size_t size = random_size(s);
    void *p = NULL;
    if (kind < 2) {
        const size_t align = (size_t)32 << (next_random(s) % 12); /* 32 B .. 64 KiB */
        if (posix_memalign(&p, align, size) != 0) p = NULL;
    } else {
        p = malloc(size);
    }
    calls++;
    if (!p) {
        fprintf(stderr, "tlsf_stress: allocation of %zu bytes failed\n", size);
        abort();
    }
    x->p = p;
    x->size = size;
    x->fill = (unsigned char)(next_random(s) | 1);
    memset(p, x->fill, size);
}

static void drop(slot_t *x) {
    check(x);
    free(x->p);
    calls++;
    x->p = NULL;
}

static void grow(slot_t *x, uint64_t *s) {
    check(x);
    const size_t size = random_size(s);
    void *p = realloc(x->p, size);
    calls++;
    if (!p) abort();
    const size_t kept = size < x->size ? size : x->size;
    x->p = p;
    memset((unsigned char *)p + kept, x->fill, size - kept);
    x->size = size;
    check(x);
}

typedef struct {
    int index;
    int round;
} work_t;

static void *worker(void *arg) {
    const work_t *w = arg;
    uint64_t s = (uint64_t)(w->round * THREADS + w->index + 1) * 7919u;
    /* This round's table is the one the other thread used last round. */
    slot_t *t = table[(w->index + w->round) % THREADS];
    for (long i = 0; i < calls_per_thread; i++) {
        if (i % BATCH == 0) {
            if (i > 0) sem_post(&turn[(w->index + 1) % THREADS]);
            sem_wait(&turn[w->index]);
        }
        slot_t *x = &t[next_random(&s) % SLOTS];
        if (!x->p)
            put(x, &s);
        else if (next_random(&s) % 32 == 0)
            grow(x, &s);
        else
            drop(x);
    }
    /* A burst: most of the table freed at once, then filled again. */
    for (int k = 0; k < SLOTS; k++)
        if (t[k].p && k % 8 != 0) drop(&t[k]);
    for (int k = 0; k < SLOTS; k += 2)
        if (!t[k].p) put(&t[k], &s);
    sem_post(&turn[(w->index + 1) % THREADS]);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) calls_per_thread = atol(argv[1]);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < THREADS; i++) sem_init(&turn[i], 0, i == 0);
        pthread_t threads[THREADS];
        work_t work[THREADS];
        for (int i = 0; i < THREADS; i++) {
            work[i] = (work_t){i, round};
            if (pthread_create(&threads[i], NULL, worker, &work[i]) != 0) abort();
        }
        for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    }
    for (int i = 0; i < THREADS; i++)
        for (int k = 0; k < SLOTS; k++)
            if (table[i][k].p) drop(&table[i][k]);
    printf("calls %ld\n", (long)calls);
    return 0;
}
