/*
 * aix_probe.c — run under libheaphook_aix_emul.so: a forking, multi-threaded program that checks
 * through the emulation's counters that the AIX entry points were really used: malloc before
 * __malloc_init__, __malloc_init__ once and only when the first thread was created, the fork
 * pair around each fork (in the parent and in every child).
 *
 *   aix_probe [forks]     prints "aix_probe: ok ..." and exits 0, or names each failure
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaphook/aix_emul.h"

static int failures;
#define CHECK(cond, ...)                          \
    do {                                          \
        if (!(cond)) {                            \
            fprintf(stderr, "aix_probe: FAIL: "); \
            fprintf(stderr, __VA_ARGS__);         \
            fprintf(stderr, "\n");                \
            failures++;                           \
        }                                         \
    } while (0)

static int (*counters)(heaphook_aix_emul_counts *, size_t);
static volatile int stop;

static void get(heaphook_aix_emul_counts *c) {
    counters(c, sizeof *c);
}

static void *worker(void *arg) {
    unsigned seed = (unsigned)(size_t)arg;
    void *slots[64] = {0};
    while (!stop) {
        unsigned i = (seed = seed * 1103515245u + 12345u) % 64;
        if (slots[i] != NULL) {
            free(slots[i]);
            slots[i] = NULL;
        } else {
            size_t size = 1 + (seed >> 8) % 5000;
            slots[i] = (seed & 1) ? malloc(size) : calloc(1, size);
            if (slots[i] != NULL) memset(slots[i], (int)i, size);
        }
    }
    for (int i = 0; i < 64; i++) free(slots[i]);
    return NULL;
}

static void *child_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) free(malloc(100 + i));
    return NULL;
}

/* In a child: allocate every way, in this thread and a new one. */
static int child(void) {
    heaphook_aix_emul_counts c;
    get(&c);
    if (c.postfork_child != 1) return 10;
    void *blocks[100];
    for (int i = 0; i < 100; i++) {
        blocks[i] = (i % 3 == 0) ? calloc(3, 40 + i) : malloc(40 + i * 13);
        if (blocks[i] == NULL) return 11;
    }
    void *aligned = NULL;
    if (posix_memalign(&aligned, 4096, 5000) != 0 || ((size_t)aligned & 4095) != 0) return 12;
    char *grown = realloc(blocks[1], 100000);
    if (grown == NULL) return 13;
    blocks[1] = grown;
    pthread_t t;
    if (pthread_create(&t, NULL, child_thread, NULL) != 0 || pthread_join(t, NULL) != 0) return 14;
    for (int i = 0; i < 100; i++) free(blocks[i]);
    free(aligned);
    return 0;
}

int main(int argc, char **argv) {
    int forks = argc > 1 ? atoi(argv[1]) : 20;
    counters = (int (*)(heaphook_aix_emul_counts *, size_t))dlsym(RTLD_DEFAULT,
                                                                  "heaphook_aix_emul_counters");
    if (counters == NULL) {
        fprintf(stderr, "aix_probe: FAIL: heaphook_aix_emul_counters not found (no emulation)\n");
        return 2;
    }
    heaphook_aix_emul_counts before;
    get(&before);
    CHECK(before.init_calls == 0, "__malloc_init__ called %lu times before any thread",
          before.init_calls);
    CHECK(before.prefork_calls == 0, "prefork before any fork");
    /* The single-threaded phase: malloc must work before __malloc_init__. */
    void *p = malloc(1000);
    char *q = calloc(10, 10);
    heaphook_aix_emul_counts after_malloc;
    get(&after_malloc);
    CHECK(after_malloc.malloc_calls > before.malloc_calls, "malloc did not reach __malloc__");
    CHECK(after_malloc.calloc_calls > before.calloc_calls, "calloc did not reach __calloc__");
    CHECK(after_malloc.calls_before_init >= 2,
          "no entry-point call counted before __malloc_init__");
    CHECK(after_malloc.init_calls == 0, "__malloc_init__ called without threads");
    free(p);
    free(q);

    enum { THREADS = 4 };
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_create(&threads[i], NULL, worker, (void *)(size_t)(i + 1)) == 0,
              "pthread_create");
    }
    heaphook_aix_emul_counts threaded;
    get(&threaded);
    CHECK(threaded.init_calls == 1, "__malloc_init__ called %lu times after threads started",
          threaded.init_calls);

    int bad = 0;
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid == 0) _exit(child());
        CHECK(pid > 0, "fork");
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (bad++ < 5)
                fprintf(stderr, "aix_probe: child %d ended with status 0x%x\n", i, status);
        }
    }
    CHECK(bad == 0, "%d of %d children failed", bad, forks);
    stop = 1;
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);

    heaphook_aix_emul_counts end;
    get(&end);
    CHECK(end.init_calls == 1, "__malloc_init__ called %lu times", end.init_calls);
    CHECK(end.prefork_calls == (unsigned long)forks, "prefork %lu times for %d forks",
          end.prefork_calls, forks);
    CHECK(end.postfork_parent == (unsigned long)forks, "postfork (parent) %lu times for %d forks",
          end.postfork_parent, forks);
    CHECK(end.postfork_child == 0, "postfork (child) counted in the parent");
    CHECK(end.free_calls > 0 && end.calloc_calls > 0, "free/calloc never reached the plug-in");
    CHECK(end.threads_created == THREADS, "threads %lu", end.threads_created);
    printf(
        "aix_probe: %s malloc=%lu free=%lu calloc=%lu realloc=%lu memalign=%lu init=%lu "
        "prefork=%lu postfork=%lu before_init=%lu\n",
        failures ? "FAIL" : "ok", end.malloc_calls, end.free_calls, end.calloc_calls,
        end.realloc_calls, end.memalign_calls, end.init_calls, end.prefork_calls,
        end.postfork_parent, end.calls_before_init);
    return failures ? 1 : 0;
}
