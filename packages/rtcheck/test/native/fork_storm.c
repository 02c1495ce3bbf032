/*
 * fork_storm.c — forks while other threads are inside the guard: each of THREADS workers
 * loops entering a marked section (heaphook_rt_enter: the registry's slot lock, a /proc read),
 * allocating and freeing there (violations: the table of sites, the unwinder) and leaving it,
 * while the main thread forks CHILDREN times. Each child marks itself, allocates and frees
 * exactly CHILD_ALLOCATIONS times from one place (child_step), and exits normally, so its
 * destructor writes a report of its own (HEAPHOOK_RT_REPORT with %p).
 *
 *   rt_fork_storm CHILDREN
 * Prints "child <pid>" for each child that exited with status 0, then "storm: <n> children".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaphook/rt.h"

#define THREADS 4
#define CHILD_ALLOCATIONS 7
#define BLOCK_BYTES 48

static atomic_int stop;

static void *worker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "worker");
    while (!atomic_load(&stop)) {
        heaphook_rt_enter();
        free(malloc(BLOCK_BYTES));
        heaphook_rt_exit();
    }
    return NULL;
}

__attribute__((noinline)) static void child_step(void **blocks) {
    for (int i = 0; i < CHILD_ALLOCATIONS; i++) blocks[i] = malloc(BLOCK_BYTES);
    for (int i = 0; i < CHILD_ALLOCATIONS; i++) free(blocks[i]);
}

static void child(void) {
    void *blocks[CHILD_ALLOCATIONS];
    pthread_setname_np(pthread_self(), "child");
    heaphook_rt_enter();
    child_step(blocks);
    heaphook_rt_exit();
    exit(0);
}

int main(int argc, char **argv) {
    int children = argc > 1 ? atoi(argv[1]) : 10;
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, worker, NULL);
    int ok = 0;
    for (int i = 0; i < children; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) child();
        int status;
        if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("child %d\n", (int)pid);
            ok++;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    printf("storm: %d children\n", ok);
    return ok == children ? 0 : 1;
}
