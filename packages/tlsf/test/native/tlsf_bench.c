/*
 * tlsf_bench.c — a quick throughput check (not a test): each of <threads> threads runs
 * <iterations> malloc/free steps over 1000 slots with sizes 16..1024 (1 in 64 up to 64 KiB).
 * Prints "threads=<n> ns_per_op=<x>". Compare runs with and without LD_PRELOAD.
 *
 *   tlsf_bench <threads> [iterations]          churn in every thread
 *   tlsf_bench xfree [iterations]              one thread allocates, another frees
 *   tlsf_bench realloc [iterations]            blocks grown by realloc step by step
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long iterations = 5000000;

static void *run(void *arg) {
    uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    void *slots[1000] = {0};
    for (long i = 0; i < iterations; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned k = (unsigned)(x % 1000);
        if (slots[k]) {
            free(slots[k]);
            slots[k] = NULL;
        } else {
            size_t size = (x >> 20) % 64 == 0 ? 16 + (x >> 32) % 65536 : 16 + (x >> 32) % 1008;
            slots[k] = malloc(size);
            *(char *)slots[k] = 1;
        }
    }
    for (int k = 0; k < 1000; k++) free(slots[k]);
    return NULL;
}

/* xfree: the producer fills batches of BATCH blocks, the consumer frees whole batches. */
#define BATCH 1000
static void **_Atomic handoff;

static void *producer(void *arg) {
    (void)arg;
    for (long i = 0; i < iterations / BATCH; i++) {
        void **batch = malloc(BATCH * sizeof(void *));
        for (int k = 0; k < BATCH; k++) batch[k] = malloc(16 + (size_t)(k * 7) % 500);
        void **expected = NULL;
        while (!atomic_compare_exchange_weak(&handoff, &expected, batch)) {
            expected = NULL;
            sched_yield();
        }
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (long i = 0; i < iterations / BATCH; i++) {
        void **batch;
        while (!(batch = atomic_exchange(&handoff, NULL))) sched_yield();
        for (int k = 0; k < BATCH; k++) free(batch[k]);
        free(batch);
    }
    return NULL;
}

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double elapsed_ns(struct timespec a, struct timespec b) {
    return (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
}

int main(int argc, char **argv) {
    struct timespec a, b;
    const double cpu0 = cpu_ns();
    if (argc > 1 && !strcmp(argv[1], "xfree")) {
        if (argc > 2) iterations = atol(argv[2]);
        pthread_t p, c;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pthread_create(&p, NULL, producer, NULL);
        pthread_create(&c, NULL, consumer, NULL);
        pthread_join(p, NULL);
        pthread_join(c, NULL);
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("xfree ns_per_block=%.2f cpu_ns_per_block=%.2f\n", elapsed_ns(a, b) / iterations,
               (cpu_ns() - cpu0) / iterations);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "realloc")) {
        if (argc > 2) iterations = atol(argv[2]);
        clock_gettime(CLOCK_MONOTONIC, &a);
        long steps = 0;
        for (long i = 0; i < iterations / 100; i++) {
            char *p = NULL;
            void *other[4];
            for (int k = 0; k < 100; k++) {
                p = realloc(p, 16 + (size_t)k * 97);
                p[0] = (char)k;
                if (k % 25 == 0) other[k / 25] = malloc(40);
                steps++;
            }
            for (int k = 0; k < 4; k++) free(other[k]);
            free(p);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("realloc ns_per_step=%.2f cpu_ns_per_step=%.2f\n", elapsed_ns(a, b) / steps,
               (cpu_ns() - cpu0) / steps);
        return 0;
    }
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) iterations = atol(argv[2]);
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, run, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("threads=%d ns_per_op=%.2f cpu_ns_per_op=%.2f\n", threads, elapsed_ns(a, b) / iterations,
           (cpu_ns() - cpu0) / iterations / threads);
    return 0;
}
