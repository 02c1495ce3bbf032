/*
 * forker.c — fork while other threads allocate: the tracer must not deadlock, and each child
 * must be able to allocate and get a log of its own.
 *
 *   hh_test_forker FORKS THREADS [exit|_exit]
 *
 * Each child ends through exit (the default) or _exit (no exit path: what a forked worker,
 * Python's os._exit or a signal handler does).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *spin(void *arg) {
    (void)arg;
    unsigned i = 0;
    while (!atomic_load(&stop)) {
        void *p = malloc(16 + (i++ % 4000));
        free(p);
    }
    return NULL;
}

__attribute__((noinline)) void child_work(void) {
    for (int i = 0; i < 10; i++) free(malloc(100 + (size_t)i));
}

/* One line on stderr for a child that did not exit 0: the test shows it beside the count. */
static void report_child(pid_t pid, int status) {
    char line[96];
    int n = snprintf(line, sizeof line, "child %d: %s %d\n", (int)pid,
                     pid < 0               ? "fork failed, errno"
                     : WIFSIGNALED(status) ? "killed by signal"
                                           : "exit status",
                     pid < 0               ? errno
                     : WIFSIGNALED(status) ? WTERMSIG(status)
                                           : WEXITSTATUS(status));
    ssize_t r = write(2, line, (size_t)n);
    (void)r;
}

int main(int argc, char **argv) {
    int forks = argc > 1 ? atoi(argv[1]) : 20;
    int threads = argc > 2 ? atoi(argv[2]) : 3;
    bool children_use__exit = argc > 3 && strcmp(argv[3], "_exit") == 0;
    pthread_t ids[16];
    if (threads > 16) threads = 16;
    for (int i = 0; i < threads; i++) pthread_create(&ids[i], NULL, spin, NULL);
    int ok = 0;
    for (int f = 0; f < forks; f++) {
        pid_t pid = fork();
        if (pid == 0) {
            child_work();
            if (children_use__exit) _exit(0);
            exit(0);
        }
        int status = 0;
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0) {
            ok++;
        } else {
            report_child(pid, status);
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    char line[64];
    int n = 0;
    const char *prefix = "children ok: ";
    memcpy(line, prefix, strlen(prefix));
    n = (int)strlen(prefix);
    char digits[16];
    int k = 0;
    do {
        digits[k++] = (char)('0' + ok % 10);
        ok /= 10;
    } while (ok);
    while (k) line[n++] = digits[--k];
    line[n++] = '\n';
    ssize_t r = write(1, line, (size_t)n);
    (void)r;
    return 0;
}
