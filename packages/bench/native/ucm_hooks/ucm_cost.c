/*
 * ucm_cost: nanoseconds per hooked memory call, written once against libucm's event API and
 * compiled twice: against heaphook's ucm_compat.h (linked to libheaphook_ucm.so; run preloaded
 * or not) and against UCX's <ucm/api/ucm.h> (linked to libucm.so).
 *
 *   ucm_cost [--iters=N] [--reps=R] [--no-hooks]
 *
 * First runs each loop R times with no handler registered (nothing installed in relocation mode
 * or by libucm; in preload mode the wrappers are there but have no handler): the baseline, in
 * the same process and address-space layout (the layout alone moves a 4 KiB mmap by ~25% here).
 * Then registers one counting handler for VM_MAPPED | VM_UNMAPPED | MMAP | MUNMAP (unless
 * --no-hooks), runs each loop R times again, keeps the best time of each, checks the counted
 * events of every repetition against what the loop implies, and prints one JSON line:
 *   {"impl":..., "mode":..., "hooks":bool, "iters":N, "reps":R, "ok":bool,
 *    "loops":[{"name","calls","base_ns_per_call","ns_per_call","events":{...},"expected":{...},
 *              "match"}...]}
 * Exit 2 when a count does not match.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
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

/* Each loop: setup (not timed, events not counted), the timed body of `iters` iterations,
 * teardown. calls_per_iter hooked calls per iteration; expected events per iteration. */
struct loop {
    const char *name;
    int calls_per_iter;
    unsigned long expect[C_N]; /* per iteration */
    void (*setup)(void);
    void (*body)(long iters);
    void (*teardown)(void);
};

static void *region;
static int shm_id = -1;
static void nop(void) {}

static void body_mmap(long n, size_t len) {
    for (long i = 0; i < n; i++) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) die("mmap");
        if (munmap(p, len) != 0) die("munmap");
    }
}
static void body_mmap_4k(long n) {
    body_mmap(n, KIB);
}
static void body_mmap_1m(long n) {
    body_mmap(n, MIB);
}

static void setup_region(void) {
    region = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) die("mmap");
    /* keep only the first MiB mapped so the grow always has room in place (or moves) */
    if (munmap((char *)region + MIB, MIB) != 0) die("munmap");
}
static void teardown_region(void) {
    if (munmap(region, 2 * MIB) != 0) die("munmap");
}
static void body_mremap(long n) {
    for (long i = 0; i < n; i++) {
        void *p = mremap(region, 64 * KIB, 128 * KIB, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) die("mremap grow");
        region = p;
        p = mremap(region, 128 * KIB, 64 * KIB, 0);
        if (p == MAP_FAILED) die("mremap shrink");
    }
}
static void setup_small_region(void) {
    region = mmap(NULL, 64 * KIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) die("mmap");
}
static void teardown_small_region(void) {
    if (munmap(region, 64 * KIB) != 0) die("munmap");
}
static void body_madvise(long n) {
    for (long i = 0; i < n; i++)
        if (madvise(region, 64 * KIB, MADV_DONTNEED) != 0) die("madvise");
}
static void body_sbrk(long n) {
    for (long i = 0; i < n; i++) {
        if (sbrk(64 * KIB) == (void *)-1) die("sbrk up");
        if (sbrk(-(intptr_t)(64 * KIB)) == (void *)-1) die("sbrk down");
    }
}
static void setup_shm(void) {
    shm_id = shmget(IPC_PRIVATE, 64 * KIB, IPC_CREAT | 0600);
    if (shm_id < 0) die("shmget");
}
static void teardown_shm(void) {
    shmctl(shm_id, IPC_RMID, NULL);
    shm_id = -1;
}
static void body_shm(long n) {
    for (long i = 0; i < n; i++) {
        void *p = shmat(shm_id, NULL, 0);
        if (p == (void *)-1) die("shmat");
        if (shmdt(p) != 0) die("shmdt");
    }
}

/*                      name            calls  mapped unmapped mmap munmap */
static const struct loop loops[] = {
    {"mmap_munmap_4k", 2, {1, 1, 1, 1}, nop, body_mmap_4k, nop},
    {"mmap_munmap_1m", 2, {1, 1, 1, 1}, nop, body_mmap_1m, nop},
    /* mremap: VM_UNMAPPED of the old range, VM_MAPPED of the new one, per call */
    {"mremap_grow_shrink", 2, {2, 2, 0, 0}, setup_small_region, body_mremap, teardown_small_region},
    {"madvise_dontneed", 1, {0, 1, 0, 0}, setup_small_region, body_madvise, teardown_small_region},
    /* sbrk: growing raises VM_MAPPED after, shrinking VM_UNMAPPED first */
    {"sbrk_up_down", 2, {1, 1, 0, 0}, nop, body_sbrk, nop},
    {"shmat_shmdt", 2, {1, 1, 0, 0}, setup_shm, body_shm, teardown_shm},
};
#define NLOOPS (sizeof loops / sizeof loops[0])

/* Best time of `reps` runs of the loop, in ns per call; counts of the last repetition in got[];
 * *match cleared when any repetition counted other than want_factor * expect. */
static double measure(const struct loop *lp, long iters, long reps, int counting,
                      unsigned long got[C_N], int *match) {
    uint64_t best = UINT64_MAX;
    for (long r = 0; r < reps; r++) {
        lp->setup();
        unsigned long before[C_N];
        for (int c = 0; c < C_N; c++) before[c] = counts[c];
        uint64_t t0 = now_ns();
        lp->body(iters);
        uint64_t t1 = now_ns();
        for (int c = 0; c < C_N; c++) {
            got[c] = counts[c] - before[c];
            unsigned long want = counting ? lp->expect[c] * (unsigned long)iters : 0;
            if (got[c] != want) *match = 0;
        }
        lp->teardown();
        if (t1 - t0 < best) best = t1 - t0;
    }
    return (double)best / ((double)iters * lp->calls_per_iter);
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
    (void)setup_region;
    (void)teardown_region;
    (void)setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    /* warm up: fault in code paths, the kernel's VMA caches */
    for (size_t l = 0; l < NLOOPS; l++) {
        if (only && strcmp(only, loops[l].name)) continue;
        loops[l].setup();
        loops[l].body(iters / 10 + 1);
        loops[l].teardown();
    }
    double base[NLOOPS];
    int base_ok = 1;
    unsigned long got[NLOOPS][C_N];
    for (size_t l = 0; l < NLOOPS; l++) {
        if (only && strcmp(only, loops[l].name)) continue;
        base[l] = measure(&loops[l], iters, reps, 0, got[l], &base_ok);
    }
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
    for (size_t l = 0; l < NLOOPS; l++) {
        if (only && strcmp(only, loops[l].name)) continue;
        loops[l].setup();
        loops[l].body(iters / 10 + 1);
        loops[l].teardown();
    }
    char out[8192];
    size_t o = 0;
    int all_ok = base_ok;
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
        double ns = measure(lp, iters, reps, hooks, got[l], &match);
        if (!match) all_ok = 0;
        o += (size_t)snprintf(out + o, sizeof out - o,
                              "%s{\"name\":\"%s\",\"calls\":%ld,\"base_ns_per_call\":%.2f,"
                              "\"ns_per_call\":%.2f,\"events\":{",
                              first ? "" : ",", lp->name, iters * lp->calls_per_iter, base[l], ns);
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
