/*
 * churn: small-object churn on one thread.
 * A table of SLOTS live objects; each operation picks a slot at random, checks and frees the
 * object there, and allocates a new one of a small random size (mostly 16-64 bytes, some up to
 * 1 KiB), as a parser, an interpreter or a message-passing node does all day.
 * --size: number of replace operations.
 */
#include "bench.h"

#define SLOTS 20000

static struct {
    void *p;
    uint32_t size;
    uint64_t tag;
} slots[SLOTS];

static size_t small_size(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 70) return (size_t)rng_range(r, 16, 64);
    if (pct < 95) return (size_t)rng_range(r, 65, 256);
    return (size_t)rng_range(r, 257, 1024);
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 2000000, 1);
    rng_t r;
    rng_seed(&r, a.seed);
    uint64_t checksum = 0, bytes = 0, frees = 0;
    long long t0 = now_ns();
    for (long long i = 0; i < a.size; i++) {
        uint32_t k = (uint32_t)(rng_next(&r) % SLOTS);
        if (slots[k].p) {
            checksum += check_stamp(slots[k].p, slots[k].size, slots[k].tag, "churn");
            free(slots[k].p);
            frees++;
        }
        size_t n = small_size(&r);
        uint64_t tag = mix_tag((uint64_t)i, n);
        void *p = bench_xmalloc(n);
        stamp(p, n, tag);
        slots[k].p = p;
        slots[k].size = (uint32_t)n;
        slots[k].tag = tag;
        bytes += n;
    }
    for (uint32_t k = 0; k < SLOTS; k++) {
        if (slots[k].p) {
            checksum += check_stamp(slots[k].p, slots[k].size, slots[k].tag, "churn (final)");
            free(slots[k].p);
            frees++;
        }
    }
    long long t1 = now_ns();
    if (frees != (uint64_t)a.size)
        bench_fail("churn: %llu frees for %lld allocations", (unsigned long long)frees, a.size);
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"churn\",\"ok\":true,\"ops\":%lld,\"bytes\":%llu,\"checksum\":\"%016llx\","
        "\"elapsed_ns\":%lld,"
        "\"ops_per_s\":%.0f}\n",
        a.size * 2, (unsigned long long)bytes, (unsigned long long)checksum, t1 - t0,
        (double)a.size * 2 / secs);
    return 0;
}
