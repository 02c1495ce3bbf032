/*
 * attach: heaphook_heaptrack_attach / _detach while other threads allocate, then a fork.
 * Usage: hh_test_attach <libheaphook_heaptrack.so> <log dir> <cycles>
 * Four threads malloc, realloc and free without pause; the main thread attaches and detaches
 * `cycles` times (a log per cycle), forks while attached (the child allocates and exits), and
 * prints one JSON line: {"cycles":N,"child":status,"marker":M} where the main thread made
 * exactly M calls of malloc(777777) in each attached phase.
 *
 * Usage: LD_PRELOAD=hh_test_slow_free.so hh_test_attach <lib> <log file> inflight
 * A thread frees a block through the tracer's hook into slow_free.c's free, which holds it
 * 300 ms; meanwhile the main thread makes its 3 marker calls and detaches. The free's record
 * was reserved before the markers' and is published after them: the detach must wait for it
 * (the reader stops at the first unpublished record), else the markers would be lost.
 * Prints {"inflight":1,"marker":3}.
 *
 * Usage: hh_test_attach <lib> <log dir> forkattach <cycles>
 * While four threads allocate, one thread attaches and detaches `cycles` times and the main
 * thread forks meanwhile, again and again (a fork waits for an attach or detach in progress:
 * fork.c's lock order); each child makes malloc(100 + i) for i < 100 and exits. Prints
 * {"cycles":N,"forks":F,"children_ok":C}.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MARKER_SIZE 777777
#define MARKERS 3

static atomic_int stop;

static void *churn(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *slots[64] = {0};
    while (!atomic_load(&stop)) {
        unsigned k = (seed = seed * 1103515245u + 12345u) % 64;
        if (slots[k] != NULL && (seed & 1)) {
            free(slots[k]);
            slots[k] = NULL;
        } else {
            void *p = realloc(slots[k], 16 + (seed >> 8) % 4000);
            if (p != NULL) {
                memset(p, 1, 16);
                slots[k] = p;
            }
        }
    }
    for (int k = 0; k < 64; k++) free(slots[k]);
    return NULL;
}

static void *slow_free_thread(void *block) {
    free(block);
    return NULL;
}

static int inflight(int (*attach)(const char *), int (*detach)(void), const char *log) {
    void *_Atomic *target = dlsym(RTLD_DEFAULT, "hh_slow_free_target");
    atomic_int *entered = dlsym(RTLD_DEFAULT, "hh_slow_free_entered");
    if (target == NULL || entered == NULL) {
        fprintf(stderr, "preload hh_test_slow_free.so\n");
        return 4;
    }
    void *block = malloc(4321);
    if (attach(log) != 0) return 2;
    atomic_store(target, block);
    pthread_t thread;
    pthread_create(&thread, NULL, slow_free_thread, block);
    while (!atomic_load(entered)) usleep(100);
    for (int m = 0; m < MARKERS; m++) free(malloc(MARKER_SIZE));
    if (detach() != 0) return 3; /* the free is still inside the hook */
    pthread_join(thread, NULL);
    printf("{\"inflight\":1,\"marker\":%d}\n", MARKERS);
    return 0;
}

struct cycler {
    int (*attach)(const char *);
    int (*detach)(void);
    const char *dir;
    int cycles;
    atomic_int done, failed;
};

static void *attach_cycles(void *arg) {
    struct cycler *c = arg;
    for (int i = 0; i < c->cycles; i++) {
        if (c->attach(c->dir) != 0) atomic_store(&c->failed, 1);
        usleep(2000); /* forks land while attached, and while attaching or detaching */
        if (c->detach() != 0) atomic_store(&c->failed, 1);
    }
    atomic_store(&c->done, 1);
    return NULL;
}

static int fork_while_attaching(struct cycler *c) {
    pthread_t cycling;
    pthread_create(&cycling, NULL, attach_cycles, c);
    int forks = 0, ok = 0;
    while (!atomic_load(&c->done)) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 100; i++) free(malloc(100 + (size_t)i));
            exit(0);
        }
        forks++;
        int status = 0;
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            ok++;
    }
    pthread_join(cycling, NULL);
    if (atomic_load(&c->failed)) return 3;
    printf("{\"cycles\":%d,\"forks\":%d,\"children_ok\":%d}\n", c->cycles, forks, ok);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[3], "forkattach") == 0)) return 64;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int (*attach)(const char *) = (int (*)(const char *))dlsym(lib, "heaphook_heaptrack_attach");
    int (*detach)(void) = (int (*)(void))dlsym(lib, "heaphook_heaptrack_detach");
    if (strcmp(argv[3], "inflight") == 0) return inflight(attach, detach, argv[2]);
    pthread_t threads[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&threads[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    if (strcmp(argv[3], "forkattach") == 0) {
        struct cycler c = {attach, detach, argv[2], atoi(argv[4]), 0, 0};
        int rc = fork_while_attaching(&c);
        atomic_store(&stop, 1);
        for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
        return rc;
    }
    int cycles = atoi(argv[3]), child = -1;
    for (int c = 0; c < cycles; c++) {
        if (attach(argv[2]) != 0) return 2;
        for (int m = 0; m < MARKERS; m++) free(malloc(MARKER_SIZE));
        usleep(2000);
        if (c == cycles / 2) {
            pid_t pid = fork();
            if (pid == 0) {
                for (int i = 0; i < 100; i++) free(malloc(100 + i));
                exit(0); /* its destructors complete its log (_exit would lose the tail) */
            }
            int status = 0;
            waitpid(pid, &status, 0);
            child = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        if (detach() != 0) return 3;
        free(malloc(MARKER_SIZE + 1)); /* not traced */
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    printf("{\"cycles\":%d,\"child\":%d,\"marker\":%d}\n", cycles, child, MARKERS);
    return 0;
}
