/* The target of `heaphook-bench attach` (src/attach.ts builds it with cc at run time).
 * The main thread runs a tight loop of work units (a malloc of 16..527 bytes, a write to it, a
 * free), reading CLOCK_MONOTONIC (vDSO, no syscall) after each one. Every 100 ms it prints one
 * line: "<now ns> <units in the period> <longest gap between two units in the period, ns>".
 * argv[1] "idle": a second thread sleeps in nanosleep (a thread the injector can take without
 * stopping the loop); "alone": the loop is the only thread. SIGTERM ends it (exit 0). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t done;
static void on_term(int sig) {
    (void)sig;
    done = 1;
}

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void *sleeper(void *arg) {
    (void)arg;
    struct timespec second = {1, 0};
    while (!done) nanosleep(&second, NULL);
    return NULL;
}

int main(int argc, char **argv) {
    signal(SIGTERM, on_term);
    pthread_t idle;
    int with_idle = argc > 1 && strcmp(argv[1], "idle") == 0;
    if (with_idle) pthread_create(&idle, NULL, sleeper, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready %d\n", (int)getpid());
    unsigned long long last = now_ns(), period_start = last, units = 0, max_gap = 0;
    unsigned n = 0;
    while (!done) {
        char *p = malloc(16 + (n++ % 512));
        p[0] = (char)n;
        free(p);
        unsigned long long t = now_ns();
        if (t - last > max_gap) max_gap = t - last;
        last = t;
        units++;
        if (t - period_start >= 100000000ull) {
            printf("%llu %llu %llu\n", t, units, max_gap);
            period_start = now_ns();
            last = period_start;
            units = 0;
            max_gap = 0;
        }
    }
    if (with_idle) pthread_join(idle, NULL);
    return 0;
}
