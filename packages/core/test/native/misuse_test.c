/*
 * misuse_test.c — misuse of the heap a backend must name and stop, and correct use it must
 * keep serving. Run under LD_PRELOAD=<a backend> by test/integration/example-misuse.test.ts (the
 * example backend) and by the tlsf package's test/integration/misuse.test.ts; built with
 * -fno-builtin so every call really happens.
 *
 *   heaphook_misuse_test stack | global | interior | double | double-large | double-huge |
 *                        overrun [byte]
 *       prints the pointer it is about to pass to free, then frees it: must be stopped
 *       (overrun: writes 16 bytes past a block's usable size, with byte, hex, default 41)
 *   heaphook_misuse_test realloc-stack | usable-interior
 *       the same through realloc and malloc_usable_size
 *   heaphook_misuse_test cross-thread     blocks allocated by threads, freed by others: prints "ok"
 *   heaphook_misuse_test grow-fail        RLIMIT_AS set low, then a request that needs the pool to
 *                                grow: prints "null ENOMEM", then "continued" after a small one
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static char global_buffer[256] __attribute__((aligned(16)));
static int overrun_byte = 0x41;

/* Prints p and flushes (the program is about to be stopped). */
static void show(const void *p) {
    printf("%p\n", p);
    fflush(stdout);
}

static int not_stopped(void) {
    printf("not stopped\n");
    return 0;
}

static int bad_free(const char *kind) {
    /* Neighbours, so the pointer under test is never at a pool's edge. */
    char *before = malloc(256);
    char *p = calloc(1, 256);
    char *after = malloc(256);
    memset(before, 0, 256);
    memset(after, 0, 256);
    if (!strcmp(kind, "stack")) {
        char local[64] __attribute__((aligned(16)));
        memset(local, 0, sizeof local);
        show(local + 16);
        free(local + 16);
    } else if (!strcmp(kind, "global")) {
        show(global_buffer + 64);
        free(global_buffer + 64);
    } else if (!strcmp(kind, "interior")) {
        show(p + 64);
        free(p + 64);
        /* What the unchecked library did next: a block inside the live block p. */
        char *q = malloc(32);
        printf("next malloc %p, inside p: %s\n", (void *)q, q >= p && q < p + 256 ? "yes" : "no");
    } else if (!strncmp(kind, "double", 6)) {
        /* double-large: above tlsf's thread cache; double-huge: a large block of the example */
        const size_t size = !strcmp(kind, "double-large")  ? 4000
                            : !strcmp(kind, "double-huge") ? 100000
                                                           : 48;
        char *d = malloc(size);
        char *other = malloc(48);
        show(d);
        free(d);
        free(other); /* d is no longer the last block freed */
        free(d);
        char *x = malloc(48), *y = malloc(48);
        printf("next mallocs %p %p\n", (void *)x, (void *)y);
    } else if (!strcmp(kind, "overrun")) {
        char *a = malloc(64);
        char *b = malloc(64);
        show(a);
        printf("b %p\n", (void *)b);
        fflush(stdout);
        /* Runs 16 bytes over a's usable end: over the next block's head. */
        memset(a, overrun_byte, malloc_usable_size(a) + 16);
        free(a);
    } else if (!strcmp(kind, "realloc-stack")) {
        char local[64] __attribute__((aligned(16)));
        memset(local, 0, sizeof local);
        show(local);
        char *r = realloc(local, 1000);
        printf("realloc gave %p\n", (void *)r);
    } else if (!strcmp(kind, "usable-interior")) {
        show(p + 64);
        printf("usable %zu\n", malloc_usable_size(p + 64));
    } else {
        printf("unknown scenario %s\n", kind);
        return 2;
    }
    return not_stopped();
}

/* Threads allocate blocks of many sizes; each block is freed by another thread. */
#define XT_THREADS 4
#define XT_BLOCKS 20000
static void *xt_blocks[XT_THREADS][XT_BLOCKS];
static pthread_barrier_t xt_barrier;

static void *xt_thread(void *arg) {
    const int me = (int)(intptr_t)arg;
    for (int i = 0; i < XT_BLOCKS; i++) {
        size_t size = (size_t)(16 + (i * 37 + me * 101) % 5000);
        if (i % 97 == 0) size = 300000; /* a large one now and then */
        xt_blocks[me][i] = malloc(size);
        if (!xt_blocks[me][i]) return (void *)1;
        memset(xt_blocks[me][i], me, 16);
    }
    pthread_barrier_wait(&xt_barrier);
    const int victim = (me + 1) % XT_THREADS;
    for (int i = 0; i < XT_BLOCKS; i++) {
        if (i % 3 == 0) {
            void *r = realloc(xt_blocks[victim][i], 64);
            if (!r) return (void *)1;
            xt_blocks[victim][i] = r;
        }
        if (malloc_usable_size(xt_blocks[victim][i]) < 16) return (void *)1;
        free(xt_blocks[victim][i]);
    }
    return NULL;
}

static int cross_thread(void) {
    pthread_t threads[XT_THREADS];
    pthread_barrier_init(&xt_barrier, NULL, XT_THREADS);
    for (int t = 0; t < XT_THREADS; t++)
        pthread_create(&threads[t], NULL, xt_thread, (void *)(intptr_t)t);
    int failed = 0;
    for (int t = 0; t < XT_THREADS; t++) {
        void *r;
        pthread_join(threads[t], &r);
        failed |= r != NULL;
    }
    printf(failed ? "FAIL\n" : "ok\n");
    return failed;
}

/* The pool cannot grow: the address-space limit is set just above what the process has. */
static int grow_fail(void) {
    void *warm = malloc(100);
    free(warm);
    struct rlimit lim = {512ul << 20, 512ul << 20};
    if (setrlimit(RLIMIT_AS, &lim) != 0) {
        printf("setrlimit failed\n");
        return 2;
    }
    errno = 0;
    void *p = malloc((size_t)600 << 20);
    printf("%s %s\n", p ? "non-null" : "null", errno == ENOMEM ? "ENOMEM" : "other");
    errno = 0;
    void *q = malloc((size_t)700 << 20); /* a second failure says nothing more */
    printf("%s %s\n", q ? "non-null" : "null", errno == ENOMEM ? "ENOMEM" : "other");
    char *small = malloc(1000);
    if (!small) return 1;
    memset(small, 1, 1000);
    free(small);
    printf("continued\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    if (!strcmp(s, "cross-thread")) return cross_thread();
    if (!strcmp(s, "grow-fail")) return grow_fail();
    if (argc > 2) overrun_byte = (int)strtol(argv[2], NULL, 16);
    return bad_free(s);
}
