/*
 * threads: many short-lived threads, after mimalloc-bench's mstress and thread-churn tests.
 * The program runs in rounds: each round starts T threads, each does a little work and exits,
 * and the next round starts T new ones. A thread first checks and frees the KEEP blocks a thread
 * of the previous round left in its hand-off table (so they were allocated by a thread that has
 * exited since), then replaces random blocks of a small table of its own OPS times (16 B-4 KiB),
 * frees that table, and leaves KEEP new blocks in the hand-off table for the next round.
 * What this costs an allocator is what it does when a thread starts and exits: setting up and
 * tearing down a thread cache or heap, and taking back memory whose owner is gone.
 * Thread i of round r takes hand-off table (i + r) % T, shifted as in larson, so that with two
 * threads or more a table does not pass from one thread to the next started at the same index
 * (an allocator may give a new thread the heap of the last one that exited). Each table carries
 * its own generator, so the operations do not depend on which thread runs when.
 * --size: threads created in total; --threads T: threads per round.
 */
#include <pthread.h>

#include "bench.h"

#define KEEP 128
#define LOCAL 64
#define OPS 400

typedef struct {
    void *p;
    uint32_t size;
    uint64_t tag;
} slot_t;

typedef struct {
    slot_t handoff[KEEP];
    rng_t rng;
    uint64_t id;
    uint64_t serial;
    uint64_t checksum;
    uint64_t allocs;
    uint64_t frees;
    /* frees of hand-off blocks: the thread that allocated them has exited */
    uint64_t orphan_frees;
} table_t;

static size_t block_size(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 75) return (size_t)rng_range(r, 16, 256);
    if (pct < 95) return (size_t)rng_range(r, 257, 1024);
    return (size_t)rng_range(r, 1025, 4096);
}

static void fill(table_t *t, slot_t *s) {
    size_t n = block_size(&t->rng);
    uint64_t tag = mix_tag(t->serial++, t->id * 0x10000 + n);
    s->p = bench_xmalloc(n);
    s->size = (uint32_t)n;
    s->tag = tag;
    stamp(s->p, n, tag);
    t->allocs++;
}

static void empty(table_t *t, slot_t *s, const char *what) {
    t->checksum += check_stamp(s->p, s->size, s->tag, what);
    free(s->p);
    s->p = NULL;
    t->frees++;
}

static void *worker(void *arg) {
    table_t *t = (table_t *)arg;
    for (int k = 0; k < KEEP; k++) {
        if (t->handoff[k].p) {
            empty(t, &t->handoff[k], "threads (hand-off)");
            t->orphan_frees++;
        }
    }
    slot_t local[LOCAL];
    memset(local, 0, sizeof local);
    for (int i = 0; i < OPS; i++) {
        slot_t *s = &local[rng_next(&t->rng) % LOCAL];
        if (s->p) empty(t, s, "threads");
        fill(t, s);
    }
    for (int k = 0; k < LOCAL; k++)
        if (local[k].p) empty(t, &local[k], "threads");
    for (int k = 0; k < KEEP; k++) fill(t, &t->handoff[k]);
    return NULL;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 6000, 2);
    int T = a.threads;
    long long rounds = a.size / T;
    if (rounds < 1) rounds = 1;
    table_t *tables = calloc((size_t)T, sizeof(table_t));
    if (!tables) bench_fail("calloc of tables");
    for (int i = 0; i < T; i++) {
        rng_seed(&tables[i].rng, a.seed * 1000 + (uint64_t)i);
        tables[i].id = (uint64_t)i;
    }
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)T);
    if (!th) bench_fail("malloc of thread ids");
    long long t0 = now_ns();
    for (long long round = 0; round < rounds; round++) {
        for (int i = 0; i < T; i++)
            if (pthread_create(&th[i], NULL, worker, &tables[(i + round) % T]) != 0)
                bench_fail("pthread_create");
        for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    }
    uint64_t checksum = 0, allocs = 0, frees = 0, orphan_frees = 0;
    for (int i = 0; i < T; i++) {
        table_t *t = &tables[i];
        for (int k = 0; k < KEEP; k++)
            if (t->handoff[k].p) empty(t, &t->handoff[k], "threads (final)");
        checksum += t->checksum;
        allocs += t->allocs;
        frees += t->frees;
        orphan_frees += t->orphan_frees;
    }
    long long t1 = now_ns();
    const uint64_t expected = (uint64_t)(rounds * T) * (OPS + KEEP);
    if (allocs != frees || allocs != expected)
        bench_fail("threads: %llu allocations, %llu frees, expected %llu",
                   (unsigned long long)allocs, (unsigned long long)frees,
                   (unsigned long long)expected);
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"threads\",\"ok\":true,\"threads\":%d,\"threads_created\":%lld,"
        "\"ops\":%llu,\"orphan_frees\":%llu,\"checksum\":\"%016llx\",\"elapsed_ns\":%lld,"
        "\"ops_per_s\":%.0f,\"threads_per_s\":%.0f}\n",
        T, rounds * T, (unsigned long long)(allocs + frees), (unsigned long long)orphan_frees,
        (unsigned long long)checksum, t1 - t0, (double)(allocs + frees) / secs,
        (double)(rounds * T) / secs);
    free(th);
    free(tables);
    return 0;
}
