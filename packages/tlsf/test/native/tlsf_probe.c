/*
 * tlsf_probe.c — scenarios run under LD_PRELOAD=libheaphook_tlsf.so by the vitest tests.
 * Built with -fno-builtin so every malloc call really happens.
 *
 *   tlsf_probe double-free | interior | foreign | header   (checking mode: must be stopped)
 *   tlsf_probe double-free-cached | double-free-large   (no checking mode: must be stopped)
 *   tlsf_probe grow <bytes>      one request of <bytes>; prints "ok"
 *   tlsf_probe stats             prints mallinfo2 figures, then malloc_stats()
 *   tlsf_probe align             aligned allocation, realloc and free of aligned blocks
 *   tlsf_probe inplace           realloc grows and shrinks in place
 *   tlsf_probe threads <n>       n threads allocate, exchange and free blocks
 *   tlsf_probe fork              a threaded program forks while allocating
 *   tlsf_probe enomem [bytes]    a request the system refuses fails with ENOMEM
 *   tlsf_probe faults            minor page faults taken by 16 MiB of 1 KiB blocks after start-up
 *   tlsf_probe many-threads <n>  n threads alive at once allocate and free
 *   tlsf_probe release           resident memory before and after 64 MiB of 64 KiB blocks
 *                                are freed, and page faults of a loop near its peak
 *   tlsf_probe batch-release     page faults of a loop that empties its heap at every round
 *   tlsf_probe stale-cache       free blocks (mallinfo2 ordblks) held after sizes no longer
 *                                asked for filled the thread cache, before and after batches
 *                                of another size
 *   tlsf_probe next-to-free      where the next small mallocs land after a small block
 *                                freed just after a free block (merged, or cached)
 *   tlsf_probe producer-consumer peak RSS when one thread allocates and another frees
 *   tlsf_probe held-back         of 100 blocks another thread freed, how many the allocating
 *                                thread gets back while that thread waits, and after it exits
 *   tlsf_probe realloc-moves     how often a buffer grown by 64-byte appends to 1 MiB moves
 *   tlsf_probe backend           prints the active backend's name
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void say(const char *fmt, void *p) {
    printf(fmt, p);
    fflush(stdout);
}

static int fail(const char *what) {
    printf("FAIL %s\n", what);
    return 1;
}

static int scenario_bad_free(const char *kind) {
    char *p = malloc(64);
    char *q = malloc(64);
    char *r = malloc(64);
    memset(p, 1, 64);
    if (!strcmp(kind, "double-free")) {
        say("%p\n", q);
        free(q);
        free(q);
    } else if (!strcmp(kind, "interior")) {
        say("%p\n", q + 16);
        free(q + 16);
    } else if (!strcmp(kind, "foreign")) {
        char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        say("%p\n", m + 64);
        free(m + 64);
    } else if (!strcmp(kind, "header")) {
        size_t usable = malloc_usable_size(p);
        say("%p\n", q);
        memset(p, 0x41, usable + 8); /* runs over p's end into q's block header */
        free(q);
    }
    free(r);
    printf("not stopped\n");
    return 0;
}

/* Double frees the fast free path must hand to its checks: a cached block freed again after
 * another block of its size went into the cache, and a block too large for the cache. */
static int scenario_double_free_fast(const char *kind) {
    const bool cached = !strcmp(kind, "double-free-cached");
    const size_t size = cached ? 48 : 4000;
    char *a = malloc(size);
    char *b = malloc(size);
    char *guard = malloc(size);
    say("%p\n", a);
    free(a);
    if (cached) free(b); /* a is no longer the head of its cache class */
    free(a);
    if (!cached) free(b);
    free(guard);
    printf("not stopped\n");
    return 0;
}

static int scenario_grow(size_t bytes) {
    char *p = malloc(bytes);
    if (!p) return fail("malloc");
    p[0] = 1;
    p[bytes - 1] = 2;
    char *small[1000];
    for (int i = 0; i < 1000; i++) small[i] = malloc(1000);
    for (int i = 0; i < 1000; i++) free(small[i]);
    free(p);
    printf("ok\n");
    return 0;
}

static int scenario_stats(void) {
    void *blocks[100];
    for (int i = 0; i < 100; i++) blocks[i] = malloc(1000);
    struct mallinfo2 a = mallinfo2();
    for (int i = 0; i < 100; i++) free(blocks[i]);
    struct mallinfo2 b = mallinfo2();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo old = mallinfo(); /* the old interface, still called by old programs */
#pragma GCC diagnostic pop
    printf("arena %zu uordblks %zu fordblks %zu after_free_uordblks %zu mallinfo_arena %d\n",
           a.arena, a.uordblks, a.fordblks, b.uordblks, old.arena);
    fflush(stdout);
    malloc_stats();
    return 0;
}

static int scenario_align(void) {
    for (size_t align = 16; align <= ((size_t)1 << 20); align <<= 1) {
        void *p = NULL;
        if (posix_memalign(&p, align, 100) != 0 || ((uintptr_t)p & (align - 1)))
            return fail("posix_memalign");
        memset(p, 7, 100);
        char *q = realloc(p, 5000);
        if (!q || ((uintptr_t)q & (align - 1))) return fail("realloc keeps the alignment");
        for (int i = 0; i < 100; i++)
            if (q[i] != 7) return fail("realloc keeps the contents");
        q = realloc(q, 50);
        if (!q || ((uintptr_t)q & (align - 1))) return fail("shrink keeps the alignment");
        free(q);
        void *r = aligned_alloc(align, align * 2);
        if (!r || ((uintptr_t)r & (align - 1))) return fail("aligned_alloc");
        free(r);
    }
    printf("ok\n");
    return 0;
}

static int scenario_inplace(void) {
    char *p = malloc(100);
    char *grown = realloc(p, 1000);
    char *shrunk = realloc(grown, 50);
    printf("%s %s\n", grown == p ? "grew-in-place" : "moved",
           shrunk == grown ? "shrank-in-place" : "moved");
    free(shrunk);
    return 0;
}

#define SLOTS 256
static void *_Atomic exchange_slots[SLOTS];
static int thread_iterations = 200000;

static void *worker(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *mine[64] = {0};
    for (int i = 0; i < thread_iterations; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t size = 1 + (seed >> 8) % (seed % 16 == 0 ? 70000 : 400);
        int k = (seed >> 4) % 64;
        if (mine[k]) {
            /* Check the fill, then hand it to another thread (or free it here). */
            unsigned char *b = mine[k];
            if (b[0] != (unsigned char)(uintptr_t)b || b[malloc_usable_size(b) - 1] != 0x5a) {
                printf("FAIL corrupted block\n");
                exit(1);
            }
            if (seed & 1) {
                void *old = atomic_exchange(&exchange_slots[(seed >> 12) % SLOTS], mine[k]);
                free(old);
            } else {
                free(mine[k]);
            }
            mine[k] = NULL;
        } else {
            unsigned char *b = (seed & 64) ? malloc(size) : realloc(NULL, size);
            if (!b) {
                printf("FAIL malloc\n");
                exit(1);
            }
            b[0] = (unsigned char)(uintptr_t)b;
            b[malloc_usable_size(b) - 1] = 0x5a;
            mine[k] = b;
        }
    }
    for (int k = 0; k < 64; k++) free(mine[k]);
    return NULL;
}

static int scenario_threads(int n) {
    pthread_t t[64];
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&exchange_slots[i], NULL));
    /* Thread heaps are adopted again by new threads. */
    thread_iterations = 1000;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < n; i++)
            pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 100));
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    }
    for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&exchange_slots[i], NULL));
    printf("ok\n");
    return 0;
}

/* One producer allocates messages of 16 B-8 KiB (mostly small), one consumer checks and frees them
 * (every free a remote one), through a bounded ring: live memory is at most the ring's messages.
 * Prints the process's peak RSS, which the allocator must keep near that. */
enum { PC_RING = 4096, PC_MESSAGES = 2000000 };
static _Atomic(unsigned char *) pc_ring[PC_RING];

static void *pc_consume(void *arg) {
    (void)arg;
    for (unsigned long i = 0; i < PC_MESSAGES; i++) {
        _Atomic(unsigned char *) *slot = &pc_ring[i % PC_RING];
        unsigned char *m;
        while (!(m = atomic_exchange_explicit(slot, NULL, memory_order_acquire))) sched_yield();
        if (m[0] != (unsigned char)i) {
            fprintf(stderr, "message %lu damaged\n", i);
            exit(1);
        }
        free(m);
    }
    return NULL;
}

static int scenario_producer_consumer(void) {
    pthread_t consumer;
    pthread_create(&consumer, NULL, pc_consume, NULL);
    unsigned seed = 7;
    for (unsigned long i = 0; i < PC_MESSAGES; i++) {
        seed = seed * 1103515245u + 12345u;
        /* Mostly small, as messages are: 70 % 16-128 B, 25 % to 1 KiB, 5 % to 8 KiB. */
        const unsigned pct = (seed >> 16) % 100, pick = (seed >> 8) & 0xffff;
        const size_t size = pct < 70   ? 16 + pick % 113
                            : pct < 95 ? 129 + pick % 896
                                       : 1025 + pick % 7168;
        unsigned char *m = malloc(size);
        if (!m) return fail("malloc");
        m[0] = (unsigned char)i;
        _Atomic(unsigned char *) *slot = &pc_ring[i % PC_RING];
        while (atomic_load_explicit(slot, memory_order_acquire)) sched_yield();
        atomic_store_explicit(slot, m, memory_order_release);
    }
    pthread_join(consumer, NULL);
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    printf("peak_rss_kb %ld\n", u.ru_maxrss);
    return 0;
}

/* held-back: the main thread allocates HB_BLOCKS blocks, another thread frees them all and
 * waits; the main thread then allocates as many of that size and counts those it gets back. */
#define HB_BLOCKS 100
#define HB_SIZE 1000
static void *hb_blocks[HB_BLOCKS];
static pthread_mutex_t hb_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hb_cond = PTHREAD_COND_INITIALIZER;
static int hb_freed, hb_leave;

static void *hb_free_all(void *arg) {
    (void)arg;
    for (int i = 0; i < HB_BLOCKS; i++) free(hb_blocks[i]);
    pthread_mutex_lock(&hb_lock);
    hb_freed = 1;
    pthread_cond_broadcast(&hb_cond);
    while (!hb_leave) pthread_cond_wait(&hb_cond, &hb_lock);
    pthread_mutex_unlock(&hb_lock);
    return NULL;
}

/* Allocates HB_BLOCKS blocks of HB_SIZE (kept) and counts those that are blocks freed earlier. */
static int hb_count_back(void **kept) {
    int back = 0;
    for (int i = 0; i < HB_BLOCKS; i++) {
        kept[i] = malloc(HB_SIZE);
        for (int j = 0; j < HB_BLOCKS; j++) back += kept[i] == hb_blocks[j];
    }
    return back;
}

static int scenario_held_back(void) {
    static void *round1[HB_BLOCKS], *round2[HB_BLOCKS];
    for (int i = 0; i < HB_BLOCKS; i++) hb_blocks[i] = malloc(HB_SIZE);
    pthread_t t;
    pthread_create(&t, NULL, hb_free_all, NULL);
    pthread_mutex_lock(&hb_lock);
    while (!hb_freed) pthread_cond_wait(&hb_cond, &hb_lock);
    pthread_mutex_unlock(&hb_lock);
    const int waiting = hb_count_back(round1);
    pthread_mutex_lock(&hb_lock);
    hb_leave = 1;
    pthread_cond_broadcast(&hb_cond);
    pthread_mutex_unlock(&hb_lock);
    pthread_join(t, NULL);
    const int exited = waiting + hb_count_back(round2);
    printf("while_waiting %d after_exit %d\n", waiting, exited);
    for (int i = 0; i < HB_BLOCKS; i++) {
        free(round1[i]);
        free(round2[i]);
    }
    return 0;
}

static volatile int stop_workers;
static void *busy(void *arg) {
    (void)arg;
    while (!stop_workers) {
        void *p = malloc(100);
        free(p);
    }
    return NULL;
}

static int scenario_fork(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, busy, NULL);
    for (int i = 0; i < 50; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            void *p = malloc(1000);
            free(p);
            _exit(p ? 0 : 1);
        }
        int status;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fail("child");
    }
    stop_workers = 1;
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    printf("ok\n");
    return 0;
}

static int scenario_enomem(size_t bytes) {
    errno = 0;
    void *p = malloc(bytes);
    printf("%s %s\n", p ? "allocated" : "null", errno == ENOMEM ? "ENOMEM" : "other");
    return 0;
}

static long minor_faults(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static int scenario_faults(void) {
    enum { COUNT = 16 * 1024 };
    static char *blocks[COUNT];
    /* Warm up what is not the heap (stdio, the code of this loop). */
    printf("start\n");
    fflush(stdout);
    const long before = minor_faults();
    for (int i = 0; i < COUNT; i++) {
        blocks[i] = malloc(1000);
        memset(blocks[i], i, 1000);
    }
    for (int i = 0; i < COUNT; i++) free(blocks[i]);
    const long after = minor_faults();
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long locked = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmLck:", 6)) locked = atol(line + 6);
    if (f) fclose(f);
    printf("faults %ld locked_kb %ld\n", after - before, locked);
    return 0;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

/* Memory given back when the heap is emptied, none while it stays near its peak. */
static int scenario_release(void) {
    enum { COUNT = 1024, SIZE = 64 << 10 };
    static char *blocks[COUNT];
    printf("start\n");
    fflush(stdout);
    for (int i = 0; i < COUNT; i++) {
        blocks[i] = malloc(SIZE);
        if (!blocks[i]) return fail("malloc");
        memset(blocks[i], i, SIZE);
    }
    /* A loop that frees and allocates blocks of every size up to 64 KiB, staying near the
     * heap's peak: nothing is given back, so nothing is faulted in again. */
    unsigned seed = 1;
    const long before_loop = minor_faults();
    for (int round = 0; round < 20000; round++) {
        seed = seed * 1103515245u + 12345u;
        const int k = (int)((seed >> 8) % COUNT);
        free(blocks[k]);
        blocks[k] = malloc(SIZE);
        if (!blocks[k]) return fail("malloc");
        memset(blocks[k], round, 64);
    }
    const long loop_faults = minor_faults() - before_loop;
    const long full = rss_kb();
    for (int i = 0; i < COUNT; i++) free(blocks[i]);
    const long emptied = rss_kb();
    printf("loop_faults %ld full_kb %ld emptied_kb %ld\n", loop_faults, full, emptied);
    return 0;
}

/* A loop that empties its heap at every round: 1600 blocks of 128 bytes allocated, then all
 * freed, ROUNDS times. Each round ends nearly emptied, so its pages would be given back and
 * faulted in again at every round; what is given back is rate-limited instead. Prints the
 * loop's page faults and its duration, from which the test bounds the bytes given back. */
static int scenario_batch_release(void) {
    enum { COUNT = 1600, SIZE = 128, ROUNDS = 4000 };
    static char *blocks[COUNT];
    struct timespec t0, t1;
    const long before = minor_faults();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < COUNT; i++) {
            blocks[i] = malloc(SIZE);
            if (!blocks[i]) return fail("malloc");
            blocks[i][0] = (char)round; /* touch it: a given-back page faults here */
        }
        for (int i = 0; i < COUNT; i++) free(blocks[i]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    printf("loop_faults %ld loop_ms %ld rounds %d\n", minor_faults() - before, ms, ROUNDS);
    return 0;
}

/* The thread cache filled with blocks of four small sizes the program then stops asking for
 * (4 x 4096 blocks, more than the cache's byte budget), then batches of 1600 blocks of 1000
 * bytes allocated and freed half oldest first, half newest first. Prints the free blocks
 * (cached ones count one each) after the first phase and after the batches: the stale sizes'
 * blocks must leave the cache, coalesced, for the batches' blocks. */
static int scenario_stale_cache(void) {
    enum { STALE_SIZES = 4, STALE_COUNT = 4096, BATCH = 1600, BATCH_SIZE = 1000, ROUNDS = 200 };
    static char *blocks[STALE_SIZES * STALE_COUNT];
    for (int i = 0; i < STALE_SIZES * STALE_COUNT; i++) {
        blocks[i] = malloc((size_t)(24 + 16 * (i % STALE_SIZES)));
        if (!blocks[i]) return fail("malloc");
    }
    for (int i = 0; i < STALE_SIZES * STALE_COUNT; i++) free(blocks[i]);
    const size_t stale_free_blocks = mallinfo2().ordblks;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < BATCH; i++) {
            blocks[i] = malloc(BATCH_SIZE);
            if (!blocks[i]) return fail("malloc");
            blocks[i][0] = (char)round;
        }
        for (int i = 0; i < BATCH / 2; i++) free(blocks[i]);
        for (int i = BATCH - 1; i >= BATCH / 2; i--) free(blocks[i]);
    }
    printf("stale_free_blocks %zu after_batches_free_blocks %zu\n", stale_free_blocks,
           (size_t)mallinfo2().ordblks);
    return 0;
}

/* In a new thread (a heap of its own, its cache empty): a large block, a small one just after
 * it, a guard and another small one; the other small one is freed (cached: the class is no
 * longer empty), then the large block (to TLSF: too large for the cache), then the first small
 * one, whose predecessor is now free. Then two mallocs of the small size: the first gets the
 * cached one and the second lands at the large block's address when the small block went to
 * TLSF and merged with it; the first gets the small block itself when the cache kept it. */
static const char *next_to_free_name(const char *p, const char *large, const char *small,
                                     const char *other) {
    return p == large ? "large" : p == small ? "small" : p == other ? "other" : "elsewhere";
}

static void *next_to_free(void *arg) {
    (void)arg;
    /* the guard of another size: two misses in a row of one class would fill the class from
     * one block (the cache's refill) */
    char *large = malloc(4000), *small = malloc(100), *guard = malloc(200), *other = malloc(100);
    if (!large || !small || !guard || !other) return (void *)"malloc failed";
    if (small <= large || small - large > 4096) return (void *)"blocks not adjacent";
    free(other);
    free(large);
    free(small);
    char *first = malloc(100), *second = malloc(100);
    printf("first_malloc %s second_malloc %s\n", next_to_free_name(first, large, small, other),
           next_to_free_name(second, large, small, other));
    free(first);
    free(second);
    free(guard);
    return NULL;
}

static int scenario_next_to_free(void) {
    pthread_t t;
    void *failure = NULL;
    if (pthread_create(&t, NULL, next_to_free, NULL) != 0) return fail("pthread_create");
    pthread_join(t, &failure);
    return failure ? fail((const char *)failure) : 0;
}

/* A burst: 200 MiB in 4 KiB blocks allocated and touched (by this thread; by a worker thread
 * that exits; by one that stays alive and idle, then exits; or by this thread after
 * mallopt(M_TRIM_THRESHOLD, 1 MiB)), all freed in a shuffled order, then malloc_trim(0).
 * Prints the RSS after the frees, malloc_trim's return value and the RSS after it (and after
 * the idle thread's exit); the test bounds the later figures by the first. */
enum { TRIM_BLOCK = 4096, TRIM_COUNT = 50 * 1024 }; /* 200 MiB */
static char *trim_blocks[TRIM_COUNT];

static void *trim_burst(void *arg) {
    (void)arg;
    for (int i = 0; i < TRIM_COUNT; i++) {
        trim_blocks[i] = malloc(TRIM_BLOCK);
        if (!trim_blocks[i]) return NULL;
        memset(trim_blocks[i], i, TRIM_BLOCK);
    }
    unsigned seed = 7; /* free in a shuffled order: the free blocks do not merge in one run */
    for (int i = TRIM_COUNT - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        const int k = (int)((seed >> 8) % (unsigned)(i + 1));
        char *t = trim_blocks[i];
        trim_blocks[i] = trim_blocks[k];
        trim_blocks[k] = t;
    }
    for (int i = 0; i < TRIM_COUNT; i++) free(trim_blocks[i]);
    return trim_blocks; /* non-NULL: done */
}

static atomic_int trim_stage;

static void *trim_burst_then_idle(void *arg) {
    void *done = trim_burst(arg);
    atomic_store(&trim_stage, done ? 1 : -1);
    while (atomic_load(&trim_stage) != 2) usleep(1000); /* alive, idle: allocates nothing */
    return done;
}

static int scenario_trim(const char *where) {
    const long base = rss_kb();
    if (!strcmp(where, "thread")) {
        pthread_t t;
        void *done = NULL;
        if (pthread_create(&t, NULL, trim_burst, NULL) || pthread_join(t, &done) || !done)
            return fail("burst thread");
    } else if (!strcmp(where, "idle-thread")) {
        pthread_t t;
        if (pthread_create(&t, NULL, trim_burst_then_idle, NULL)) return fail("pthread_create");
        while (atomic_load(&trim_stage) == 0) usleep(1000);
        if (atomic_load(&trim_stage) < 0) return fail("burst thread");
        const long freed = rss_kb();
        const int released = malloc_trim(0);
        const long trimmed = rss_kb();
        atomic_store(&trim_stage, 2);
        pthread_join(t, NULL);
        printf("base_kb %ld freed_kb %ld trim %d trimmed_kb %ld exited_kb %ld\n", base, freed,
               released, trimmed, rss_kb());
        return 0;
    } else if (!strcmp(where, "mallopt")) {
        if (mallopt(M_TRIM_THRESHOLD, 1 << 20) != 1) return fail("mallopt(M_TRIM_THRESHOLD)");
        if (!trim_burst(NULL)) return fail("malloc");
    } else if (!trim_burst(NULL))
        return fail("malloc");
    const long freed = rss_kb();
    const int released = malloc_trim(0);
    const long trimmed = rss_kb();
    /* Trimmed memory comes back on use: the heap still serves the same burst. */
    if (!trim_burst(NULL)) return fail("malloc after trim");
    printf("base_kb %ld freed_kb %ld trim %d trimmed_kb %ld\n", base, freed, released, trimmed);
    return 0;
}

/* Eight buffers grown in turn by 64-byte appends with realloc to the exact length, up to
 * 512 KiB each (each stands in the way of the others' growth in place): how often they move. */
static int scenario_realloc_moves(void) {
    enum { N = 8, STEP = 64, LIMIT = 512 << 10 };
    char *p[N] = {0};
    size_t len = 0;
    long moves = 0;
    while (len < LIMIT) {
        for (int b = 0; b < N; b++) {
            char *q = realloc(p[b], len + STEP);
            if (!q) return fail("realloc");
            if (p[b] && q != p[b]) moves++;
            for (size_t i = len; i < len + STEP; i++) q[i] = (char)(i + b);
            p[b] = q;
        }
        len += STEP;
    }
    for (int b = 0; b < N; b++)
        for (size_t i = 0; i < len; i++)
            if (p[b][i] != (char)(i + b)) return fail("realloc lost data");
    /* A shrink within a quarter of the block keeps it where it is. */
    const size_t usable = malloc_usable_size(p[0]);
    char *s = realloc(p[0], usable - usable / 8);
    const int kept = s == p[0];
    p[0] = s;
    for (int b = 0; b < N; b++) free(p[b]);
    /* A growing realloc of a block of a page or more gets a quarter more room, so the next
     * appends neither move nor call into the heap again. */
    char *a = malloc(8192);
    char *wall = malloc(100); /* a used successor: a cannot grow in place */
    char *g = realloc(a, 16384);
    const size_t room = malloc_usable_size(g);
    char *h = realloc(g, 20000);
    printf("moves %ld appends %zu shrink %s room %zu stays %s\n", moves, (size_t)N * (len / STEP),
           kept ? "kept" : "moved", room, h == g ? "yes" : "no");
    free(h);
    free(wall);
    return 0;
}

/* Four threads at once each allocate an 8-byte block, keep it while the others hold theirs,
 * free it and allocate again (cache-thrash); then the same after freeing a block the main
 * thread allocated for each of them back to back (cache-scratch). Counts the pairs of threads
 * whose blocks were on one 64-byte cache line at the same time. */
#define LINE_THREADS 4
static void *line_handed[LINE_THREADS];
static uintptr_t line_held[LINE_THREADS];
static pthread_barrier_t line_start, line_step;
static _Atomic int line_shared;

static void *line_worker(void *arg) {
    const long i = (long)arg;
    pthread_barrier_wait(&line_start);
    if (line_handed[i]) free(line_handed[i]);
    for (int k = 0; k < 200; k++) {
        char *p = malloc(8);
        memset(p, (int)k, 8);
        line_held[i] = (uintptr_t)p;
        pthread_barrier_wait(&line_step); /* every thread holds its block */
        for (int j = 0; j < LINE_THREADS; j++)
            if (j > i && line_held[j] >> 6 == line_held[i] >> 6) line_shared++;
        pthread_barrier_wait(&line_step);
        free(p);
    }
    return NULL;
}

static int scenario_cache_lines(void) {
    int shared[2];
    for (int scratch = 0; scratch < 2; scratch++) {
        pthread_t t[LINE_THREADS];
        pthread_barrier_init(&line_start, NULL, LINE_THREADS + 1);
        pthread_barrier_init(&line_step, NULL, LINE_THREADS);
        line_shared = 0;
        for (int i = 0; i < LINE_THREADS; i++) line_handed[i] = scratch ? malloc(8) : NULL;
        for (long i = 0; i < LINE_THREADS; i++)
            if (pthread_create(&t[i], NULL, line_worker, (void *)i) != 0) return fail("thread");
        pthread_barrier_wait(&line_start);
        for (int i = 0; i < LINE_THREADS; i++) pthread_join(t[i], NULL);
        pthread_barrier_destroy(&line_start);
        pthread_barrier_destroy(&line_step);
        shared[scratch] = line_shared;
    }
    printf("thrash_shared %d scratch_shared %d\n", shared[0], shared[1]);
    return 0;
}

static pthread_barrier_t barrier;
static void *many_worker(void *arg) {
    char *p = malloc(100 + (size_t)(uintptr_t)arg);
    memset(p, 1, 100);
    pthread_barrier_wait(&barrier); /* every thread holds a heap at once */
    char *q = realloc(p, 5000);
    free(q);
    return NULL;
}

static int scenario_many_threads(int n) {
    pthread_t *t = malloc(sizeof(pthread_t) * (size_t)n);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &attr, many_worker, (void *)(uintptr_t)i) != 0)
            return fail("pthread_create");
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    free(t);
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    if (!strcmp(s, "double-free") || !strcmp(s, "interior") || !strcmp(s, "foreign") ||
        !strcmp(s, "header"))
        return scenario_bad_free(s);
    if (!strcmp(s, "double-free-cached") || !strcmp(s, "double-free-large"))
        return scenario_double_free_fast(s);
    if (!strcmp(s, "grow") && argc > 2) return scenario_grow(strtoull(argv[2], NULL, 0));
    if (!strcmp(s, "stats")) return scenario_stats();
    if (!strcmp(s, "align")) return scenario_align();
    if (!strcmp(s, "inplace")) return scenario_inplace();
    if (!strcmp(s, "threads")) return scenario_threads(argc > 2 ? atoi(argv[2]) : 4);
    if (!strcmp(s, "fork")) return scenario_fork();
    if (!strcmp(s, "enomem"))
        return scenario_enomem(argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t)1 << 50);
    if (!strcmp(s, "faults")) return scenario_faults();
    if (!strcmp(s, "release")) return scenario_release();
    if (!strcmp(s, "batch-release")) return scenario_batch_release();
    if (!strcmp(s, "stale-cache")) return scenario_stale_cache();
    if (!strcmp(s, "next-to-free")) return scenario_next_to_free();
    if (!strcmp(s, "trim")) return scenario_trim(argc > 2 ? argv[2] : "main");
    if (!strcmp(s, "producer-consumer")) return scenario_producer_consumer();
    if (!strcmp(s, "held-back")) return scenario_held_back();
    if (!strcmp(s, "cache-lines")) return scenario_cache_lines();
    if (!strcmp(s, "realloc-moves")) return scenario_realloc_moves();
    if (!strcmp(s, "many-threads")) return scenario_many_threads(argc > 2 ? atoi(argv[2]) : 300);
    if (!strcmp(s, "backend")) {
        const char *(*name)(void) =
            (const char *(*)(void))dlsym(RTLD_DEFAULT, "heaphook_active_backend");
        printf("%s\n", name ? name() : "none");
        return 0;
    }
    fprintf(stderr, "usage: tlsf_probe <scenario>\n");
    return 2;
}
