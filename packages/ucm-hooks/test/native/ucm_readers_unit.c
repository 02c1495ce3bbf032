/*
 * ucm_readers_unit.c — the handler chain's readers and writers on their own: native/rcu.c linked
 * alone (with the core's logger), its API called directly, no hook and nothing patched. Prints
 * "ok: ..." or "FAIL: ..." per property; exit status 0 when all hold.
 *
 * 1. set compiles the handlers into per-event lists in priority order, with the count of those
 *    before the call, and the fast-path masks;
 * 2. unset waits while a reader is inside a section, and returns once it leaves;
 * 3. a thread's first section claims a reader slot of its own;
 * 4. the 65th handler is refused (HEAPHOOK_UCM_ERR_NO_MEMORY) and the table stays whole;
 * 5. between the fork handlers a reader waits, and enters once the parent's handler ran; the
 *    forking thread itself dispatches nothing and never waits.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "rcu.h"

/* The library defines its channel in ucm.c, which this program does not link. */
heaphook_log_channel ucm_log_channel = {.name = "heaphook-ucm", .level = HEAPHOOK_LOG_WARN};

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

static void handler_a(heaphook_ucm_event_type_t t, heaphook_ucm_event_t *e, void *arg) {
    (void)t, (void)e, (void)arg;
}
static void handler_b(heaphook_ucm_event_type_t t, heaphook_ucm_event_t *e, void *arg) {
    (void)t, (void)e, (void)arg;
}
static void handler_c(heaphook_ucm_event_type_t t, heaphook_ucm_event_t *e, void *arg) {
    (void)t, (void)e, (void)arg;
}

static void check_lists(void) {
    const int mmap = HEAPHOOK_UCM_EVENT_MMAP, mapped = HEAPHOOK_UCM_EVENT_VM_MAPPED;
    ucm_handlers_add(mmap | mapped, 0, handler_b, NULL);
    ucm_handlers_add(mmap, -1, handler_a, NULL);
    ucm_handlers_add(mmap, 5, handler_c, NULL);
    struct ucm_thread *self = &ucm_self;
    const struct ucm_table *t = ucm_enter(self);
    const struct ucm_list *list = &t->lists[UCM_K_MMAP];
    int ok = list->count == 3 && list->before == 1 && list->entries[0].callback == handler_a &&
             list->entries[1].callback == handler_b && list->entries[2].callback == handler_c &&
             t->lists[UCM_K_VM_MAPPED].count == 1 &&
             t->lists[UCM_K_VM_MAPPED].entries[0].callback == handler_b &&
             t->lists[UCM_K_MUNMAP].count == 0;
    ucm_leave(self);
    report(ok, "set compiles per-event lists in priority order");
    report(atomic_load(&ucm_active_events) == (mmap | mapped) &&
               atomic_load(&ucm_before_events) == mmap &&
               atomic_load(&ucm_after_events) == (mmap | mapped),
           "set computes the masks of all, before and after handlers");
    report(ucm_self.reader != NULL && ucm_self.reader != &ucm_no_reader,
           "a thread's first section claims a reader slot of its own");
    ucm_handlers_remove(mmap | mapped, handler_a, NULL);
    ucm_handlers_remove(mmap | mapped, handler_b, NULL);
    ucm_handlers_remove(mmap | mapped, handler_c, NULL);
    report(ucm_handlers_count() == 0 && atomic_load(&ucm_active_events) == 0,
           "unset removes the handlers and their events");
}

/* 2: a reader inside a section while another thread unsets. */
static _Atomic int reader_inside, reader_release, unset_returned;
static void *reader_thread(void *arg) {
    (void)arg;
    struct ucm_thread *self = &ucm_self;
    (void)ucm_enter(self);
    atomic_store(&reader_inside, 1);
    while (!atomic_load(&reader_release)) sched_yield();
    ucm_leave(self);
    return NULL;
}
static void *unset_thread(void *arg) {
    (void)arg;
    ucm_handlers_remove(HEAPHOOK_UCM_EVENT_MMAP, handler_a, NULL);
    atomic_store(&unset_returned, 1);
    return NULL;
}
static void check_grace_period(void) {
    ucm_handlers_add(HEAPHOOK_UCM_EVENT_MMAP, 0, handler_a, NULL);
    pthread_t reader, writer;
    pthread_create(&reader, NULL, reader_thread, NULL);
    while (!atomic_load(&reader_inside)) sched_yield();
    pthread_create(&writer, NULL, unset_thread, NULL);
    pause_ms(200);
    int waited = !atomic_load(&unset_returned);
    atomic_store(&reader_release, 1);
    pthread_join(reader, NULL);
    pthread_join(writer, NULL);
    report(waited && atomic_load(&unset_returned),
           "unset waits for the reader inside a section, and returns once it leaves");
}

static void check_capacity(void) {
    int added = 0;
    while (ucm_handlers_add(HEAPHOOK_UCM_EVENT_MUNMAP, added, handler_a, (void *)(long)added) ==
           HEAPHOOK_UCM_OK) {
        ++added;
        if (added > UCM_MAX_HANDLERS) break;
    }
    struct ucm_thread *self = &ucm_self;
    const struct ucm_table *t = ucm_enter(self);
    int whole = t->lists[UCM_K_MUNMAP].count == UCM_MAX_HANDLERS;
    ucm_leave(self);
    report(added == UCM_MAX_HANDLERS && whole,
           "the handler after UCM_MAX_HANDLERS is refused, the table stays whole");
    for (int i = 0; i < added; ++i) {
        ucm_handlers_remove(HEAPHOOK_UCM_EVENT_MUNMAP, handler_a, (void *)(long)i);
    }
}

/* 5: a reader while the process forks. */
static _Atomic int fork_reader_started, fork_reader_entered;
static void *fork_reader(void *arg) {
    (void)arg;
    struct ucm_thread *self = &ucm_self;
    atomic_store(&fork_reader_started, 1);
    const struct ucm_table *t = ucm_enter(self);
    atomic_store(&fork_reader_entered, t != NULL ? 1 : -1);
    ucm_leave(self);
    return NULL;
}
static void check_fork(void) {
    ucm_handlers_add(HEAPHOOK_UCM_EVENT_MMAP, 0, handler_a, NULL);
    ucm_readers_prefork();
    struct ucm_thread *self = &ucm_self;
    const struct ucm_table *own = ucm_enter(self); /* the forking thread: an empty table */
    int own_empty = own != NULL && own->lists[UCM_K_MMAP].count == 0;
    ucm_leave(self);
    pthread_t reader;
    pthread_create(&reader, NULL, fork_reader, NULL);
    while (!atomic_load(&fork_reader_started)) sched_yield();
    pause_ms(100);
    int waited = atomic_load(&fork_reader_entered) == 0;
    ucm_readers_postfork_parent();
    pthread_join(reader, NULL);
    report(own_empty, "the forking thread dispatches nothing between the fork handlers");
    report(waited && atomic_load(&fork_reader_entered) == 1,
           "a reader waits during the fork and enters after the parent's handler");
    ucm_handlers_remove(HEAPHOOK_UCM_EVENT_MMAP, handler_a, NULL);
}

int main(void) {
    ucm_readers_init();
    check_lists();
    check_grace_period();
    check_capacity();
    check_fork();
    printf("ucm_readers_unit: %d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
