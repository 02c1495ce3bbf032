/*
 * ucm_rcu_unit.c — the grace periods of the handler chain (native/ucm.c "Readers and writers",
 * docs/readers-and-writers.md), one property at a time, linked with ucm.c itself (built with
 * HEAPHOOK_UCM_NO_LIBC_NAMES: the hooks are called by their heaphook_ucm_* names, handlers
 * registered with FLAG_NO_INSTALL, nothing patched). Prints "ok: ..." or "FAIL: ..." per
 * property; exit status 0 when all hold.
 *
 * 1. unset does not return while a reader is inside the handler it removes (grace period);
 * 2. once unset has returned, the removed handler is never called again;
 * 3. set does not return while a reader is inside a handler of the old table either (the
 *    table it rebuilds next is the one that reader may still be using);
 * 4. a thread that exits inside a handler (pthread_exit) does not hold writers up forever: its
 *    slot is released by the key destructor;
 * 5. readers that run no handler (no event of theirs registered) never enter a section, so a
 *    writer never waits for them.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "heaphook/ucm.h"

static int failures;
static void report(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    fflush(stdout);
    if (!ok) ++failures;
}

static void pause_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static const int flags = HEAPHOOK_UCM_EVENT_FLAG_NO_INSTALL;

/* A handler that stays inside until released. */
static _Atomic int inside, release, calls_after_unset, unset_done, exit_inside;
static void blocking_handler(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event,
                             void *arg) {
    (void)type;
    (void)event;
    (void)arg;
    if (atomic_load(&unset_done)) atomic_fetch_add(&calls_after_unset, 1);
    if (atomic_load(&release)) return;
    atomic_store(&inside, 1);
    if (atomic_load(&exit_inside)) pthread_exit(NULL);
    while (!atomic_load(&release)) sched_yield();
}
static void other_handler(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event, void *arg) {
    (void)type;
    (void)event;
    (void)arg;
}

static void *map_once(void *arg) {
    (void)arg;
    void *p = heaphook_ucm_mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    heaphook_ucm_munmap(p, 4096);
    return NULL;
}

static _Atomic int writer_returned;
static void *unset_blocking(void *arg) {
    (void)arg;
    heaphook_ucm_unset_event_handler(HEAPHOOK_UCM_EVENT_VM_MAPPED, blocking_handler, NULL);
    atomic_store(&unset_done, 1);
    atomic_store(&writer_returned, 1);
    return NULL;
}
static void *set_other(void *arg) {
    (void)arg;
    heaphook_ucm_set_event_handler(HEAPHOOK_UCM_EVENT_MUNMAP | flags, 0, other_handler, NULL);
    atomic_store(&writer_returned, 1);
    return NULL;
}

/* Runs a writer while a reader is inside blocking_handler; true when the writer waited for the
 * reader (did not return before the release) and returned after it. */
static int writer_waits(void *(*writer)(void *)) {
    atomic_store(&inside, 0);
    atomic_store(&release, 0);
    atomic_store(&writer_returned, 0);
    pthread_t reader, w;
    pthread_create(&reader, NULL, map_once, NULL);
    while (!atomic_load(&inside)) sched_yield();
    pthread_create(&w, NULL, writer, NULL);
    pause_ms(100); /* room for a writer that does not wait to return */
    int early = atomic_load(&writer_returned);
    atomic_store(&release, 1);
    pthread_join(reader, NULL);
    pthread_join(w, NULL);
    return !early && atomic_load(&writer_returned);
}

int main(void) {
    /* 1 and 2 */
    heaphook_ucm_set_event_handler(HEAPHOOK_UCM_EVENT_VM_MAPPED | flags, 0, blocking_handler, NULL);
    report(writer_waits(unset_blocking),
           "unset waits until the reader inside the removed handler leaves it");
    for (int i = 0; i < 100; ++i) map_once(NULL);
    report(atomic_load(&calls_after_unset) == 0,
           "the removed handler is never called after unset returned");

    /* 3 */
    atomic_store(&unset_done, 0);
    heaphook_ucm_set_event_handler(HEAPHOOK_UCM_EVENT_VM_MAPPED | flags, 0, blocking_handler, NULL);
    report(writer_waits(set_other), "set waits for a reader inside a handler of the old table");
    heaphook_ucm_unset_event_handler(HEAPHOOK_UCM_EVENT_MUNMAP, other_handler, NULL);
    heaphook_ucm_unset_event_handler(HEAPHOOK_UCM_EVENT_VM_MAPPED, blocking_handler, NULL);

    /* 4 */
    atomic_store(&inside, 0);
    atomic_store(&release, 0);
    atomic_store(&exit_inside, 1);
    heaphook_ucm_set_event_handler(HEAPHOOK_UCM_EVENT_VM_MAPPED | flags, 0, blocking_handler, NULL);
    pthread_t dying;
    pthread_create(&dying, NULL, map_once, NULL);
    pthread_join(dying, NULL);
    heaphook_ucm_unset_event_handler(HEAPHOOK_UCM_EVENT_VM_MAPPED, blocking_handler, NULL);
    report(atomic_load(&inside) == 1,
           "a thread that exited inside a handler does not hold the writer up");
    atomic_store(&exit_inside, 0);

    /* 5 */
    atomic_store(&inside, 0);
    atomic_store(&release, 0);
    heaphook_ucm_set_event_handler(HEAPHOOK_UCM_EVENT_SHMAT | flags, 0, blocking_handler, NULL);
    pthread_t mapper;
    pthread_create(&mapper, NULL, map_once, NULL); /* mmap: no handler of its events */
    pthread_join(mapper, NULL);
    heaphook_ucm_unset_event_handler(HEAPHOOK_UCM_EVENT_SHMAT, blocking_handler, NULL);
    report(atomic_load(&inside) == 0, "calls without a handler of their events never enter");

    printf("ucm_rcu_unit: %d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
