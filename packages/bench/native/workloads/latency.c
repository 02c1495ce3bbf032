/*
 * latency: the allocation pattern of a real-time control loop.
 * A loop runs at a fixed rate (one cycle every PERIOD_NS, woken by clock_nanosleep with an
 * absolute deadline); each cycle does OPS_PER_CYCLE mixed malloc/free calls on a table of
 * live blocks (mostly small messages, some KiB-sized, now and then a 64-256 KiB buffer, as a
 * ROS 2 node handling point clouds does) and touches what it allocated. Each malloc and each
 * free is timed on its own with CLOCK_MONOTONIC.
 * After an untimed warm-up (a tenth of the cycles), the timed phase reports the latency
 * percentiles p50, p99, p99.9, p99.99 and max (ns, clock-read cost included; it is reported as
 * clock_overhead_ns), the maximum of malloc and of free separately, the minor and major page
 * faults taken during the timed phase (by the allocator and by first touches of what it
 * returned), and the cycles that overran their period (woken late or worked too long).
 * The loop does not lock memory or change its scheduling class (that needs privileges the
 * bench does not assume); it sets its timer slack to 1 ns. --size: timed cycles.
 */
#include <sys/mman.h>
#include <sys/prctl.h>

#include "bench.h"

#define PERIOD_NS 100000LL
#define OPS_PER_CYCLE 16
#define SLOTS 1024

static struct {
    void *p;
    uint32_t size;
    uint64_t tag;
} slots[SLOTS];

static size_t rt_size(rng_t *r) {
    unsigned pct = rng_pct(r);
    if (pct < 90) return (size_t)rng_range(r, 16, 1024);
    if (pct < 99) return (size_t)rng_range(r, 1025, 16384);
    return (size_t)rng_range(r, 65536, 262144);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t pct_of(const uint32_t *sorted, size_t n, double p) {
    /* nearest rank */
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

static uint64_t checksum = 0;
static uint64_t serial = 0;

/* One cycle. When lat != NULL the calls are timed into lat[*n]. */
static void cycle(rng_t *r, uint32_t *lat, size_t *n, uint32_t *malloc_max, uint32_t *free_max) {
    for (int i = 0; i < OPS_PER_CYCLE; i++) {
        uint32_t k = (uint32_t)(rng_next(r) % SLOTS);
        if (slots[k].p) {
            void *p = slots[k].p;
            checksum += check_stamp(p, slots[k].size, slots[k].tag, "latency");
            long long t0 = now_ns();
            free(p);
            long long t1 = now_ns();
            slots[k].p = NULL;
            if (lat) {
                uint32_t d = (uint32_t)(t1 - t0);
                lat[(*n)++] = d;
                if (d > *free_max) *free_max = d;
            }
        } else {
            size_t sz = rt_size(r);
            long long t0 = now_ns();
            void *p = malloc(sz);
            long long t1 = now_ns();
            if (!p) bench_fail("malloc(%zu) returned NULL", sz);
            uint64_t tag = mix_tag(serial++, sz);
            stamp(p, sz, tag);
            slots[k].p = p;
            slots[k].size = (uint32_t)sz;
            slots[k].tag = tag;
            if (lat) {
                uint32_t d = (uint32_t)(t1 - t0);
                lat[(*n)++] = d;
                if (d > *malloc_max) *malloc_max = d;
            }
        }
    }
}

static void sleep_until(long long deadline) {
    struct timespec ts = {(time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

int main(int argc, char **argv) {
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 20000, 1);
    rng_t r;
    rng_seed(&r, a.seed);
    /* wake up on time: the default 50 us timer slack would be half the period */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    long long cycles = a.size, warm = a.size / 10 < 100 ? 100 : a.size / 10;
    size_t cap = (size_t)cycles * OPS_PER_CYCLE;
    /* the sample buffer comes from mmap and is touched now, so recording never faults */
    uint32_t *lat = mmap(NULL, cap * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (lat == MAP_FAILED) bench_fail("mmap of %zu samples", cap);
    memset(lat, 0, cap * sizeof(uint32_t));

    long long overhead = 1LL << 40;
    for (int i = 0; i < 1000; i++) {
        long long t0 = now_ns(), t1 = now_ns();
        if (t1 - t0 < overhead) overhead = t1 - t0;
    }

    uint32_t mmax = 0, fmax = 0;
    size_t n = 0;
    long long next = now_ns();
    for (long long c = 0; c < warm; c++) {
        cycle(&r, NULL, NULL, NULL, NULL);
        next += PERIOD_NS;
        sleep_until(next);
    }
    long overruns = 0;
    long minflt0 = self_minflt(), majflt0 = self_majflt();
    long long t0 = now_ns();
    next = t0;
    for (long long c = 0; c < cycles; c++) {
        cycle(&r, lat, &n, &mmax, &fmax);
        next += PERIOD_NS;
        if (now_ns() > next) overruns++;
        sleep_until(next);
    }
    long long t1 = now_ns();
    long minflt = self_minflt() - minflt0, majflt = self_majflt() - majflt0;
    for (int k = 0; k < SLOTS; k++) {
        if (slots[k].p) {
            checksum += check_stamp(slots[k].p, slots[k].size, slots[k].tag, "latency (final)");
            free(slots[k].p);
        }
    }
    if (n != cap) bench_fail("latency: %zu samples, expected %zu", n, cap);
    qsort(lat, n, sizeof(uint32_t), cmp_u32);
    printf(
        "{\"workload\":\"latency\",\"ok\":true,\"ops\":%zu,\"checksum\":\"%016llx\",\"elapsed_ns\":"
        "%lld,"
        "\"period_ns\":%lld,\"cycles\":%lld,\"p50_ns\":%u,\"p99_ns\":%u,\"p99_9_ns\":%u,\"p99_99_"
        "ns\":%u,\"max_ns\":%u,"
        "\"malloc_max_ns\":%u,\"free_max_ns\":%u,\"minflt\":%ld,\"majflt\":%ld,\"overruns\":%ld,"
        "\"clock_overhead_ns\":%lld}\n",
        n, (unsigned long long)checksum, t1 - t0, PERIOD_NS, cycles, pct_of(lat, n, 50),
        pct_of(lat, n, 99), pct_of(lat, n, 99.9), pct_of(lat, n, 99.99), lat[n - 1], mmax, fmax,
        minflt, majflt, overruns, overhead);
    munmap(lat, cap * sizeof(uint32_t));
    return 0;
}
