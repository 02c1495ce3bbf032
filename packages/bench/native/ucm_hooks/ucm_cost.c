/*
 * ucm_cost: nanoseconds per hooked memory call, written once against libucm's event API and
 * compiled twice: against heaphook's ucm_compat.h (linked to libheaphook_ucm.so; run preloaded
 * or not) and against UCX's <ucm/api/ucm.h> (linked to libucm.so).
 *
 *   ucm_cost [--iters=N] [--reps=R] [--no-hooks] [--only=loop]
 *
 * Registers one counting handler for VM_MAPPED | VM_UNMAPPED | MMAP | MUNMAP (unless
 * --no-hooks), then runs each loop R times. One iteration of a loop makes its calls twice, in
 * the same process and within microseconds: once through the hooked functions (mmap, munmap,
 * ...: the hook, its handler, the system call) and once as raw system calls (syscall(2), which
 * no hook sees: the baseline, the same kernel work), alternating which goes first, each timed
 * with clock_gettime. The cost of the hook in one iteration is the difference; the machine's
 * drift (other processes, frequency, the address-space layout) moves both halves alike, so it
 * cancels instead of swamping the 2-10% the hooks add to a system call. Per repetition: the
 * median raw time, the median hooked time and the median difference, per call; per loop: the
 * best raw and hooked medians and the median of the differences over the repetitions. The
 * counted events of every repetition are checked against what the loop implies (the raw halves
 * raise none). Prints one JSON line:
 *   {"impl":..., "mode":..., "hooks":bool, "iters":N, "reps":R, "ok":bool,
 *    "loops":[{"name","calls","base_ns_per_call","ns_per_call","cost_ns_per_call",
 *              "events":{...},"expected":{...},"match"}...]}
 * base_ns_per_call: the raw system calls; ns_per_call: the hooked calls; cost_ns_per_call: the
 * median per-iteration difference. Exit 2 when a count does not match.
 */
/* _GNU_SOURCE comes from the build (heaphook_add_test_program), as for the workloads. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef UCM_COST_HEAPHOOK
#include "heaphook/ucm_compat.h"
#define IMPL "heaphook"
#else
#include <ucm/api/ucm.h>
#define IMPL "libucm"
#endif

enum { C_MAPPED, C_UNMAPPED, C_MMAP, C_MUNMAP, C_N };
static const char *const count_names[C_N] = {"vm_mapped", "vm_unmapped", "mmap", "munmap"};
static volatile unsigned long counts[C_N];
static volatile unsigned long bytes_mapped, bytes_unmapped;

static void on_event(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    (void)arg;
    switch (type) {
        case UCM_EVENT_VM_MAPPED:
            counts[C_MAPPED]++;
            bytes_mapped += ev->vm_mapped.size;
            break;
        case UCM_EVENT_VM_UNMAPPED:
            counts[C_UNMAPPED]++;
            bytes_unmapped += ev->vm_unmapped.size;
            break;
        case UCM_EVENT_MMAP:
            counts[C_MMAP]++;
            break;
        case UCM_EVENT_MUNMAP:
            counts[C_MUNMAP]++;
            break;
        default:
            break;
    }
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "ucm_cost: %s: %s\n", what, strerror(errno));
    exit(1);
}

#define KIB 4096ul
#define MIB (1ul << 20)

/* Each loop: setup (not timed, events not counted); per iteration `hooked` (calls_per_iter
 * calls through the hooked functions) and `raw` (the same system calls made with syscall(2));
 * teardown. Expected events per iteration. */
struct loop {
    const char *name;
    int calls_per_iter;
    unsigned long expect[C_N]; /* per iteration */
    void (*setup)(void);
    void (*hooked)(void);
    void (*raw)(void);
    void (*teardown)(void);
};

static void *region;
static char *brk_base; /* the break at setup: every iteration returns to it */
static int shm_id = -1;
static void nop(void) {}

static void *raw_mmap(size_t len) {
    long p =
        syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == -1) die("raw mmap");
    return (void *)p;
}
static void raw_munmap(void *p, size_t len) {
    if (syscall(SYS_munmap, p, len) != 0) die("raw munmap");
}

static void hooked_mmap(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    if (munmap(p, len) != 0) die("munmap");
}
static void hooked_mmap_4k(void) {
    hooked_mmap(KIB);
}
static void raw_mmap_4k(void) {
    raw_munmap(raw_mmap(KIB), KIB);
}
static void hooked_mmap_1m(void) {
    hooked_mmap(MIB);
}
static void raw_mmap_1m(void) {
    raw_munmap(raw_mmap(MIB), MIB);
}

static void setup_small_region(void) {
    region = mmap(NULL, 64 * KIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) die("mmap");
}
static void teardown_small_region(void) {
    if (munmap(region, 64 * KIB) != 0) die("munmap");
}
/* 64 KiB -> 128 KiB (may move) and back */
static void hooked_mremap(void) {
    void *p = mremap(region, 64 * KIB, 128 * KIB, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) die("mremap grow");
    region = p;
    p = mremap(region, 128 * KIB, 64 * KIB, 0);
    if (p == MAP_FAILED) die("mremap shrink");
}
static void raw_mremap(void) {
    long p = syscall(SYS_mremap, region, 64 * KIB, 128 * KIB, MREMAP_MAYMOVE, NULL);
    if (p == -1) die("raw mremap grow");
    region = (void *)p;
    if (syscall(SYS_mremap, region, 128 * KIB, 64 * KIB, 0, NULL) == -1) die("raw mremap shrink");
}
static void hooked_madvise(void) {
    if (madvise(region, 64 * KIB, MADV_DONTNEED) != 0) die("madvise");
}
static void raw_madvise(void) {
    if (syscall(SYS_madvise, region, 64 * KIB, MADV_DONTNEED) != 0) die("raw madvise");
}
static void setup_brk(void) {
    brk_base = sbrk(0);
}
static void hooked_sbrk(void) {
    if (sbrk(64 * KIB) == (void *)-1) die("sbrk up");
    if (sbrk(-(intptr_t)(64 * KIB)) == (void *)-1) die("sbrk down");
}
/* What sbrk does underneath: brk to the new end. The break ends where it started, so the C
 * library's cached break stays right. */
static void raw_sbrk(void) {
    if ((char *)syscall(SYS_brk, brk_base + 64 * KIB) != brk_base + 64 * KIB) die("raw brk up");
    if ((char *)syscall(SYS_brk, brk_base) != brk_base) die("raw brk down");
}
static void setup_shm(void) {
    shm_id = shmget(IPC_PRIVATE, 64 * KIB, IPC_CREAT | 0600);
    if (shm_id < 0) die("shmget");
}
static void teardown_shm(void) {
    shmctl(shm_id, IPC_RMID, NULL);
    shm_id = -1;
}
static void hooked_shm(void) {
    void *p = shmat(shm_id, NULL, 0);
    if (p == (void *)-1) die("shmat");
    if (shmdt(p) != 0) die("shmdt");
}
static void raw_shm(void) {
    long p = syscall(SYS_shmat, shm_id, NULL, 0);
    if (p == -1) die("raw shmat");
    if (syscall(SYS_shmdt, (void *)p) != 0) die("raw shmdt");
}

/*                      name            calls  mapped unmapped mmap munmap */
static const struct loop loops[] = {
    {"mmap_munmap_4k", 2, {1, 1, 1, 1}, nop, hooked_mmap_4k, raw_mmap_4k, nop},
    {"mmap_munmap_1m", 2, {1, 1, 1, 1}, nop, hooked_mmap_1m, raw_mmap_1m, nop},
    /* mremap: VM_UNMAPPED of the old range, VM_MAPPED of the new one, per call */
    {"mremap_grow_shrink",
     2,
     {2, 2, 0, 0},
     setup_small_region,
     hooked_mremap,
     raw_mremap,
     teardown_small_region},
    {"madvise_dontneed",
     1,
     {0, 1, 0, 0},
     setup_small_region,
     hooked_madvise,
     raw_madvise,
     teardown_small_region},
    /* sbrk: growing raises VM_MAPPED after, shrinking VM_UNMAPPED first */
    {"sbrk_up_down", 2, {1, 1, 0, 0}, setup_brk, hooked_sbrk, raw_sbrk, nop},
    {"shmat_shmdt", 2, {1, 1, 0, 0}, setup_shm, hooked_shm, raw_shm, teardown_shm},
};
#define NLOOPS (sizeof loops / sizeof loops[0])

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
static double median_i64(int64_t *v, long n) {
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
}
static double median_d(double *v, long n) {
    for (long i = 1; i < n; i++)
        for (long j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct result {
    double base, hooked, cost; /* ns per call */
};

static int64_t *raw_t, *hooked_t, *diff_t; /* per iteration, allocated once in main */

/* `reps` repetitions of `iters` interleaved iterations (see the top of the file); counts of the
 * last repetition in got[]; *match cleared when any repetition counted other than expected. */
static struct result measure(const struct loop *lp, long iters, long reps, int counting,
                             unsigned long got[C_N], int *match) {
    struct result best = {1e300, 1e300, 0};
    double costs[reps];
    for (long r = 0; r < reps; r++) {
        lp->setup();
        unsigned long before[C_N];
        for (int c = 0; c < C_N; c++) before[c] = counts[c];
        for (long i = 0; i < iters; i++) {
            /* alternate which goes first, so neither always finds the caches the other left */
            bool raw_first = (i & 1) != 0;
            uint64_t t0 = now_ns();
            (raw_first ? lp->raw : lp->hooked)();
            uint64_t t1 = now_ns();
            (raw_first ? lp->hooked : lp->raw)();
            uint64_t t2 = now_ns();
            raw_t[i] = (int64_t)(raw_first ? t1 - t0 : t2 - t1);
            hooked_t[i] = (int64_t)(raw_first ? t2 - t1 : t1 - t0);
            diff_t[i] = hooked_t[i] - raw_t[i];
        }
        for (int c = 0; c < C_N; c++) {
            got[c] = counts[c] - before[c];
            unsigned long want = counting ? lp->expect[c] * (unsigned long)iters : 0;
            if (got[c] != want) *match = 0;
        }
        lp->teardown();
        double per = lp->calls_per_iter;
        double base = median_i64(raw_t, iters) / per;
        double hooked = median_i64(hooked_t, iters) / per;
        costs[r] = median_i64(diff_t, iters) / per;
        if (base < best.base) best.base = base;
        if (hooked < best.hooked) best.hooked = hooked;
    }
    best.cost = median_d(costs, reps);
    return best;
}

static void warm_up(const char *only, long iters) {
    for (size_t l = 0; l < NLOOPS; l++) {
        if (only && strcmp(only, loops[l].name)) continue;
        loops[l].setup();
        for (long i = 0; i < iters / 10 + 1; i++) {
            loops[l].hooked();
            loops[l].raw();
        }
        loops[l].teardown();
    }
}

int main(int argc, char **argv) {
    long iters = 20000, reps = 5;
    int hooks = 1;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--iters=", 8))
            iters = atol(argv[i] + 8);
        else if (!strncmp(argv[i], "--reps=", 7))
            reps = atol(argv[i] + 7);
        else if (!strcmp(argv[i], "--no-hooks"))
            hooks = 0;
        else if (!strncmp(argv[i], "--only=", 7))
            only = argv[i] + 7;
        else {
            fprintf(stderr, "usage: ucm_cost [--iters=N] [--reps=R] [--no-hooks] [--only=loop]\n");
            return 64;
        }
    }
    if (iters < 1 || reps < 1) {
        fprintf(stderr, "ucm_cost: --iters and --reps must be positive\n");
        return 64;
    }
    raw_t = malloc(sizeof *raw_t * (size_t)iters);
    hooked_t = malloc(sizeof *hooked_t * (size_t)iters);
    diff_t = malloc(sizeof *diff_t * (size_t)iters);
    if (!raw_t || !hooked_t || !diff_t) die("malloc");
    (void)setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    /* warm up: fault in code paths, the kernel's VMA caches */
    warm_up(only, iters);
    if (hooks) {
        ucs_status_t st = ucm_set_event_handler(
            UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED | UCM_EVENT_MMAP | UCM_EVENT_MUNMAP, 0,
            on_event, NULL);
        if (st != UCS_OK) {
            fprintf(stderr, "ucm_cost: ucm_set_event_handler failed: %d\n", (int)st);
            return 3;
        }
    }
    const char *mode = "none";
#ifdef UCM_COST_HEAPHOOK
    mode = heaphook_ucm_install_mode();
#else
    if (hooks) mode = "libucm";
#endif
    /* warm up the hooked paths, not counted */
    warm_up(only, iters);
    unsigned long got[NLOOPS][C_N];
    char out[8192];
    size_t o = 0;
    int all_ok = 1;
    o +=
        (size_t)snprintf(out + o, sizeof out - o,
                         "{\"impl\":\"%s\",\"mode\":\"%s\",\"hooks\":%s,\"iters\":%ld,\"reps\":%ld,"
                         "\"loops\":[",
                         IMPL, mode, hooks ? "true" : "false", iters, reps);
    int first = 1;
    for (size_t l = 0; l < NLOOPS; l++) {
        const struct loop *lp = &loops[l];
        if (only && strcmp(only, lp->name)) continue;
        int match = 1;
        struct result m = measure(lp, iters, reps, hooks, got[l], &match);
        if (!match) all_ok = 0;
        o += (size_t)snprintf(out + o, sizeof out - o,
                              "%s{\"name\":\"%s\",\"calls\":%ld,\"base_ns_per_call\":%.2f,"
                              "\"ns_per_call\":%.2f,\"cost_ns_per_call\":%.2f,\"events\":{",
                              first ? "" : ",", lp->name, iters * lp->calls_per_iter, m.base,
                              m.hooked, m.cost);
        for (int c = 0; c < C_N; c++)
            o += (size_t)snprintf(out + o, sizeof out - o, "%s\"%s\":%lu", c ? "," : "",
                                  count_names[c], got[l][c]);
        o += (size_t)snprintf(out + o, sizeof out - o, "},\"expected\":{");
        for (int c = 0; c < C_N; c++)
            o += (size_t)snprintf(out + o, sizeof out - o, "%s\"%s\":%lu", c ? "," : "",
                                  count_names[c], hooks ? lp->expect[c] * (unsigned long)iters : 0);
        o += (size_t)snprintf(out + o, sizeof out - o, "},\"match\":%s}", match ? "true" : "false");
        first = 0;
    }
    o += (size_t)snprintf(out + o, sizeof out - o, "],\"ok\":%s}\n", all_ok ? "true" : "false");
    fputs(out, stdout);
    fflush(stdout);
    if (!all_ok) {
        fprintf(stderr, "ucm_cost: event counts differ from what the loops imply\n");
        return 2;
    }
    return 0;
}
