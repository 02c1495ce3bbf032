/*
 * false_sharing: does the allocator put different threads' small objects on one cache line?
 * After Hoard's cache-thrash (active) and cache-scratch (passive) benchmarks:
 *   thrash:  every thread repeatedly allocates an 8-byte object, writes to it many times and
 *            frees it; an allocator that hands neighbouring blocks to different threads makes
 *            the cores fight over one cache line;
 *   scratch: the main thread first allocates one object per thread, back to back, and hands
 *            them over; each thread frees its object and goes on as in thrash; an allocator
 *            that gives a freed block back to the thread that freed it inherits the false sharing.
 * Each write is a volatile increment; each object is checked (every byte = REPS mod 256).
 * --size: objects per thread per phase; --threads: threads.
 */
#include <pthread.h>

#include "bench.h"

#define OBJ 8
#define REPS 500

typedef struct {
    pthread_barrier_t *barrier;
    void *handed; /* scratch: the object allocated by the main thread */
    long long iters;
    uint64_t checksum;
} job_t;

static void *worker(void *arg) {
    job_t *j = (job_t *)arg;
    pthread_barrier_wait(j->barrier);
    if (j->handed) free(j->handed);
    for (long long i = 0; i < j->iters; i++) {
        volatile unsigned char *p = bench_xmalloc(OBJ);
        for (int b = 0; b < OBJ; b++) p[b] = 0;
        for (int r = 0; r < REPS; r++)
            for (int b = 0; b < OBJ; b++) p[b]++;
        for (int b = 0; b < OBJ; b++) {
            if (p[b] != (unsigned char)(REPS & 0xff))
                bench_fail("false_sharing: byte %d of %p is %u after %d increments", b, (void *)p,
                           p[b], REPS);
            j->checksum += p[b];
        }
        free((void *)p);
    }
    return NULL;
}

static long long phase(int T, long long iters, int scratch, uint64_t *checksum) {
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)T + 1);
    job_t *jobs = calloc((size_t)T, sizeof(job_t));
    pthread_t *th = calloc((size_t)T, sizeof(pthread_t));
    if (!jobs || !th) bench_fail("calloc");
    for (int i = 0; i < T; i++) {
        jobs[i].barrier = &barrier;
        jobs[i].iters = iters;
        if (scratch) {
            jobs[i].handed = bench_xmalloc(OBJ);
            memset(jobs[i].handed, 0, OBJ);
        }
    }
    for (int i = 0; i < T; i++)
        if (pthread_create(&th[i], NULL, worker, &jobs[i]) != 0) bench_fail("pthread_create");
    long long t0 = now_ns();
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    long long t1 = now_ns();
    for (int i = 0; i < T; i++) *checksum += jobs[i].checksum;
    pthread_barrier_destroy(&barrier);
    free(jobs);
    free(th);
    return t1 - t0;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 20000, 2);
    int T = a.threads;
    uint64_t checksum = 0;
    long long thrash = phase(T, a.size, 0, &checksum);
    long long scratch = phase(T, a.size, 1, &checksum);
    uint64_t expected = (uint64_t)T * (uint64_t)a.size * 2 * OBJ * (REPS & 0xff);
    if (checksum != expected)
        bench_fail("false_sharing: checksum %llu, expected %llu", (unsigned long long)checksum,
                   (unsigned long long)expected);
    long long ops = (long long)T * a.size * 2;
    printf(
        "{\"workload\":\"false_sharing\",\"ok\":true,\"threads\":%d,\"ops\":%lld,\"checksum\":\"%"
        "016llx\","
        "\"thrash_ns\":%lld,\"scratch_ns\":%lld,\"elapsed_ns\":%lld,\"ops_per_s\":%.0f}\n",
        T, ops, (unsigned long long)checksum, thrash, scratch, thrash + scratch,
        (double)ops / ((double)(thrash + scratch) / 1e9));
    return 0;
}
