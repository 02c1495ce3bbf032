/* A target for heaphook-inject's tests: prints "ready" once running, then per SIGUSR1 line of
 * work makes `count` malloc/free pairs and prints "done <count>". argv: [mode [threads]]
 *   wait     (default) main thread blocked in sigwaitinfo (a syscall the allocator never makes)
 *   busy     main thread spins in a malloc/free loop: no thread is idle; the injector must
 *            trace it to a syscall outside the allocator (it calls getpid every 4096 pairs)
 *   threads  `threads` threads allocating all the time, the main thread in sigwaitinfo
 *   spin     spins in malloc/free without a syscall (the clock is the vDSO's) and exits with
 *            status 0 after `threads` milliseconds: a process that exits during the attach
 *   ringwait the only thread waits on a futex in a memfd named "heaphook-ring", as a thread of a
 *            traced process waits for room in the tracer's ring: it is inside the tracer's malloc,
 *            so the injector must not take it (it gives up: no thread outside the allocator)
 * SIGTERM: prints "bye" and exits 0. */
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int stop;

static void *allocate_forever(void *arg) {
    (void)arg;
    unsigned n = 0;
    while (!stop) {
        void *p = malloc(16 + (n++ % 512));
        memset(p, 1, 16);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "wait";
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    pthread_t workers[64];
    if (strcmp(mode, "threads") == 0)
        for (int i = 0; i < threads && i < 64; i++)
            pthread_create(&workers[i], NULL, allocate_forever, NULL);
    if (strcmp(mode, "ringwait") == 0) {
        /* set up before "ready": after it, the thread only waits */
        int fd = (int)syscall(SYS_memfd_create, "heaphook-ring", 1u /* MFD_CLOEXEC */);
        if (fd < 0 || ftruncate(fd, 4096) != 0) return 1;
        unsigned *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (word == MAP_FAILED) return 1;
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;) syscall(SYS_futex, word, FUTEX_WAIT, 0, NULL, NULL, 0);
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (strcmp(mode, "spin") == 0) {
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
            for (int i = 0; i < 1000; i++) free(malloc(64));
            clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 <
                 threads);
        _exit(0);
    }
    if (strcmp(mode, "busy") == 0) {
        unsigned long n = 0;
        struct timespec zero = {0, 0};
        for (;;) {
            void *p = malloc(32 + (n % 256));
            free(p);
            if (++n % 4096 == 0) {
                getpid();
                if (sigtimedwait(&set, NULL, &zero) == SIGTERM) break;
            }
        }
        printf("bye\n");
        return 0;
    }
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&set, &info);
        if (sig == SIGTERM) break;
        if (sig != SIGUSR1) continue;
        int count = 1000;
        void *blocks[1000];
        for (int i = 0; i < count; i++) blocks[i] = malloc(100 + i);
        for (int i = 0; i < count; i++) free(blocks[i]);
        printf("done %d\n", count);
        fflush(stdout);
    }
    stop = 1;
    if (strcmp(mode, "threads") == 0)
        for (int i = 0; i < threads && i < 64; i++) pthread_join(workers[i], NULL);
    printf("bye\n");
    return 0;
}
