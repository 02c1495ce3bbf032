/*
 * Shared helpers of the heaphook bench workloads.
 *
 * Contract of every workload program (the driver relies on it):
 *   - arguments: --size N (the amount of work, linear in run time), --threads T (ignored by
 *     single-threaded workloads), --seed S (fixed default; same seed => same operations);
 *     knobs of some programs, ignored by the others (the bench's --quick profile sets them):
 *     --probe-ms M (length of the machine-stall probe of latency and latency_b2b, default
 *     250) and --slots K (latency_b2b's table size, default 20000);
 *   - all randomness comes from the seeded generator below, so the operations, and therefore the
 *     reported "checksum", are identical under every allocator; the driver compares checksums
 *     across allocators;
 *   - every block is stamped when allocated and checked before it is freed; any mismatch (an
 *     allocator that hands out overlapping memory, a realloc that loses data, ...) prints
 *     "verification failed: ..." on stderr and exits 2;
 *   - on success, one JSON object on one line on stdout is the last thing printed.
 */
#ifndef HEAPHOOK_BENCH_H
#define HEAPHOOK_BENCH_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- seeded generator: splitmix64 (tiny state, good enough for workloads) ---- */
typedef struct {
    uint64_t s;
} rng_t;

static inline void rng_seed(rng_t *r, uint64_t seed) {
    r->s = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
}

static inline uint64_t rng_next(rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static inline uint64_t rng_range(rng_t *r, uint64_t lo, uint64_t hi) {
    return lo + rng_next(r) % (hi - lo + 1);
}

/* percent in [0, 100) */
static inline unsigned rng_pct(rng_t *r) {
    return (unsigned)(rng_next(r) % 100);
}

/* ---- arguments ---- */
typedef struct {
    long long size;
    int threads;
    uint64_t seed;
    /* 0: the program's own default */
    long long probe_ms;
    long long slots;
} bench_args_t;

static inline void bench_parse_args(int argc, char **argv, bench_args_t *a, long long default_size,
                                    int default_threads) {
    a->size = default_size;
    a->threads = default_threads;
    a->seed = 42;
    a->probe_ms = 0;
    a->slots = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        const char *v = NULL;
        const char *eq = strchr(k, '=');
        char key[32];
        if (eq) {
            size_t n = (size_t)(eq - k) < sizeof key - 1 ? (size_t)(eq - k) : sizeof key - 1;
            memcpy(key, k, n);
            key[n] = '\0';
            v = eq + 1;
        } else {
            snprintf(key, sizeof key, "%s", k);
            if (i + 1 < argc) v = argv[++i];
        }
        if (!v) goto bad;
        char *end = NULL;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (errno || !end || *end || n <= 0) goto bad;
        if (strcmp(key, "--size") == 0) {
            a->size = n;
        } else if (strcmp(key, "--threads") == 0) {
            a->threads = (int)n;
        } else if (strcmp(key, "--seed") == 0) {
            a->seed = (uint64_t)n;
        } else if (strcmp(key, "--probe-ms") == 0) {
            a->probe_ms = n;
        } else if (strcmp(key, "--slots") == 0) {
            a->slots = n;
        } else {
            goto bad;
        }
        continue;
    bad:
        fprintf(stderr,
                "usage: %s [--size N] [--threads T] [--seed S] [--probe-ms M] [--slots K]  (bad "
                "argument: %s)\n",
                argv[0], k);
        exit(64);
    }
}

/* ---- failure ---- */
static inline void bench_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static inline void bench_fail(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "verification failed: %s\n", buf);
    fflush(stderr);
    _exit(2);
}

static inline void *bench_xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) bench_fail("malloc(%zu) returned NULL", n);
    return p;
}

/* ---- block stamps ----
 * A stamped block holds its tag in its first 8 bytes and in its last 8 bytes, and the tag's low
 * byte everywhere in between (the program touches all of its memory, as real programs do).
 * Blocks are at least 16 bytes. */
static inline void stamp(void *p, size_t size, uint64_t tag) {
    unsigned char *b = (unsigned char *)p;
    if (size > 16) memset(b + 8, (int)(tag & 0xff), size - 16);
    memcpy(b, &tag, 8);
    memcpy(b + size - 8, &tag, 8);
}

/* Returns the tag read back; fails the run if the block does not carry `tag`. */
static inline uint64_t check_stamp(const void *p, size_t size, uint64_t tag, const char *what) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t head, tail;
    memcpy(&head, b, 8);
    memcpy(&tail, b + size - 8, 8);
    unsigned char mid = size > 16 ? b[8 + (size - 16) / 2] : (unsigned char)(tag & 0xff);
    if (head != tag || tail != tag || mid != (unsigned char)(tag & 0xff))
        bench_fail("%s: block %p of %zu bytes corrupted (tag %016llx, head %016llx, tail %016llx)",
                   what, p, size, (unsigned long long)tag, (unsigned long long)head,
                   (unsigned long long)tail);
    return head;
}

static inline uint64_t mix_tag(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL);
    z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ULL;
    return z ^ (z >> 32);
}

/* ---- time and process figures ---- */
static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long self_minflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static inline long self_majflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_majflt;
}

static inline long long self_maxrss_bytes(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (long long)ru.ru_maxrss * 1024LL;
}

/* Current resident set size, from /proc/self/statm (no allocation: read(2) into a stack buffer). */
static inline long long self_rss_bytes(void) {
    char buf[128];
    long long pages = -1, resident = -1;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    if (sscanf(buf, "%lld %lld", &pages, &resident) != 2) return -1;
    return resident * (long long)sysconf(_SC_PAGESIZE);
}

/* ---- latency figures (latency, latency_b2b) ---- */
static inline int bench_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The p-th percentile of n sorted samples, nearest rank. */
static inline uint32_t bench_percentile(const uint32_t *sorted, size_t n, double p) {
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

/* What the machine does to a busy thread: gaps over 1 us and over 10 us between consecutive
 * clock reads (the thread was interrupted: a timer tick, another task, the hypervisor), per
 * second of a loop of probe_ns. */
static inline void bench_machine_stalls(long long probe_ns, double *over_1us, double *over_10us) {
    long long start = now_ns(), prev = start, n1 = 0, n10 = 0;
    while (prev - start < probe_ns) {
        long long t = now_ns(), gap = t - prev;
        if (gap > 1000) n1++;
        if (gap > 10000) n10++;
        prev = t;
    }
    const double seconds = (double)(prev - start) / 1e9;
    *over_1us = (double)n1 / seconds;
    *over_10us = (double)n10 / seconds;
}

/* The cheapest of 1000 back-to-back clock reads, ns: what every timed call includes. */
static inline long long bench_clock_overhead(void) {
    long long overhead = 1LL << 40;
    for (int i = 0; i < 1000; i++) {
        long long t0 = now_ns(), t1 = now_ns();
        if (t1 - t0 < overhead) overhead = t1 - t0;
    }
    return overhead;
}

/* Touches the top 256 KiB of this thread's stack, as real-time programs do, so that a timed
 * phase never faults in a stack page a deeper call path reaches for the first time. */
static void __attribute__((noinline, unused)) bench_prefault_stack(void) {
    volatile char stack[256 * 1024];
    for (size_t i = 0; i < sizeof stack; i += 4096) stack[i] = 0;
}

#endif
