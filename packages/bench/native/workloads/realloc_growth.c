/*
 * realloc_growth: many buffers growing by appends, as string builders, JSON writers and
 * dynamic arrays do. Each append reallocs the buffer to exactly its new length (the naive
 * pattern much C code has), so the allocator's in-place growth and copy paths decide the time.
 * A buffer that reaches its random limit (mostly up to 32 KiB, some up to 1 MiB) is checked in
 * full and freed, and a new one starts in its place.
 * Every byte has a known value (a function of buffer, generation and position): after each
 * realloc the bytes around the old end are checked, and each buffer is checked in full when
 * it is retired. --size: number of appends.
 */
#include "bench.h"

#define BUFFERS 128

typedef struct {
    unsigned char *p;
    size_t len;
    size_t limit;
    uint64_t gen;
} buf_t;

static buf_t bufs[BUFFERS];

static inline unsigned char byte_at(size_t b, uint64_t gen, size_t i) {
    return (unsigned char)(i * 131u + gen * 17u + b * 29u + (i >> 8));
}

static size_t pick_limit(rng_t *r) {
    return rng_pct(r) < 80 ? (size_t)rng_range(r, 1024, 32768)
                           : (size_t)rng_range(r, 32769, 1 << 20);
}

static size_t pick_append(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 70) return (size_t)rng_range(r, 1, 64);
    if (pct < 95) return (size_t)rng_range(r, 65, 1024);
    return (size_t)rng_range(r, 1025, 16384);
}

static uint64_t verify_all(size_t b) {
    buf_t *x = &bufs[b];
    uint64_t sum = 0;
    for (size_t i = 0; i < x->len; i++) {
        unsigned char want = byte_at(b, x->gen, i);
        if (x->p[i] != want)
            bench_fail(
                "realloc_growth: buffer %zu (generation %llu, %zu bytes) byte %zu is %u, expected "
                "%u",
                b, (unsigned long long)x->gen, x->len, i, x->p[i], want);
        sum += want;
    }
    return sum + x->len;
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 1000000, 1);
    rng_t r;
    rng_seed(&r, a.seed);
    for (size_t b = 0; b < BUFFERS; b++) bufs[b].limit = pick_limit(&r);
    uint64_t checksum = 0, reallocs = 0, retired = 0, bytes = 0;
    long long t0 = now_ns();
    for (long long op = 0; op < a.size; op++) {
        size_t b = (size_t)(rng_next(&r) % BUFFERS);
        buf_t *x = &bufs[b];
        size_t k = pick_append(&r);
        size_t old = x->len;
        unsigned char *np = realloc(x->p, old + k);
        if (!np) bench_fail("realloc(%p, %zu) returned NULL", (void *)x->p, old + k);
        x->p = np;
        reallocs++;
        /* the bytes around the old end (and the first) must have survived the move */
        if (old) {
            if (np[0] != byte_at(b, x->gen, 0))
                bench_fail("realloc_growth: buffer %zu lost its first byte", b);
            size_t from = old > 16 ? old - 16 : 0;
            for (size_t i = from; i < old; i++)
                if (np[i] != byte_at(b, x->gen, i))
                    bench_fail(
                        "realloc_growth: buffer %zu byte %zu changed by realloc to %zu bytes", b, i,
                        old + k);
        }
        for (size_t i = old; i < old + k; i++) np[i] = byte_at(b, x->gen, i);
        x->len = old + k;
        bytes += k;
        if (x->len >= x->limit) {
            checksum += verify_all(b);
            free(x->p);
            x->p = NULL;
            x->len = 0;
            x->gen++;
            x->limit = pick_limit(&r);
            retired++;
        }
    }
    for (size_t b = 0; b < BUFFERS; b++) {
        if (bufs[b].p) {
            checksum += verify_all(b);
            free(bufs[b].p);
            bufs[b].p = NULL;
        }
    }
    long long t1 = now_ns();
    double secs = (double)(t1 - t0) / 1e9;
    printf(
        "{\"workload\":\"realloc_growth\",\"ok\":true,\"ops\":%llu,\"bytes\":%llu,\"retired\":%llu,"
        "\"checksum\":\"%016llx\",\"elapsed_ns\":%lld,\"ops_per_s\":%.0f}\n",
        (unsigned long long)reallocs, (unsigned long long)bytes, (unsigned long long)retired,
        (unsigned long long)checksum, t1 - t0, (double)reallocs / secs);
    return 0;
}
