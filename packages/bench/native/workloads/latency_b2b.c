/*
 * latency_b2b: per-call latency of malloc and free called back to back, hot.
 * Each thread replaces random slots of a table of SLOTS blocks (about SLOTS / 2 live: an
 * empty slot is filled by a malloc, a full one emptied by a free, so malloc and free are
 * interleaved at random), sizes 8 B to 64 KiB log-uniform (as many blocks of 8-16 B as of
 * 32-64 KiB), with no pause between calls: what an allocator's fast paths and its data
 * structures' cache misses cost when the heap is large and busy, which the 10 kHz `latency`
 * loop (a few calls per period, the caches warm again each period) does not show. Each malloc
 * and each free is timed on its own with CLOCK_MONOTONIC (clock-read cost included, reported
 * as clock_overhead_ns); blocks are stamped and checked outside the timed calls.
 * After an untimed warm-up (a fifth of the operations, at least WARM_PER_SLOT times the table's
 * size: the table fills and the heap reaches its steady size), --size operations per thread are
 * timed; with --threads T, T such loops run at once on tables of their own, started together
 * after their warm-ups. --slots K makes the table K slots instead of SLOTS (the bench's quick
 * profile: a smaller heap, a shorter warm-up).
 * Reported: p50, p99, p99.9, p99.99 and max of malloc and of free apart (over the calls of all
 * threads), the operations per second of the timed phase, the minor page faults taken in it,
 * and what the machine does to a busy thread (stalls_1us_per_s, stalls_10us_per_s: gaps over
 * 1 us and 10 us in a loop of clock reads before the loops, as `latency` measures them;
 * --probe-ms sets the probe's length).
 */
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>

#include "bench.h"

#define SLOTS 20000
#define MAX_THREADS 64
#define WARM_PER_SLOT 5LL  /* 100000 operations for SLOTS */
#define SIZE_MIN_LOG2 3.0  /* 8 B */
#define SIZE_MAX_LOG2 16.0 /* 64 KiB */
#define STALL_PROBE_NS 250000000LL

typedef struct {
    pthread_t thread;
    rng_t rng;
    struct {
        void *p;
        uint32_t size;
        uint64_t tag;
    } * slots;
    uint32_t *malloc_lat, *free_lat; /* each may hold every call of the timed phase */
    size_t n_malloc, n_free;
    uint64_t checksum, serial;
    long long ops, warm;
    long long t0, t1; /* the timed phase, this thread */
    uint32_t nslots;  /* the table's size (SLOTS unless --slots) */
} loop_t;

static pthread_barrier_t warmed_up, go, timed_done, counted;

/* The helpers of step() are forced inline: with two copies of step() (the default table size
 * and --slots), gcc would otherwise call them, which it did not before. */

/* 8 B .. 64 KiB, log-uniform. */
static inline __attribute__((always_inline)) size_t b2b_size(rng_t *r) {
    const double u = (double)(rng_next(r) >> 11) / 9007199254740992.0; /* [0, 1) */
    size_t sz = (size_t)exp2(SIZE_MIN_LOG2 + u * (SIZE_MAX_LOG2 - SIZE_MIN_LOG2));
    return sz < 8 ? 8 : sz;
}

static void *map_touched(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) bench_fail("mmap of %zu bytes", bytes);
    memset(p, 0, bytes);
    return p;
}

/* bench.h's stamps want 16 bytes or more; a smaller block carries its tag in its first 8. */
static inline __attribute__((always_inline)) void stamp_any(void *p, size_t size, uint64_t tag) {
    if (size >= 16)
        stamp(p, size, tag);
    else
        memcpy(p, &tag, 8);
}

static inline __attribute__((always_inline)) uint64_t check_any(const void *p, size_t size,
                                                                uint64_t tag, const char *what) {
    if (size >= 16) return check_stamp(p, size, tag, what);
    uint64_t head;
    memcpy(&head, p, 8);
    if (head != tag)
        bench_fail("%s: block %p of %zu bytes corrupted (tag %016llx, head %016llx)", what, p, size,
                   (unsigned long long)tag, (unsigned long long)head);
    return head;
}

/* One operation on a random slot of nslots; timed into the loop's samples when `timed`. */
static inline __attribute__((always_inline)) void step_in(loop_t *l, int timed,
                                                          const uint32_t nslots) {
    const uint32_t k = (uint32_t)(rng_next(&l->rng) % nslots);
    if (l->slots[k].p) {
        void *p = l->slots[k].p;
        l->checksum += check_any(p, l->slots[k].size, l->slots[k].tag, "latency_b2b");
        const long long t0 = now_ns();
        free(p);
        const long long t1 = now_ns();
        l->slots[k].p = NULL;
        if (timed) l->free_lat[l->n_free++] = (uint32_t)(t1 - t0);
    } else {
        const size_t sz = b2b_size(&l->rng);
        const long long t0 = now_ns();
        void *p = malloc(sz);
        const long long t1 = now_ns();
        if (!p) bench_fail("malloc(%zu) returned NULL", sz);
        const uint64_t tag = mix_tag(l->serial++, sz);
        stamp_any(p, sz, tag);
        l->slots[k].p = p;
        l->slots[k].size = (uint32_t)sz;
        l->slots[k].tag = tag;
        if (timed) l->malloc_lat[l->n_malloc++] = (uint32_t)(t1 - t0);
    }
}

/* The default table size as a constant (the slot index a multiplication; the same code as
 * before --slots existed), and any other size. */
static inline void step(loop_t *l, int timed) {
    step_in(l, timed, SLOTS);
}

static inline void step_sized(loop_t *l, int timed) {
    step_in(l, timed, l->nslots);
}

/* One thread: the warm-up and the timed phase, then the final checks. */
static void *run_loop(void *arg) {
    loop_t *l = arg;
    bench_prefault_stack();
    if (l->nslots == SLOTS) {
        for (long long i = 0; i < l->warm; i++) step(l, 0);
    } else {
        for (long long i = 0; i < l->warm; i++) step_sized(l, 0);
    }
    pthread_barrier_wait(&warmed_up);
    pthread_barrier_wait(&go);
    if (l->nslots == SLOTS) {
        l->t0 = now_ns();
        for (long long i = 0; i < l->ops; i++) step(l, 1);
        l->t1 = now_ns();
    } else {
        l->t0 = now_ns();
        for (long long i = 0; i < l->ops; i++) step_sized(l, 1);
        l->t1 = now_ns();
    }
    pthread_barrier_wait(&timed_done);
    pthread_barrier_wait(&counted);
    for (uint32_t k = 0; k < l->nslots; k++) {
        if (l->slots[k].p) {
            l->checksum +=
                check_any(l->slots[k].p, l->slots[k].size, l->slots[k].tag, "latency_b2b (final)");
            free(l->slots[k].p);
            l->slots[k].p = NULL;
        }
    }
    return NULL;
}

/* The samples of every loop, malloc's or free's, in one sorted array. */
static uint32_t *merged(loop_t *loops, int n, int want_malloc, size_t *count) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += want_malloc ? loops[i].n_malloc : loops[i].n_free;
    if (total == 0) bench_fail("latency_b2b: no %s samples", want_malloc ? "malloc" : "free");
    uint32_t *all = map_touched(total * sizeof(uint32_t));
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const uint32_t *src = want_malloc ? loops[i].malloc_lat : loops[i].free_lat;
        const size_t len = want_malloc ? loops[i].n_malloc : loops[i].n_free;
        memcpy(all + at, src, len * sizeof(uint32_t));
        at += len;
    }
    qsort(all, total, sizeof(uint32_t), bench_cmp_u32);
    *count = total;
    return all;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 2000000, 1);
    if (a.threads > MAX_THREADS) bench_fail("latency_b2b: at most %d threads", MAX_THREADS);
    const int threads = a.threads;
    if (a.slots > 1000000) bench_fail("latency_b2b: at most 1000000 slots");
    const uint32_t nslots = a.slots ? (uint32_t)a.slots : SLOTS;
    const long long warm_min = WARM_PER_SLOT * nslots;
    const long long ops = a.size, warm = a.size / 5 < warm_min ? warm_min : a.size / 5;

    loop_t *loops = map_touched(sizeof(loop_t) * (size_t)threads);
    for (int i = 0; i < threads; i++) {
        rng_seed(&loops[i].rng, a.seed + (uint64_t)i * 1000003u);
        loops[i].slots = map_touched(sizeof(*loops[i].slots) * nslots);
        loops[i].nslots = nslots;
        loops[i].malloc_lat = map_touched((size_t)ops * sizeof(uint32_t));
        loops[i].free_lat = map_touched((size_t)ops * sizeof(uint32_t));
        loops[i].ops = ops;
        loops[i].warm = warm;
    }

    double stalls_1us, stalls_10us;
    bench_machine_stalls(a.probe_ms ? a.probe_ms * 1000000LL : STALL_PROBE_NS, &stalls_1us,
                         &stalls_10us);
    const long long overhead = bench_clock_overhead();

    pthread_barrier_t *const phases[] = {&warmed_up, &go, &timed_done, &counted};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
        pthread_barrier_init(phases[i], NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&loops[i].thread, NULL, run_loop, &loops[i]) != 0)
            bench_fail("latency_b2b: pthread_create");
    pthread_barrier_wait(&warmed_up);
    const long minflt0 = self_minflt();
    pthread_barrier_wait(&go);
    pthread_barrier_wait(&timed_done);
    const long minflt = self_minflt() - minflt0;
    pthread_barrier_wait(&counted);
    for (int i = 0; i < threads; i++) pthread_join(loops[i].thread, NULL);

    uint64_t checksum = 0;
    long long slowest = 0;
    for (int i = 0; i < threads; i++) {
        checksum += loops[i].checksum;
        if ((long long)(loops[i].n_malloc + loops[i].n_free) != ops)
            bench_fail("latency_b2b: thread %d: %zu samples, expected %lld", i,
                       loops[i].n_malloc + loops[i].n_free, ops);
        if (loops[i].t1 - loops[i].t0 > slowest) slowest = loops[i].t1 - loops[i].t0;
    }
    size_t nm, nf;
    const uint32_t *m = merged(loops, threads, 1, &nm);
    const uint32_t *f = merged(loops, threads, 0, &nf);
    printf(
        "{\"workload\":\"latency_b2b\",\"ok\":true,\"ops\":%lld,\"threads\":%d,"
        "\"checksum\":\"%016llx\",\"elapsed_ns\":%lld,\"ops_per_s\":%.0f,"
        "\"malloc_p50_ns\":%u,\"malloc_p99_ns\":%u,\"malloc_p99_9_ns\":%u,"
        "\"malloc_p99_99_ns\":%u,\"malloc_max_ns\":%u,"
        "\"free_p50_ns\":%u,\"free_p99_ns\":%u,\"free_p99_9_ns\":%u,"
        "\"free_p99_99_ns\":%u,\"free_max_ns\":%u,"
        "\"minflt\":%ld,\"clock_overhead_ns\":%lld,"
        "\"stalls_1us_per_s\":%.0f,\"stalls_10us_per_s\":%.0f}\n",
        ops * threads, threads, (unsigned long long)checksum, slowest,
        (double)(ops * threads) / ((double)slowest / 1e9), bench_percentile(m, nm, 50),
        bench_percentile(m, nm, 99), bench_percentile(m, nm, 99.9), bench_percentile(m, nm, 99.99),
        m[nm - 1], bench_percentile(f, nf, 50), bench_percentile(f, nf, 99),
        bench_percentile(f, nf, 99.9), bench_percentile(f, nf, 99.99), f[nf - 1], minflt, overhead,
        stalls_1us, stalls_10us);
    return 0;
}
