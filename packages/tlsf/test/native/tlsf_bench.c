/*
 * tlsf_bench.c — a quick throughput check (not a test): each of <threads> threads runs
 * <iterations> malloc/free steps over 1000 slots with sizes 16..1024 (1 in 64 up to 64 KiB).
 * Prints "threads=<n> ns_per_op=<x>". Compare runs with and without LD_PRELOAD.
 */
#include <pthread.h>
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

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) iterations = atol(argv[2]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, run, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("threads=%d ns_per_op=%.2f\n", threads, ns / iterations);
    return 0;
}
