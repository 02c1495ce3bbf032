/*
 * control_loop.c — a control loop that allocates exactly N times from one function
 * (control_step), beside a SCHED_OTHER worker that allocates freely.
 *
 *   rt_control_loop MODE N
 *     fifo   the control thread switches itself to SCHED_FIFO (pthread_setschedparam)
 *     attr   the control thread is created with SCHED_FIFO attributes
 *     sched  the control thread calls sched_setscheduler(0, SCHED_FIFO)
 *     by-main  the main thread switches the control thread to SCHED_FIFO before it starts
 *     setattr  the control thread calls syscall(SYS_sched_setattr) (glibc 2.36 has no wrapper)
 *     mark   no policy change: each step is inside heaphook_rt_enter/exit (heaphook/rt.h)
 *     warmup-sleep   marked: N steps, 400 ms outside the section, N more steps
 *     warmup-signal  marked: N steps, raise(SIGUSR2), N more steps
 *     rtsan  no policy change: each step is inside __rtsan_realtime_enter/exit
 *     two-sites  as fifo, and each step also allocates from a second function (control_log)
 *     none   no real-time context at all (the report must be empty)
 * The control thread leaves the real-time context before it frees its blocks and prints.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
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
static void *blocks[2 * MAX_STEPS];
static void *log_blocks[MAX_STEPS];
static atomic_int go = 1; /* by-main: the control thread waits until its policy is set */

/* struct sched_attr (linux/sched/types.h), for syscall(SYS_sched_setattr). */
struct rt_sched_attr {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};

static void setattr_policy(int policy, int priority) {
    struct rt_sched_attr attr = {.size = sizeof attr,
                                 .sched_policy = (uint32_t)policy,
                                 .sched_priority = (uint32_t)priority};
    if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) {
        perror("sched_setattr");
        exit(2);
    }
}

static int is(const char *name) {
    return strcmp(mode, name) == 0;
}

__attribute__((noinline)) void control_step(long i) {
    blocks[i] = malloc(32 + (size_t)(i % 8));
    ((char *)blocks[i])[0] = (char)i;
}

__attribute__((noinline)) void control_log(long i) {
    log_blocks[i] = malloc(16);
    ((char *)log_blocks[i])[0] = (char)i;
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
    while (!atomic_load(&go)) {
    }
    if (is("fifo") || is("two-sites")) set_policy(SCHED_FIFO, 10);
    if (is("setattr")) setattr_policy(SCHED_FIFO, 10);
    if (strcmp(mode, "sched") == 0) {
        struct sched_param param = {.sched_priority = 10};
        if (sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
            perror("sched_setscheduler");
            exit(2);
        }
    }
    long total = steps;
    if (is("warmup-sleep") || is("warmup-signal")) total = 2 * steps;
    for (long i = 0; i < total; i++) {
        if (i == steps && is("warmup-sleep")) {
            struct timespec pause = {0, 400 * 1000000L};
            nanosleep(&pause, NULL);
        }
        if (i == steps && is("warmup-signal")) raise(SIGUSR2);
        if (is("mark") || is("warmup-sleep") || is("warmup-signal")) {
            heaphook_rt_enter();
            control_step(i);
            heaphook_rt_exit();
        } else if (strcmp(mode, "rtsan") == 0) {
            if (__rtsan_realtime_enter) __rtsan_realtime_enter();
            control_step(i);
            if (__rtsan_realtime_exit) __rtsan_realtime_exit();
        } else if (is("two-sites")) {
            control_step(i);
            control_log(i);
        } else {
            control_step(i);
        }
    }
    if (is("fifo") || is("two-sites") || is("attr") || is("by-main")) set_policy(SCHED_OTHER, 0);
    if (is("setattr")) setattr_policy(SCHED_OTHER, 0);
    if (strcmp(mode, "sched") == 0) {
        struct sched_param param = {.sched_priority = 0};
        sched_setscheduler(0, SCHED_OTHER, &param);
    }
    for (long i = 0; i < total; i++) free(blocks[i]);
    if (is("two-sites"))
        for (long i = 0; i < total; i++) free(log_blocks[i]);
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
        fprintf(
            stderr,
            "usage: rt_control_loop "
            "fifo|attr|sched|by-main|setattr|mark|rtsan|warmup-sleep|warmup-signal|two-sites|none "
            "N\n");
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
    if (is("by-main")) atomic_store(&go, 0);
    int rc = pthread_create(&control_thread, &attr, control, NULL);
    if (rc != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(rc));
        return 2;
    }
    if (is("by-main")) {
        struct sched_param param = {.sched_priority = 10};
        rc = pthread_setschedparam(control_thread, SCHED_FIFO, &param);
        if (rc != 0) {
            fprintf(stderr, "pthread_setschedparam: %s\n", strerror(rc));
            return 2;
        }
        atomic_store(&go, 1);
    }
    pthread_join(control_thread, NULL);
    pthread_join(worker_thread, NULL);
    printf("control loop: %ld steps\n", steps);
    return 0;
}
