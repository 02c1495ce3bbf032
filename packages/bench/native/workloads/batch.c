/*
 * batch: one size at a time, in batches, after glibc's bench-malloc-simple.
 * For each size of SIZES and each batch length of BATCHES, the thread allocates a batch of blocks
 * of that one size, then frees the first half oldest first (FIFO) and the second half newest
 * first (LIFO), and starts over. This is the simplest pattern there is and the one where the
 * fast path of malloc and free shows alone: every block comes from one size class, nothing is
 * shared between threads, and the two free orders hand the blocks back in the order a free list
 * that is a stack (LIFO) likes and in the order it does not.
 * Short batches fit in the thread caches of most allocators; the longest ones do not.
 * --size: allocations in total, split evenly between the (size, batch length) pairs;
 * --threads is ignored.
 */
#include "bench.h"

static const size_t SIZES[] = {16, 32, 64, 128, 256, 512, 1024};
static const long long BATCHES[] = {25, 100, 400, 1600};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define NBATCHES (sizeof BATCHES / sizeof BATCHES[0])
#define MAX_BATCH 1600

static struct {
    void *p;
    uint64_t tag;
} blocks[MAX_BATCH];

static uint64_t free_block(size_t k, size_t size) {
    uint64_t sum = check_stamp(blocks[k].p, size, blocks[k].tag, "batch");
    free(blocks[k].p);
    blocks[k].p = NULL;
    return sum;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 6000000, 1);
    rng_t r;
    rng_seed(&r, a.seed);
    /* every (size, batch length) pair makes the same number of allocations, in whole batches */
    long long per_pair = a.size / (long long)(NSIZES * NBATCHES);
    uint64_t checksum = 0, bytes = 0, allocs = 0, frees = 0;
    long long t0 = now_ns();
    for (size_t s = 0; s < NSIZES; s++) {
        const size_t size = SIZES[s];
        for (size_t b = 0; b < NBATCHES; b++) {
            const long long n = BATCHES[b];
            long long rounds = per_pair / n;
            if (rounds < 1) rounds = 1;
            for (long long round = 0; round < rounds; round++) {
                for (long long k = 0; k < n; k++) {
                    /* the tags come from the seed: another seed, another checksum */
                    uint64_t tag = rng_next(&r);
                    blocks[k].p = bench_xmalloc(size);
                    blocks[k].tag = tag;
                    stamp(blocks[k].p, size, tag);
                }
                allocs += (uint64_t)n;
                bytes += (uint64_t)n * size;
                /* the first half oldest first, then the second half newest first */
                for (long long k = 0; k < n / 2; k++) checksum += free_block((size_t)k, size);
                for (long long k = n - 1; k >= n / 2; k--) checksum += free_block((size_t)k, size);
                frees += (uint64_t)n;
            }
        }
    }
    long long t1 = now_ns();
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"batch\",\"ok\":true,\"ops\":%llu,\"bytes\":%llu,\"checksum\":\"%016llx\","
        "\"elapsed_ns\":%lld,"
        "\"ops_per_s\":%.0f}\n",
        (unsigned long long)(allocs + frees), (unsigned long long)bytes,
        (unsigned long long)checksum, t1 - t0, (double)(allocs + frees) / secs);
    return 0;
}
