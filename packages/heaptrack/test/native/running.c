/* A running process for `heaphook record -p` / `heaphook snapshot` tests
 * (test/integration/record-pid.test.ts). At start it allocates 500 blocks of 1000 bytes (before any
 * attach), prints "ready <pid>" and waits for signals in sigwaitinfo (main thread). argv:
 * [threads]: that many threads allocate and free all the time (a short pause every 16 blocks), from
 * start to exit. SIGUSR1  the first time: frees the 500 early blocks; every time: 1000 blocks of
 * 100 + i bytes, 500 of them freed, 500 kept until the next SIGUSR1 frees them; then "work <n>"
 *   SIGUSR2  forks a child that makes 100 allocations of 64 bytes, frees them and exits 0
 *            (through exit: its log ends normally); "forked <pid>" once it is gone
 *   SIGTERM  frees what it keeps, prints "bye", exits 0 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EARLY = 500, WORK = 1000 };
static void *early[EARLY];
static void *kept[WORK / 2];
static volatile int stop;

/* Allocates all the time, with a 100 us pause every 16 blocks (a log of 200 ms stays small). */
static void *churn(void *arg) {
    (void)arg;
    unsigned n = 0;
    struct timespec pause = {0, 100000};
    while (!stop) {
        void *p = malloc(16 + (n++ % 256));
        memset(p, 0, 16);
        free(p);
        if (n % 16 == 0) nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    for (int i = 0; i < EARLY; i++) early[i] = malloc(1000);
    pthread_t workers[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&workers[i], NULL, churn, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    int rounds = 0;
    for (;;) {
        int sig = sigwaitinfo(&set, NULL);
        if (sig == SIGTERM) break;
        if (sig == SIGUSR1) {
            if (rounds == 0)
                for (int i = 0; i < EARLY; i++) free(early[i]);
            else
                for (int i = 0; i < WORK / 2; i++) free(kept[i]);
            for (int i = 0; i < WORK; i++) {
                void *p = malloc(100 + (size_t)i);
                if (i % 2 == 0)
                    free(p);
                else
                    kept[i / 2] = p;
            }
            printf("work %d\n", ++rounds);
            fflush(stdout);
        } else if (sig == SIGUSR2) {
            pid_t child = fork();
            if (child == 0) {
                void *blocks[100];
                for (int i = 0; i < 100; i++) blocks[i] = malloc(64);
                for (int i = 0; i < 100; i++) free(blocks[i]);
                exit(0);
            }
            int status;
            waitpid(child, &status, 0);
            printf("forked %d\n", (int)child);
            fflush(stdout);
        }
    }
    stop = 1;
    for (int i = 0; i < threads && i < 64; i++) pthread_join(workers[i], NULL);
    if (rounds > 0)
        for (int i = 0; i < WORK / 2; i++) free(kept[i]);
    printf("bye\n");
    return 0;
}
