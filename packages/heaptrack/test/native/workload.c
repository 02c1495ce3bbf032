/*
 * workload.c — a program with known allocation calls, for the tracer's exact-count tests.
 * It prints what a correct trace must contain as one JSON line on stdout (write(2) only:
 * stdio would allocate a buffer of its own).
 *
 *   hh_test_workload counts      N mallocs, callocs, reallocs, aligned calls, frees, L leaks
 *   hh_test_workload crash [segv|abort|handler]  100 mallocs of 24 bytes, then that end
 *   hh_test_workload threads T N T threads, each N malloc + free pairs
 *   hh_test_workload churn N [S] N malloc + free pairs (for measuring overhead); with S, then
 *                                prints "churned" and returns S
 *   hh_test_workload vfork       10 vfork children that leave through _exit at once, each
 *                                followed by 100 malloc + free pairs in the parent
 *   hh_test_workload exit_busy T T threads allocate and free without pause; once each has made
 *                                1,000 calls, main leaves through _exit(7) under them
 *   hh_test_workload stacks N    N allocations from call paths that change in every way a
 *                                stack walk can be cached wrongly (same depth, other caller;
 *                                same call site, other outer frames; recursion of varying
 *                                depth), deterministic, for comparing unwinders event by event
 *   hh_test_workload outlive MARKER T N
 *                                prints "running pid=<pid>", then T threads allocate and free
 *                                until the file MARKER exists, then N pairs more each (enough to
 *                                fill any small ring); a forked child makes 100 pairs; prints
 *                                "done" and returns 0 (the tools may be gone by then)
 */
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static long n_malloc, n_calloc, n_realloc, n_free, n_aligned;
static long live_bytes, peak_bytes;

static void track(long delta) {
    live_bytes += delta;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
}

NOINLINE void *site_malloc(size_t size) {
    void *p = malloc(size);
    n_malloc++;
    track((long)size);
    return p;
}

NOINLINE void *site_calloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    n_calloc++;
    track((long)(n * size));
    return p;
}

NOINLINE void *site_realloc(void *p, size_t old, size_t size) {
    void *q = realloc(p, size);
    n_realloc++;
    track((long)size - (long)old);
    return q;
}

NOINLINE void site_free(void *p, size_t size) {
    free(p);
    n_free++;
    track(-(long)size);
}

NOINLINE void *leak_site(size_t size) {
    void *p = malloc(size);
    n_malloc++;
    track((long)size);
    memset(p, 1, size);
    return p;
}

NOINLINE void *peak_site(size_t size) {
    void *p = malloc(size);
    n_malloc++;
    track((long)size);
    memset(p, 2, 4096);
    return p;
}

static void say(const char *s) {
    ssize_t r = write(1, s, strlen(s));
    (void)r;
}

/* Zeroes 64 KiB of stack below the caller's frame. The exit leak check (HEAPHOOK_LEAK_CHECK)
 * scans the frames of the exit handlers conservatively, and they lie where counts() and the
 * tracer's hooks ran: a copy of a leak's pointer left in one of their unused slots (from
 * leak_site's frame or a hook's) would count as a reference to it. */
NOINLINE static void scrub_stack(void) {
    char area[64 * 1024];
    explicit_bzero(area, sizeof area);
}

NOINLINE static void counts(void) {
    enum { N = 1000 };
    static void *blocks[N];
    static size_t sizes[N];
    /* The leaks at the end reuse memory the frees gave back, and the exit leak check counts any
     * pointer into a block as a reference: stale ones made it find 1 of the 7, or none in a
     * checkout whose path was one character longer (the heap's layout differed). So glibc fills
     * every block it hands out (no old free-list link survives in a block allocated later), no
     * pointer to a freed block stays in `blocks`, and main scrubs the stack (scrub_stack).
     * What may remain is glibc's own pointer to the chunk after a leak of 1000, 3000, 5000 or
     * 7000 bytes, when that chunk is free: its header lies in the leak's last 8 bytes. */
    mallopt(M_PERTURB, 0xa5);
    for (int i = 0; i < N; i++) {
        sizes[i] = (size_t)(i % 100) + 1;
        blocks[i] = site_malloc(sizes[i]);
    }
    void *zeroed[200];
    for (int i = 0; i < 200; i++) zeroed[i] = site_calloc((size_t)(i % 10) + 1, 8);
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 100; i++) {
            size_t size = (size_t)(round * 100 + i);
            blocks[i] = site_realloc(blocks[i], sizes[i], size);
            sizes[i] = size;
        }
    }
    void *big = peak_site(10 * 1000 * 1000);
    site_free(big, 10 * 1000 * 1000);
    void *aligned[40];
    int k = 0;
    for (int i = 0; i < 10; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 64, 100) != 0) abort();
        aligned[k++] = p;
        aligned[k++] = memalign(128, 100);
        aligned[k++] = aligned_alloc(256, 100);
        aligned[k++] = i % 2 ? valloc(100) : pvalloc(100);
        n_aligned += 4;
        track(400);
    }
    for (int i = 0; i < k; i++) site_free(aligned[i], 100);
    for (int i = 0; i < N; i++) site_free(blocks[i], sizes[i]);
    for (int i = 0; i < 200; i++) site_free(zeroed[i], (size_t)(i % 10 + 1) * 8);
    /* No pointer to a freed block left in a root (see the top of counts). */
    memset(blocks, 0, sizeof blocks);
    /* one call site for all seven leaks (the tests expect a single leak stack) */
    long leaked = 0;
#pragma GCC unroll 1
    for (int i = 1; i <= 7; i++) {
        leak_site((size_t)i * 1000);
        leaked += i * 1000;
    }
    char line[512];
    snprintf(line, sizeof line,
             "{\"malloc\":%ld,\"calloc\":%ld,\"realloc\":%ld,\"aligned\":%ld,\"free\":%ld,"
             "\"leakedBlocks\":7,\"leakedBytes\":%ld,\"peakBytes\":%ld}\n",
             n_malloc, n_calloc, n_realloc, n_aligned, n_free, leaked, peak_bytes);
    say(line);
}

static void exit_from_handler(int sig) {
    (void)sig;
    _exit(3);
}

/* 100 mallocs of 24 bytes, then: segv (SIGSEGV), abort (SIGABRT), or handler (_exit(3) from a
 * signal handler, so no exit path runs). */
NOINLINE void crash_site(const char *how) {
    for (int i = 0; i < 100; i++) {
        void *p = malloc(24);
        (void)p;
    }
    say("{\"malloc\":100}\n");
    if (strcmp(how, "abort") == 0) abort();
    if (strcmp(how, "handler") == 0) {
        signal(SIGUSR1, exit_from_handler);
        raise(SIGUSR1);
    }
    volatile int *null = NULL;
    *null = 1;
}

static long per_thread;

static _Atomic long busy_calls;

static void *busy_thread(void *arg) {
    (void)arg;
    void *keep[64] = {0};
    for (unsigned i = 0;; i++) {
        unsigned k = i % 64;
        free(keep[k]);
        keep[k] = malloc(16 + i % 3000);
        atomic_fetch_add_explicit(&busy_calls, 2, memory_order_relaxed);
    }
    return NULL;
}

static void *thread_main(void *arg) {
    (void)arg;
    for (long i = 0; i < per_thread; i++) {
        void *p = malloc((size_t)(i % 256) + 1);
        free(p);
    }
    return NULL;
}

static const char *outlive_marker;
static long outlive_after;

static void *outlive_thread(void *arg) {
    (void)arg;
    void *keep[64] = {0};
    unsigned i = 0;
    while (i % 1024 != 0 || access(outlive_marker, F_OK) != 0) {
        free(keep[i % 64]);
        keep[i % 64] = malloc(16 + i % 3000);
        i++;
    }
    for (long k = 0; k < outlive_after; k++, i++) {
        free(keep[i % 64]);
        keep[i % 64] = malloc(16 + i % 3000);
    }
    for (int k = 0; k < 64; k++) free(keep[k]);
    return NULL;
}

static void outlive(int argc, char **argv) {
    outlive_marker = argc > 2 ? argv[2] : "/nonexistent";
    int t = argc > 3 ? atoi(argv[3]) : 2;
    outlive_after = argc > 4 ? atol(argv[4]) : 100000;
    char line[64];
    snprintf(line, sizeof line, "running pid=%d\n", (int)getpid());
    say(line);
    pthread_t ids[64];
    if (t > 64) t = 64;
    for (int i = 0; i < t; i++) pthread_create(&ids[i], NULL, outlive_thread, NULL);
    for (int i = 0; i < t; i++) pthread_join(ids[i], NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 100; i++) free(malloc(64));
        exit(0);
    }
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    snprintf(line, sizeof line, "done child=%d\n", status);
    say(line);
}

/* Threads trading blocks through a shared array: frees, reallocs and mallocs of addresses
 * other threads just released, so the log's order is put to the test. */
#define SHARED 256
static void *_Atomic shared[SHARED];

static void *trader(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    for (long i = 0; i < per_thread; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned slot = (seed >> 8) % SHARED, action = (seed >> 20) % 4;
        void *p = atomic_exchange(&shared[slot], NULL);
        if (p == NULL) {
            p = malloc((seed >> 4) % 300 + 1);
        } else if (action == 0) {
            free(p);
            continue;
        } else if (action == 1) {
            p = realloc(p, (seed >> 3) % 2000 + 1);
        }
        void *old = atomic_exchange(&shared[slot], p);
        free(old);
    }
    return NULL;
}

NOINLINE void churn(long n) {
    void *keep[64] = {0};
    for (long i = 0; i < n; i++) {
        int slot = (int)(i & 63);
        free(keep[slot]);
        keep[slot] = malloc((size_t)(i % 512) + 16);
    }
    for (int i = 0; i < 64; i++) free(keep[i]);
}

/* Calls at the edges: failures, zero sizes, overflows. Prints the bytes it leaves live. */
NOINLINE void edges(void) {
    volatile size_t big = (size_t)1 << 33; /* volatile: no compile-time overflow warnings */
    void *keep = malloc(100);              /* live: 100 */
    void *zero = malloc(0);                /* malloc(0): a valid block */
    free(zero);
    free(NULL);                          /* not recorded */
    void *huge = malloc((size_t)-1 / 2); /* fails */
    void *over = calloc(big, big);       /* overflows: fails */
    void *grown = realloc(NULL, 64);     /* realloc(NULL, n) = malloc */
    grown = realloc(grown, 4096);
    void *gone = realloc(malloc(32), 0);          /* realloc(p, 0) frees p */
    void *arr = reallocarray(NULL, 10, 10);       /* 100 bytes */
    void *bad = reallocarray(arr, big, big);      /* overflows: arr stays */
    void *failed = realloc(keep, (size_t)-1 / 2); /* fails: keep stays */
    void *p = NULL;
    int rc = posix_memalign(&p, 3, 64); /* EINVAL */
    void *aligned = aligned_alloc(4096, 4096);
    free(aligned);
    free(grown);
    char line[160];
    snprintf(line, sizeof line, "{\"live\":%d,\"nulls\":%d}\n", 100 + 100,
             (huge == NULL) + (over == NULL) + (gone == NULL) + (bad == NULL) + (failed == NULL) +
                 (rc != 0));
    say(line);
    (void)arr;
}

/* ---- stacks: call paths for the unwinder's walk cache -------------------------------------- */

static unsigned stacks_rng = 12345;
static unsigned stacks_next(void) {
    stacks_rng = stacks_rng * 1103515245u + 12345u;
    return stacks_rng >> 16;
}
static void *volatile stacks_keep;

NOINLINE static void stacks_leaf(int tag) {
    stacks_keep = malloc(16 + (size_t)(tag & 63));
    free(stacks_keep);
}
NOINLINE static void stacks_via_a(int tag) {
    stacks_leaf(tag);
    __asm__ volatile("" ::: "memory");
}
NOINLINE static void stacks_via_b(int tag) {
    char pad[48]; /* another frame size: the leaf runs at another depth */
    pad[tag & 47] = (char)tag;
    __asm__ volatile("" : : "r"(pad) : "memory");
    stacks_leaf(tag);
}
NOINLINE static void stacks_recurse(int depth, int tag) {
    if (depth == 0) {
        if (tag & 1)
            stacks_via_a(tag);
        else
            stacks_via_b(tag);
        return;
    }
    stacks_recurse(depth - 1, tag);
    __asm__ volatile("" ::: "memory");
}
NOINLINE static void stacks_outer_x(int tag) {
    stacks_recurse((int)(stacks_next() % 6), tag);
}
NOINLINE static void stacks_outer_y(int tag) {
    stacks_recurse((int)(stacks_next() % 6), tag);
    __asm__ volatile("" ::: "memory");
}

/* Twins: identical frames, so the leaf runs at the same depth with the same return addresses
 * below the twin; only the twin's own return address differs. */
NOINLINE static void stacks_mid(int tag) {
    stacks_leaf(tag);
    __asm__ volatile("" ::: "memory");
}
NOINLINE static void stacks_twin_1(int tag) {
    stacks_mid(tag);
    __asm__ volatile("" ::: "memory");
}
NOINLINE static void stacks_twin_2(int tag) {
    stacks_mid(tag);
    __asm__ volatile("" ::: "memory");
}

static void stacks(long n) {
    for (long i = 0; i < n / 4; i++) { /* alternating twins: every walk differs outside */
        if (i & 1)
            stacks_twin_1((int)i);
        else
            stacks_twin_2((int)i);
    }
    for (long i = n / 4; i < n; i++) {
        int tag = (int)stacks_next();
        switch (stacks_next() % 4) {
            case 0:
                stacks_outer_x(tag);
                break;
            case 1:
                stacks_outer_y(tag);
                break;
            case 2:
                stacks_via_a(tag);
                break;
            default:
                stacks_leaf(tag);
                break;
        }
    }
    say("{}\n");
}

/* A daemon's start-up: closes descriptors 3..last (the tracer's own among them, as a program
 * that does not know about it would), then allocates enough to wake the tracer's reader many
 * times. The tracer must never raise a signal in it. */
static void close_fds(int last) {
    for (int fd = 3; fd <= last; fd++) close(fd);
    char *blocks[64] = {0};
    for (long i = 0; i < 400000; i++) {
        free(blocks[i & 63]);
        blocks[i & 63] = malloc(16 + (size_t)(i % 512));
    }
    for (int i = 0; i < 64; i++) free(blocks[i]);
    say("closed and allocated\n");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "counts";
    if (strcmp(mode, "counts") == 0) {
        counts();
        scrub_stack();
    } else if (strcmp(mode, "edges") == 0) {
        edges();
    } else if (strcmp(mode, "crash") == 0) {
        crash_site(argc > 2 ? argv[2] : "segv");
    } else if (strcmp(mode, "threads") == 0) {
        int t = argc > 2 ? atoi(argv[2]) : 4;
        per_thread = argc > 3 ? atol(argv[3]) : 10000;
        pthread_t ids[64];
        if (t > 64) t = 64;
        for (int i = 0; i < t; i++) pthread_create(&ids[i], NULL, thread_main, NULL);
        for (int i = 0; i < t; i++) pthread_join(ids[i], NULL);
        char line[128];
        snprintf(line, sizeof line, "{\"malloc\":%ld,\"free\":%ld}\n", t * per_thread,
                 t * per_thread);
        say(line);
    } else if (strcmp(mode, "trade") == 0) {
        int t = argc > 2 ? atoi(argv[2]) : 4;
        per_thread = argc > 3 ? atol(argv[3]) : 100000;
        pthread_t ids[64];
        if (t > 64) t = 64;
        for (int i = 0; i < t; i++)
            pthread_create(&ids[i], NULL, trader, (void *)(uintptr_t)(i + 1));
        for (int i = 0; i < t; i++) pthread_join(ids[i], NULL);
        for (int i = 0; i < SHARED; i++) free(atomic_exchange(&shared[i], NULL));
        say("{}\n");
    } else if (strcmp(mode, "stacks") == 0) {
        stacks(argc > 2 ? atol(argv[2]) : 20000);
    } else if (strcmp(mode, "vfork") == 0) {
        /* A vfork child shares its parent's memory, the tracer's state included, until it
         * leaves: its _exit must leave the parent's log alone. */
        for (int i = 0; i < 10; i++) {
            pid_t pid = vfork();
            if (pid == 0) _exit(0);
            if (pid > 0) waitpid(pid, NULL, 0);
            for (int k = 0; k < 100; k++) free(malloc(32));
        }
        say("{\"malloc\":1000,\"free\":1000}\n");
    } else if (strcmp(mode, "exit_busy") == 0) {
        int t = argc > 2 ? atoi(argv[2]) : 4;
        pthread_t id;
        for (int i = 0; i < t; i++) pthread_create(&id, NULL, busy_thread, NULL);
        while (atomic_load(&busy_calls) < 2000L * t) sched_yield();
        _exit(7);
    } else if (strcmp(mode, "outlive") == 0) {
        outlive(argc, argv);
    } else if (strcmp(mode, "close_fds") == 0) {
        close_fds(argc > 2 ? atoi(argv[2]) : 1023);
    } else if (strcmp(mode, "churn") == 0) {
        churn(argc > 2 ? atol(argv[2]) : 1000000);
        if (argc > 3) {
            say("churned\n");
            return atoi(argv[3]);
        }
    } else {
        say("unknown mode\n");
        return 2;
    }
    return 0;
}
