/*
 * ucm_dispatch_stress.c — the handler chain's readers and writers (native/ucm.c, "Readers and
 * writers") under their real concurrency, linked with ucm.c itself: firing threads map and
 * unmap through the hooks (heaphook_ucm_mmap / _munmap, and heaphook_ucm_vm_mmap) while writer
 * threads keep setting and unsetting handlers of both priorities. Built under ThreadSanitizer by
 * the sanitizer tier (test/sanitize): a reader still inside a handler or table after the grace
 * period, or a table rebuilt while a reader uses it, is a data race it reports.
 *
 * Each handler's argument is a slot the writer owns with plain (non-atomic) memory: it writes
 * `live` before setting the handler and overwrites the slot after unsetting it returns. A
 * handler reads the slot plainly and counts a violation when it is not live, so a call after
 * unset returned is caught even without the sanitizer; under TSan the same case is a race.
 * Handlers are registered with FLAG_NO_INSTALL: nothing is patched, the hooks are called by
 * their heaphook_ucm_* names.
 *
 * Prints "ucm_dispatch_stress: <calls> hook calls, <n> handler calls, <m> registrations" and
 * exits 0; on a violation prints "FAIL ..." on stderr and exits 1.
 *
 *   ucm_dispatch_stress [firing threads] [registrations per writer]   (defaults 3 and 300)
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "heaphook/ucm.h"

#define WRITERS 2
#define SLOTS 4 /* per writer: handlers set at once */
#define LIVE 0x4c495645u

struct slot {
    unsigned state; /* plain: LIVE while registered; the writer's alone otherwise */
};

static struct slot g_slots[WRITERS][SLOTS];
static _Atomic int g_stop;
static _Atomic unsigned long g_handler_calls, g_hook_calls, g_violations;

static void handler(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event, void *arg) {
    (void)type;
    (void)event;
    const struct slot *s = arg;
    if (s->state != LIVE) atomic_fetch_add(&g_violations, 1);
    atomic_fetch_add_explicit(&g_handler_calls, 1, memory_order_relaxed);
}

static void *firing(void *arg) {
    (void)arg;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        void *p = heaphook_ucm_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                    -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "FAIL ucm_dispatch_stress: mmap failed\n");
            exit(1);
        }
        heaphook_ucm_vm_mmap(p, 4096);
        heaphook_ucm_munmap(p, 4096);
        atomic_fetch_add_explicit(&g_hook_calls, 3, memory_order_relaxed);
    }
    return NULL;
}

static unsigned g_rounds;
static const int g_events = HEAPHOOK_UCM_EVENT_MMAP | HEAPHOOK_UCM_EVENT_MUNMAP |
                            HEAPHOOK_UCM_EVENT_VM_MAPPED | HEAPHOOK_UCM_EVENT_VM_UNMAPPED;

static void *writer(void *arg) {
    unsigned w = (unsigned)(uintptr_t)arg;
    for (unsigned round = 0; round < g_rounds; round++) {
        struct slot *s = &g_slots[w][round % SLOTS];
        if (s->state == LIVE) { /* set SLOTS rounds ago: unset it, then reuse its memory */
            heaphook_ucm_unset_event_handler(g_events, handler, s);
            s->state = 0; /* plain write: no handler may be reading it any more */
        }
        s->state = LIVE;
        int priority = (int)(round % 3) - 1; /* -1 (before the call), 0 and 1 (after) */
        if (heaphook_ucm_set_event_handler(g_events | HEAPHOOK_UCM_EVENT_FLAG_NO_INSTALL, priority,
                                           handler, s) != HEAPHOOK_UCM_OK) {
            fprintf(stderr, "FAIL ucm_dispatch_stress: set_event_handler failed\n");
            exit(1);
        }
        sched_yield();
    }
    for (unsigned i = 0; i < SLOTS; i++) {
        struct slot *s = &g_slots[w][i];
        if (s->state != LIVE) continue;
        heaphook_ucm_unset_event_handler(g_events, handler, s);
        s->state = 0;
    }
    return NULL;
}

int main(int argc, char **argv) {
    unsigned nfiring = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
    g_rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 300;
    if (nfiring == 0 || nfiring > 16) nfiring = 3;
    pthread_t fire[16], write[WRITERS];
    for (unsigned i = 0; i < nfiring; i++) pthread_create(&fire[i], NULL, firing, NULL);
    for (unsigned w = 0; w < WRITERS; w++) {
        pthread_create(&write[w], NULL, writer, (void *)(uintptr_t)w);
    }
    for (unsigned w = 0; w < WRITERS; w++) pthread_join(write[w], NULL);
    atomic_store(&g_stop, 1);
    for (unsigned i = 0; i < nfiring; i++) pthread_join(fire[i], NULL);
    /* Every handler is unset: one more round of calls must reach none. */
    unsigned long before = atomic_load(&g_handler_calls);
    void *p =
        heaphook_ucm_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    heaphook_ucm_munmap(p, 4096);
    if (atomic_load(&g_handler_calls) != before) {
        fprintf(stderr, "FAIL ucm_dispatch_stress: a handler ran after every one was unset\n");
        return 1;
    }
    if (atomic_load(&g_violations) != 0) {
        fprintf(stderr, "FAIL ucm_dispatch_stress: %lu handler calls after unset returned\n",
                atomic_load(&g_violations));
        return 1;
    }
    if (atomic_load(&g_handler_calls) == 0) {
        fprintf(stderr, "FAIL ucm_dispatch_stress: no handler ever ran\n");
        return 1;
    }
    printf("ucm_dispatch_stress: %lu hook calls, %lu handler calls, %u registrations\n",
           atomic_load(&g_hook_calls), atomic_load(&g_handler_calls), WRITERS * g_rounds);
    return 0;
}
