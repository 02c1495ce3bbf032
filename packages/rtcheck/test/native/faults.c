/*
 * faults.c — a real-time loop that takes K blocks of 64 KiB and writes all of each: on fresh
 * memory every page is a fault; from a prefaulted TLSF pool none is.
 *
 *   rt_faults K
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (64 * 1024)

int main(int argc, char **argv) {
    long k = argc > 1 ? atol(argv[1]) : 64;
    struct sched_param param = {.sched_priority = 10};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) != 0) return 2;
    long sum = 0;
    for (long i = 0; i < k; i++) {
        char *p = malloc(BLOCK);
        memset(p, (int)i, BLOCK);
        sum += p[BLOCK - 1];
    }
    param.sched_priority = 0;
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &param);
    printf("faults loop: %ld blocks (%ld)\n", k, sum);
    return 0;
}
