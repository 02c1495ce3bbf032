/*
 * larson: a server-style pattern after Larson & Krishnan's benchmark.
 * Each of T worker threads owns a table of live objects and keeps replacing random ones
 * (check, free, allocate a new one of random size). After every round the threads exit and new
 * threads take over the tables, shifted by one: the blocks a thread frees were allocated by
 * another thread, and thread caches are created and torn down all the time.
 * Each table carries its own generator, so the operations are the same whatever thread runs them.
 * --size: total replace operations; --threads: worker threads per round.
 */
#include <pthread.h>

#include "bench.h"

#define SLOTS 4000
#define ROUNDS 40

typedef struct {
    void *p;
    uint32_t size;
    uint64_t tag;
} slot_t;

typedef struct {
    slot_t slots[SLOTS];
    rng_t rng;
    uint64_t id;
    uint64_t serial;
    uint64_t checksum;
    uint64_t frees;
    uint64_t allocs;
} table_t;

typedef struct {
    table_t *table;
    long long ops;
} job_t;

static size_t larson_size(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 80) return (size_t)rng_range(r, 16, 128);
    if (pct < 98) return (size_t)rng_range(r, 129, 1024);
    return (size_t)rng_range(r, 1025, 8192);
}

static void *worker(void *arg) {
    job_t *j = (job_t *)arg;
    table_t *t = j->table;
    for (long long i = 0; i < j->ops; i++) {
        uint32_t k = (uint32_t)(rng_next(&t->rng) % SLOTS);
        slot_t *s = &t->slots[k];
        if (s->p) {
            t->checksum += check_stamp(s->p, s->size, s->tag, "larson");
            free(s->p);
            t->frees++;
        }
        size_t n = larson_size(&t->rng);
        uint64_t tag = mix_tag(t->serial++, t->id * 0x10000 + n);
        s->p = bench_xmalloc(n);
        s->size = (uint32_t)n;
        s->tag = tag;
        stamp(s->p, n, tag);
        t->allocs++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 2000000, 2);
    int T = a.threads;
    table_t *tables = calloc((size_t)T, sizeof(table_t));
    if (!tables) bench_fail("calloc of tables");
    for (int i = 0; i < T; i++) {
        rng_seed(&tables[i].rng, a.seed * 1000 + (uint64_t)i);
        tables[i].id = (uint64_t)i;
    }
    long long per = a.size / ((long long)ROUNDS * T);
    if (per < 1) per = 1;
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)T);
    job_t *jobs = malloc(sizeof(job_t) * (size_t)T);
    long long t0 = now_ns();
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < T; i++) {
            jobs[i].table = &tables[(i + round) % T];
            jobs[i].ops = per;
            if (pthread_create(&th[i], NULL, worker, &jobs[i]) != 0) bench_fail("pthread_create");
        }
        for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    }
    uint64_t checksum = 0, frees = 0, allocs = 0;
    for (int i = 0; i < T; i++) {
        table_t *t = &tables[i];
        for (int k = 0; k < SLOTS; k++) {
            if (t->slots[k].p) {
                t->checksum +=
                    check_stamp(t->slots[k].p, t->slots[k].size, t->slots[k].tag, "larson (final)");
                free(t->slots[k].p);
                t->frees++;
            }
        }
        checksum += t->checksum;
        frees += t->frees;
        allocs += t->allocs;
    }
    long long t1 = now_ns();
    if (allocs != frees || allocs != (uint64_t)(per * ROUNDS * T))
        bench_fail("larson: %llu allocations, %llu frees, expected %lld",
                   (unsigned long long)allocs, (unsigned long long)frees, per * ROUNDS * T);
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"larson\",\"ok\":true,\"threads\":%d,\"ops\":%llu,\"checksum\":\"%016llx\","
        "\"elapsed_ns\":%lld,"
        "\"ops_per_s\":%.0f}\n",
        T, (unsigned long long)(allocs + frees), (unsigned long long)checksum, t1 - t0,
        (double)(allocs + frees) / secs);
    free(th);
    free(jobs);
    free(tables);
    return 0;
}
