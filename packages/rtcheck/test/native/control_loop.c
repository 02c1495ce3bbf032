/*
 * control_loop.c — a control loop that allocates exactly N times from one function
 * (control_step), beside a SCHED_OTHER worker that allocates freely.
 *
 *   rt_control_loop MODE N
 *     fifo   the control thread switches itself to SCHED_FIFO (pthread_setschedparam)
 *     attr   the control thread is created with SCHED_FIFO attributes
 *     sched  the control thread calls sched_setscheduler(0, SCHED_FIFO)
 *     mark   no policy change: each step is inside heaphook_rt_enter/exit (heaphook/rt.h)
 *     rtsan  no policy change: each step is inside __rtsan_realtime_enter/exit
 *     none   no real-time context at all (the report must be empty)
 * The control thread leaves the real-time context before it frees its blocks and prints.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heaphook/rt.h"

/* RTSan's standalone interface, as code marked for RTSan declares it. */
void __rtsan_realtime_enter(void) __attribute__((weak));
void __rtsan_realtime_exit(void) __attribute__((weak));

#define MAX_STEPS 100000
#define WORKER_ALLOCATIONS 20000

static const char *mode;
static long steps;
static void *blocks[MAX_STEPS];

__attribute__((noinline)) void control_step(long i) {
    blocks[i] = malloc(32 + (size_t)(i % 8));
    ((char *)blocks[i])[0] = (char)i;
}

static void set_policy(int policy, int priority) {
    struct sched_param param = {.sched_priority = priority};
    int rc = pthread_setschedparam(pthread_self(), policy, &param);
    if (rc != 0) {
        fprintf(stderr, "pthread_setschedparam: %s\n", strerror(rc));
        exit(2);
    }
}

static void *control(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "control");
    if (strcmp(mode, "fifo") == 0) set_policy(SCHED_FIFO, 10);
    if (strcmp(mode, "sched") == 0) {
        struct sched_param param = {.sched_priority = 10};
        if (sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
            perror("sched_setscheduler");
            exit(2);
        }
    }
    for (long i = 0; i < steps; i++) {
        if (strcmp(mode, "mark") == 0) {
            heaphook_rt_enter();
            control_step(i);
            heaphook_rt_exit();
        } else if (strcmp(mode, "rtsan") == 0) {
            if (__rtsan_realtime_enter) __rtsan_realtime_enter();
            control_step(i);
            if (__rtsan_realtime_exit) __rtsan_realtime_exit();
        } else {
            control_step(i);
        }
    }
    if (strcmp(mode, "fifo") == 0 || strcmp(mode, "attr") == 0) set_policy(SCHED_OTHER, 0);
    if (strcmp(mode, "sched") == 0) {
        struct sched_param param = {.sched_priority = 0};
        sched_setscheduler(0, SCHED_OTHER, &param);
    }
    for (long i = 0; i < steps; i++) free(blocks[i]);
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "worker");
    for (int i = 0; i < WORKER_ALLOCATIONS; i++) {
        char *p = malloc(64 + (size_t)(i % 512));
        p[0] = 1;
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: rt_control_loop fifo|attr|sched|mark|rtsan|none N\n");
        return 2;
    }
    mode = argv[1];
    steps = atol(argv[2]);
    if (steps < 0 || steps > MAX_STEPS) return 2;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (strcmp(mode, "attr") == 0) {
        struct sched_param param = {.sched_priority = 10};
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &param);
    }
    pthread_t control_thread, worker_thread;
    pthread_create(&worker_thread, NULL, worker, NULL);
    int rc = pthread_create(&control_thread, &attr, control, NULL);
    if (rc != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(rc));
        return 2;
    }
    pthread_join(control_thread, NULL);
    pthread_join(worker_thread, NULL);
    printf("control loop: %ld steps\n", steps);
    return 0;
}
