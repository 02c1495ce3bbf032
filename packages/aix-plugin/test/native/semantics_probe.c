/*
 * semantics_probe.c — the AIX semantics of a plug-in, run under the emulation
 * (test/integration/semantics.test.ts).
 *
 *   semantics_probe mallopt   mallopt's results (glibc's convention here: 1 accepted, 0 refused):
 *                             M_MXFAST, M_NLBLKS, M_GRAIN, M_KEEP refused; M_MALIGN accepted for
 *                             a power of two and then every malloc, calloc and realloc block so
 *                             aligned (the plug-in's block: 16 bytes before the program's, the
 *                             emulation's header), refused otherwise; prints the results
 *   semantics_probe threads   4 threads allocate, check and free blocks while the main thread
 *                             forks twice; every 16th allocation of the plug-in calls back
 *                             aix_test_user_callback (exported here), which allocates again from
 *                             inside the plug-in; prints "threads ok ..." or the corruption found
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef M_DISCLAIM
#define M_DISCLAIM 5 /* AIX's values, absent from glibc's <malloc.h> */
#endif
#ifndef M_MALIGN
#define M_MALIGN 6
#endif
#define EMUL_HEADER 16

static int plugin_aligned(const void *p, size_t align) {
    return ((uintptr_t)p - EMUL_HEADER) % align == 0;
}

static int mallopt_probe(void) {
    int mxfast = mallopt(M_MXFAST, 64), nlblks = mallopt(M_NLBLKS, 100);
    int grain = mallopt(M_GRAIN, 16), keep = mallopt(M_KEEP, 0);
    int bad = mallopt(M_MALIGN, 100), zero = mallopt(M_MALIGN, 0);
    int malign = mallopt(M_MALIGN, 256);
    int aligned = 0, zeroed = 1, kept = 1;
    for (int i = 0; i < 200; i++) {
        char *p = malloc(1 + (size_t)i * 37 % 4000);
        aligned += p != NULL && plugin_aligned(p, 256);
        free(p);
    }
    unsigned char *z = calloc(100, 7);
    for (int i = 0; i < 700; i++) zeroed &= z[i] == 0;
    int calloc_aligned = plugin_aligned(z, 256);
    char *r = malloc(10);
    strcpy(r, "realloc");
    for (size_t n = 100; n <= 20000; n *= 3) {
        r = realloc(r, n);
        kept &= strcmp(r, "realloc") == 0 && plugin_aligned(r, 256);
    }
    free(r);
    free(z);
    int reset = mallopt(M_MALIGN, 16), after = 0;
    for (int i = 0; i < 200; i++) {
        char *p = malloc(1 + (size_t)i * 37 % 4000);
        after += plugin_aligned(p, 256);
        free(p);
    }
    int trim_threshold = mallopt(M_TRIM_THRESHOLD, 1 << 20);
    printf(
        "mallopt mxfast=%d nlblks=%d grain=%d keep=%d malign_bad=%d malign_zero=%d malign=%d "
        "aligned=%d calloc_aligned=%d zeroed=%d realloc_kept=%d reset=%d "
        "aligned_after_reset=%d trim_threshold=%d\n",
        mxfast, nlblks, grain, keep, bad, zero, malign, aligned, calloc_aligned, zeroed, kept,
        reset, after, trim_threshold);
    return 0;
}

/* ---- threads ---- */

void aix_test_user_callback(void);
__attribute__((visibility("default"))) void aix_test_user_callback(void) {
    /* a user's hook inside the malloc subsystem that allocates: it comes back in */
    unsigned char *p = malloc(64);
    if (p == NULL) return;
    memset(p, 0xcb, 64);
    free(p);
}

enum { THREADS = 4, ROUNDS = 20000, SLOTS = 64 };
static long corrupt;

static void *worker(void *arg) {
    unsigned id = (unsigned)(uintptr_t)arg, seed = id * 2654435761u;
    unsigned char *slots[SLOTS] = {0};
    size_t sizes[SLOTS] = {0};
    for (int i = 0; i < ROUNDS; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)(seed >> 8) % SLOTS;
        if (slots[k] != NULL) {
            for (size_t b = 0; b < sizes[k]; b++)
                if (slots[k][b] != (unsigned char)(id + k)) {
                    __atomic_add_fetch(&corrupt, 1, __ATOMIC_RELAXED);
                    break;
                }
            free(slots[k]);
        }
        sizes[k] = 16 + (seed >> 4) % 2000;
        slots[k] = malloc(sizes[k]);
        if (slots[k] == NULL) abort();
        memset(slots[k], (unsigned char)(id + k), sizes[k]);
    }
    for (int k = 0; k < SLOTS; k++) free(slots[k]);
    return NULL;
}

static int threads_probe(void) {
    pthread_t t[THREADS];
    for (unsigned i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    int children_ok = 0;
    for (int f = 0; f < 2; f++) {
        usleep(20000);
        pid_t pid = fork();
        if (pid == 0) { /* the child: its one thread allocates, through the callback too */
            for (int i = 0; i < 1000; i++) free(malloc(32 + (size_t)i));
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        children_ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    int disclaim = mallopt(M_DISCLAIM, 0);
    printf("threads corrupt=%ld children_ok=%d disclaim=%d\n", corrupt, children_ok, disclaim);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: semantics_probe mallopt|threads\n");
        return 2;
    }
    if (strcmp(argv[1], "mallopt") == 0)
        mallopt_probe();
    else if (strcmp(argv[1], "threads") == 0)
        threads_probe();
    else
        return 2;
    return 0;
}
