/*
 * fork_storm — forks while other threads are inside the client: THREADS workers allocate and
 * free small blocks without pause (sampled: frames sent on the parent's link, the
 * sampled-address table), while the main thread forks CHILDREN times. Each child holds
 * CHILD_BLOCKS blocks of BLOCK_BYTES (paced, as a service's start-up is), prints
 * "child <pid>", and waits until stdin closes. The parent prints "parent <pid>" once every
 * child is started, waits until stdin closes, and ends its workers and children.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define CHILDREN 4
#define CHILD_BLOCKS 2000
#define BLOCK_BYTES 4096
#define WORKER_BYTES 200

static atomic_int stop;

static void *worker(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) free(malloc(WORKER_BYTES));
    return NULL;
}

static void wait_for_stdin_to_close(void) {
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
}

static void *blocks[CHILD_BLOCKS];

static void child(void) {
    for (int i = 0; i < CHILD_BLOCKS; i++) {
        usleep(200);
        blocks[i] = malloc(BLOCK_BYTES);
        if (blocks[i] == NULL) abort();
        memset(blocks[i], i & 0xff, BLOCK_BYTES);
    }
    printf("child %d\n", (int)getpid());
    fflush(stdout);
    wait_for_stdin_to_close();
    _exit(0);
}

int main(void) {
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, worker, NULL);
    pid_t pids[CHILDREN];
    for (int i = 0; i < CHILDREN; i++) {
        usleep(20000); /* the workers are in full swing */
        fflush(stdout);
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[i] == 0) child();
    }
    printf("parent %d\n", (int)getpid());
    fflush(stdout);
    wait_for_stdin_to_close();
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    int failed = 0;
    for (int i = 0; i < CHILDREN; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed++;
    }
    return failed == 0 ? 0 : 1;
}
