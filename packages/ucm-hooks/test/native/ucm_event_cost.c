/*
 * ucm_event_cost.c — N mmap + munmap round trips through the hooks (called by their
 * heaphook_ucm_* names) with one counting handler of MMAP, MUNMAP, VM_MAPPED and VM_UNMAPPED,
 * for callgrind: the instructions of an event round trip are the difference between two values
 * of N, divided by their difference (README "Figures"). Exit status 0 when every event was seen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "heaphook/ucm.h"

#define EVENTS_PER_ROUND_TRIP 4 /* MMAP, VM_MAPPED, MUNMAP, VM_UNMAPPED */

static long seen;

static void count(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event, void *arg) {
    (void)type;
    (void)event;
    (void)arg;
    ++seen;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int events = HEAPHOOK_UCM_EVENT_MMAP | HEAPHOOK_UCM_EVENT_MUNMAP |
                 HEAPHOOK_UCM_EVENT_VM_MAPPED | HEAPHOOK_UCM_EVENT_VM_UNMAPPED;
    if (heaphook_ucm_set_event_handler(events, 0, count, NULL) != HEAPHOOK_UCM_OK) {
        fprintf(stderr, "ucm_event_cost: set_event_handler failed\n");
        return 2;
    }
    for (long i = 0; i < n; ++i) {
        void *p = heaphook_ucm_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                    -1, 0);
        if (p != MAP_FAILED) heaphook_ucm_munmap(p, 4096);
    }
    printf("%ld events\n", seen);
    return seen == EVENTS_PER_ROUND_TRIP * n ? 0 : 1;
}
