/*
 * attach_test.c — heaphook_attach (heaphook/attach.h): a program started without LD_PRELOAD
 * allocates with glibc, dlopens a heaphook backend library (argv[1]) and attaches it. From then
 * on allocations reach the backend (its statistics count them), blocks glibc handed out before
 * go back to glibc (free, realloc, malloc_usable_size), threads that allocate and free while
 * the attach and detach happen keep working, and after detach glibc serves again while the
 * backend's blocks still go back to the backend. Last, the main thread forks again and again
 * while another thread detaches and attaches twenty times (the fork module holds the attach
 * lock and the GOT patcher's across fork): every child can allocate, free and ask whether it is
 * attached, and exits 0.
 *
 * Prints "attach: N checks, M failed"; exits with M != 0.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaphook/backend.h"

static int checks, failures;
#define CHECK(cond, ...)                                           \
    do {                                                           \
        ++checks;                                                  \
        if (!(cond)) {                                             \
            ++failures;                                            \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                   \
            printf("\n");                                          \
        }                                                          \
    } while (0)

static int (*get_stats)(heaphook_stats *);
static size_t used_blocks(void) {
    heaphook_stats stats;
    memset(&stats, 0, sizeof stats);
    get_stats(&stats);
    return stats.used_blocks;
}

static volatile int stop;
static void *churn(void *arg) {
    (void)arg;
    void *kept[64] = {0};
    unsigned i = 0;
    while (!stop) {
        unsigned slot = i++ % 64;
        free(kept[slot]); /* from glibc or the backend, whichever served it */
        kept[slot] = malloc(16 + (i % 4000));
        if (i % 7 == 0) kept[slot] = realloc(kept[slot], 8000 + i % 100);
    }
    for (int k = 0; k < 64; ++k) free(kept[k]);
    return NULL;
}

static int (*g_attach)(void), (*g_detach)(void), (*g_is_attached)(void);
static volatile int g_cycles_done, g_cycle_failures;

static void *cycle_attach(void *arg) {
    (void)arg;
    for (int i = 0; i < 20; ++i) {
        if (g_detach() != 0) ++g_cycle_failures;
        usleep(500);
        if (g_attach() != 0) ++g_cycle_failures;
        usleep(500);
    }
    g_cycles_done = 1;
    return NULL;
}

static void fork_while_attaching(void) {
    pthread_t cycler;
    pthread_create(&cycler, NULL, cycle_attach, NULL);
    int forks = 0, children_ok = 0;
    while (!g_cycles_done) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 100; ++i) free(malloc(100 + (size_t)i));
            int attached = g_is_attached();
            exit(attached == 0 || attached == 1 ? 0 : 3);
        }
        ++forks;
        int status = 0;
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            ++children_ok;
    }
    pthread_join(cycler, NULL);
    CHECK(g_cycle_failures == 0, "%d attach/detach calls failed", g_cycle_failures);
    CHECK(forks > 0 && children_ok == forks, "%d of %d children exited 0", children_ok, forks);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Blocks of the allocator that was there first. */
    char *old_small = malloc(100);
    strcpy(old_small, "small block from glibc");
    size_t big = 4 << 20;
    char *old_big = malloc(big);
    memset(old_big, 0x5a, big);
    char *old_many[1000];
    for (int i = 0; i < 1000; ++i) old_many[i] = malloc(24 + i);

    pthread_t threads[4];
    for (int i = 0; i < 4; ++i) pthread_create(&threads[i], NULL, churn, NULL);
    usleep(10000);

    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL, "dlopen: %s", dlerror());
    if (lib == NULL) return 1;
    int (*attach)(void) = (int (*)(void))dlsym(lib, "heaphook_attach");
    int (*detach)(void) = (int (*)(void))dlsym(lib, "heaphook_detach");
    int (*is_attached)(void) = (int (*)(void))dlsym(lib, "heaphook_is_attached");
    get_stats = (int (*)(heaphook_stats *))dlsym(lib, "heaphook_get_stats");
    CHECK(attach && detach && is_attached && get_stats, "API");
    CHECK(is_attached() == 0, "attached before attach");

    CHECK(attach() == 0, "attach");
    CHECK(is_attached() == 1, "not attached");
    /* The threads allocated and freed across the attach; stop them to count exactly. */
    usleep(20000);
    stop = 1;
    for (int i = 0; i < 4; ++i) pthread_join(threads[i], NULL);

    size_t before = used_blocks();
    char *p = malloc(1000);
    CHECK(used_blocks() == before + 1, "malloc did not reach the backend (%zu -> %zu)", before,
          used_blocks());
    char *dup = strdup("made by libc's strdup");
    CHECK(used_blocks() == before + 2, "libc's own malloc call did not reach the backend");
    free(dup);
    CHECK(used_blocks() == before + 1, "free of a backend block");

    /* Ownership: glibc's blocks go back to glibc. */
    CHECK(strcmp(old_small, "small block from glibc") == 0, "old block intact");
    CHECK(malloc_usable_size(old_small) >= 100, "usable size of a glibc block");
    free(old_small);
    char *grown = realloc(old_big, 2 * big);
    CHECK(grown != NULL && grown[0] == 0x5a && grown[big - 1] == 0x5a, "realloc of a glibc block");
    free(grown);
    for (int i = 0; i < 1000; ++i) free(old_many[i]);
    CHECK(used_blocks() == before + 1, "glibc frees reached the backend");

    stop = 0;
    for (int i = 0; i < 4; ++i) pthread_create(&threads[i], NULL, churn, NULL);
    usleep(10000);
    CHECK(detach() == 0, "detach");
    usleep(20000);
    stop = 1;
    for (int i = 0; i < 4; ++i) pthread_join(threads[i], NULL);
    CHECK(is_attached() == 0, "still attached");
    size_t after_detach = used_blocks();
    char *q = malloc(1000);
    CHECK(used_blocks() == after_detach, "malloc after detach reached the backend");
    free(q);
    free(p); /* a backend block, freed after detach */
    CHECK(used_blocks() == after_detach - 1, "backend block freed after detach");

    CHECK(attach() == 0, "attach again");
    char *r = malloc(50);
    CHECK(used_blocks() == after_detach, "malloc after the second attach");
    free(r);

    g_attach = attach;
    g_detach = detach;
    g_is_attached = is_attached;
    fork_while_attaching();
    printf("attach: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
