/*
 * fork_stress.c — fork again and again while other threads allocate from ever new call stacks
 * (so they keep creating stack nodes, the stack trie's lock, and fill a small ring), optionally
 * while leak checks run: no fork may deadlock, and every process traces exactly its own calls.
 *
 *   hh_test_fork_stress FORKS THREADS [check]
 *   hh_test_fork_stress CALLS THREADS unmap
 *
 * THREADS threads (4 or more for the tests) malloc and free at the bottom of a recursion whose
 * path through two call sites per level changes with every call. The main thread, before fork
 * number f, makes one marker call malloc(MARKER + f); each child makes malloc(CHILD + i) for
 * i < CHILD_CALLS, once each, and leaves through exit. With `check`, one more thread sends
 * SIGUSR1 (HEAPHOOK_LEAK_SIGNAL=USR1: a leak check on the tracer's thread) every millisecond
 * while the forks go on.
 *
 * Prints one line, {"forks":F,"children_ok":C}: C children exited with status 0.
 *
 * `unmap`: no fork; the main thread makes CALLS marker calls, free(malloc(MARKER + f)), each
 * a block glibc maps and its free unmaps (M_MMAP_THRESHOLD fixed at 128 KiB), while the threads
 * fill the ring: the unmap is a VM event raised inside free, which holds its own record
 * (native/track/vm.h). Prints {"unmaps":CALLS}.
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MARKER 900000
#define CHILD 700000
#define CHILD_CALLS 100

static atomic_int stop;

__attribute__((noinline)) static void *bottom(unsigned seed) {
    void *p = malloc(16 + seed % 4000);
    if (p != NULL) memset(p, 1, 16);
    return p;
}

__attribute__((noinline)) static void *left(unsigned depth, unsigned path, unsigned seed);
__attribute__((noinline)) static void *right(unsigned depth, unsigned path, unsigned seed);

/* Two call sites per level: 2^depth distinct stacks. */
__attribute__((noinline)) static void *descend(unsigned depth, unsigned path, unsigned seed) {
    if (depth == 0) return bottom(seed);
    void *p = (path & 1) ? left(depth - 1, path >> 1, seed) : right(depth - 1, path >> 1, seed);
    __asm__ volatile("" ::: "memory"); /* no tail call: each level keeps its frame */
    return p;
}

__attribute__((noinline)) static void *left(unsigned depth, unsigned path, unsigned seed) {
    void *p = descend(depth, path, seed);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *right(unsigned depth, unsigned path, unsigned seed) {
    void *p = descend(depth, path, seed);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *churn(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
    void *slots[32] = {0};
    while (!atomic_load(&stop)) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % 32;
        free(slots[k]);
        slots[k] = descend(4 + (seed >> 20) % 12, seed >> 3, seed);
    }
    for (int k = 0; k < 32; k++) free(slots[k]);
    return NULL;
}

static void *check_signals(void *arg) {
    (void)arg;
    struct timespec ms = {0, 50 * 1000 * 1000};
    while (!atomic_load(&stop)) {
        kill(getpid(), SIGUSR1);
        nanosleep(&ms, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int forks = argc > 1 ? atoi(argv[1]) : 50;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    int check = argc > 3 && strcmp(argv[3], "check") == 0;
    int unmap = argc > 3 && strcmp(argv[3], "unmap") == 0;
    if (threads > 32) threads = 32;
    pthread_t ids[33];
    for (int i = 0; i < threads; i++)
        pthread_create(&ids[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    if (check) pthread_create(&ids[threads], NULL, check_signals, NULL);
    int ok = 0;
    if (unmap) {
        /* a fixed threshold: glibc would otherwise raise it to the size of the first block
         * freed, and serve the next ones from the heap */
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        for (int f = 0; f < forks; f++) {
            char *p = malloc(MARKER + (size_t)f);
            if (p != NULL) p[0] = 1;
            free(p);
        }
    } else {
        for (int f = 0; f < forks; f++) {
            free(malloc(MARKER + (size_t)f));
            pid_t pid = fork();
            if (pid == 0) {
                for (int i = 0; i < CHILD_CALLS; i++) free(malloc(CHILD + (size_t)i));
                exit(0);
            }
            int status = 0;
            if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0) {
                ok++;
            }
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < threads + check; i++) pthread_join(ids[i], NULL);
    if (unmap)
        printf("{\"unmaps\":%d}\n", forks);
    else
        printf("{\"forks\":%d,\"children_ok\":%d}\n", forks, ok);
    return 0;
}
