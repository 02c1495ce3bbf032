/*
 * ucm_api_suite.c — the libucm-API event suite: what a libucm user checks first, written once
 * against libucm's API and built twice, against heaphook/ucm_compat.h (linked with
 * libheaphook_ucm.so) and, when libucx-dev is installed, against <ucm/api/ucm.h> (linked with
 * UCX's libucm), so that both are held to the same 14 checks. Prints "ok N - what" or
 * "not ok N - what: detail" per check, then "N of 14 checks passed"; exit status 0 when all
 * passed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#ifdef UCM_SUITE_LIBUCM
#include <ucm/api/ucm.h>
#else
#include "heaphook/ucm_compat.h"
#endif

#define CHECKS 14
#define MIB (1024ul * 1024ul)

static int number, passed;
static void check(int ok, const char *what, const char *detail) {
    ++number;
    if (ok) {
        ++passed;
        printf("ok %d - %s\n", number, what);
    } else {
        printf("not ok %d - %s: %s\n", number, what, detail);
    }
    fflush(stdout);
}

/* Events recorded by the handler (VM events and native mmap/munmap), this thread's and
 * others'. */
#define LOG_SIZE 8192
struct record {
    int type;
    void *address;
    size_t size;
    void *result; /* mmap's result as the handler saw it */
};
static struct record log_records[LOG_SIZE];
static int log_count;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void record(int type, void *address, size_t size, void *result) {
    pthread_mutex_lock(&log_lock);
    if (log_count < LOG_SIZE)
        log_records[log_count++] = (struct record){type, address, size, result};
    pthread_mutex_unlock(&log_lock);
}
static void clear(void) {
    pthread_mutex_lock(&log_lock);
    log_count = 0;
    pthread_mutex_unlock(&log_lock);
}
/* How many events of type cover address (with at least `size` bytes from it when size > 0). */
static int seen(int type, const void *address, size_t size) {
    int n = 0;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < log_count; ++i) {
        const struct record *r = &log_records[i];
        if (r->type != type) continue;
        uintptr_t a = (uintptr_t)address, start = (uintptr_t)r->address;
        if (a >= start && a < start + r->size && (size == 0 || start + r->size >= a + size)) ++n;
    }
    pthread_mutex_unlock(&log_lock);
    return n;
}

static void handler(ucm_event_type_t type, ucm_event_t *event, void *arg) {
    (void)arg;
    switch (type) {
        case UCM_EVENT_VM_MAPPED:
            record(type, event->vm_mapped.address, event->vm_mapped.size, NULL);
            break;
        case UCM_EVENT_VM_UNMAPPED:
            record(type, event->vm_unmapped.address, event->vm_unmapped.size, NULL);
            break;
        case UCM_EVENT_MMAP:
            record(type, event->mmap.result, event->mmap.size, event->mmap.result);
            break;
        case UCM_EVENT_MUNMAP:
            record(type, event->munmap.address, event->munmap.size, NULL);
            break;
        default:
            break;
    }
}

static const int all_events =
    UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED | UCM_EVENT_MMAP | UCM_EVENT_MUNMAP;

/* Priorities: -1 runs before the real call, 1 after it. */
static void *before_result, *after_result;
static int order[4], order_count;
static void before_handler(ucm_event_type_t type, ucm_event_t *event, void *arg) {
    (void)type;
    (void)arg;
    if (order_count < 4) order[order_count++] = -1;
    before_result = event->mmap.result;
}
static void after_handler(ucm_event_type_t type, ucm_event_t *event, void *arg) {
    (void)type;
    (void)arg;
    if (order_count < 4) order[order_count++] = 1;
    after_result = event->mmap.result;
}

static void *thread_mapping(void *arg) {
    void **out = arg;
    *out = mmap(NULL, 3 * 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(*out, 3 * 4096);
    return NULL;
}

int main(void) {
    char detail[256];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    /* 1 */
    ucs_status_t status = ucm_set_event_handler(all_events, 0, handler, NULL);
    snprintf(detail, sizeof detail, "status %d", (int)status);
    check(status == UCS_OK, "ucm_set_event_handler(VM_MAPPED|VM_UNMAPPED|MMAP|MUNMAP)", detail);

    /* 2 */
    clear();
    void *p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int m = seen(UCM_EVENT_MMAP, p, 4 * page), vm = seen(UCM_EVENT_VM_MAPPED, p, 4 * page);
    munmap(p, 4 * page);
    int u = seen(UCM_EVENT_MUNMAP, p, 4 * page), vu = seen(UCM_EVENT_VM_UNMAPPED, p, 4 * page);
    snprintf(detail, sizeof detail, "MMAP %d VM_MAPPED %d MUNMAP %d VM_UNMAPPED %d", m, vm, u, vu);
    check(m == 1 && vm == 1 && u == 1 && vu == 1,
          "mmap/munmap raise MMAP, VM_MAPPED, MUNMAP, VM_UNMAPPED once each", detail);

    /* 3 */
    p = mmap(NULL, 4 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    clear();
    void *q =
        mmap(p, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    vu = seen(UCM_EVENT_VM_UNMAPPED, p, 2 * page);
    vm = seen(UCM_EVENT_VM_MAPPED, p, 2 * page);
    munmap(p, 4 * page);
    snprintf(detail, sizeof detail, "result %p, VM_UNMAPPED %d VM_MAPPED %d", q, vu, vm);
    check(q == p && vu >= 1 && vm == 1, "MAP_FIXED over a mapping: VM_UNMAPPED then VM_MAPPED",
          detail);

    /* 4 */
    p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    clear();
    q = mremap(p, page, 64 * page, MREMAP_MAYMOVE);
    vu = seen(UCM_EVENT_VM_UNMAPPED, p, page);
    vm = seen(UCM_EVENT_VM_MAPPED, q, 64 * page);
    munmap(q, 64 * page);
    snprintf(detail, sizeof detail, "VM_UNMAPPED of the old %d, VM_MAPPED of the new %d", vu, vm);
    check(vu == 1 && vm == 1, "mremap raises VM_UNMAPPED (old) and VM_MAPPED (new)", detail);

    /* 5 */
    p = mmap(NULL, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    clear();
    madvise(p, 8 * page, MADV_DONTNEED);
    vu = seen(UCM_EVENT_VM_UNMAPPED, p, 8 * page);
    munmap(p, 8 * page);
    snprintf(detail, sizeof detail, "VM_UNMAPPED %d", vu);
    check(vu == 1, "madvise(MADV_DONTNEED) raises VM_UNMAPPED", detail);

    /* 6 */
    int shmid = shmget(IPC_PRIVATE, 5 * page, IPC_CREAT | 0600);
    clear();
    void *s = shmid >= 0 ? shmat(shmid, NULL, 0) : (void *)-1;
    vm = s != (void *)-1 ? seen(UCM_EVENT_VM_MAPPED, s, 5 * page) : 0;
    if (s != (void *)-1) shmdt(s);
    vu = s != (void *)-1 ? seen(UCM_EVENT_VM_UNMAPPED, s, 5 * page) : 0;
    if (shmid >= 0) shmctl(shmid, IPC_RMID, NULL);
    snprintf(detail, sizeof detail, "shmid %d, VM_MAPPED %d VM_UNMAPPED %d", shmid, vm, vu);
    check(vm == 1 && vu == 1, "shmat/shmdt raise VM_MAPPED/VM_UNMAPPED of the segment's size",
          detail);

    /* 7 */
    clear();
    void *top = sbrk(0);
    void *old = sbrk((intptr_t)(16 * page));
    vm = old != (void *)-1 ? seen(UCM_EVENT_VM_MAPPED, top, 16 * page) : 0;
    void *back = sbrk(-(intptr_t)(16 * page));
    vu = back != (void *)-1 ? seen(UCM_EVENT_VM_UNMAPPED, top, 16 * page) : 0;
    snprintf(detail, sizeof detail, "VM_MAPPED %d VM_UNMAPPED %d", vm, vu);
    check(vm == 1 && vu == 1, "sbrk up and down raises VM_MAPPED and VM_UNMAPPED", detail);

    /* 8 */
    int malloc_mapped = 0, malloc_unmapped = 0;
    for (int i = 0; i < 4; ++i) {
        clear();
        char *big = malloc(64 * MIB);
        big[0] = 1;
        malloc_mapped += seen(UCM_EVENT_VM_MAPPED, big, 64 * MIB) > 0;
        clear();
        free(big);
        malloc_unmapped += seen(UCM_EVENT_VM_UNMAPPED, big, 0) > 0;
    }
    snprintf(detail, sizeof detail, "VM_MAPPED for %d of 4, VM_UNMAPPED for %d of 4", malloc_mapped,
             malloc_unmapped);
    check(malloc_mapped == 4 && malloc_unmapped == 4,
          "64 MiB mallocs (mmap-served by glibc) raise VM events", detail);

    /* 9 */
    clear();
    char *grown = malloc(64 * MIB);
    grown[0] = 1;
    clear();
    char *bigger = realloc(grown, 128 * MIB);
    vm = seen(UCM_EVENT_VM_MAPPED, bigger, 128 * MIB);
    clear();
    free(bigger);
    vu = seen(UCM_EVENT_VM_UNMAPPED, bigger, 0);
    snprintf(detail, sizeof detail, "VM_MAPPED %d VM_UNMAPPED %d", vm, vu);
    check(vm >= 1 && vu >= 1, "realloc of a 64 MiB block to 128 MiB, then free, raise VM events",
          detail);

    /* 10 */
    ucm_set_event_handler(UCM_EVENT_MMAP, -1, before_handler, NULL);
    ucm_set_event_handler(UCM_EVENT_MMAP, 1, after_handler, NULL);
    before_result = after_result = NULL;
    order_count = 0;
    p = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, page);
    ucm_unset_event_handler(UCM_EVENT_MMAP, before_handler, NULL);
    ucm_unset_event_handler(UCM_EVENT_MMAP, after_handler, NULL);
    snprintf(detail, sizeof detail, "order %d,%d (of %d); before saw %p, after saw %p (mmap %p)",
             order[0], order[1], order_count, before_result, after_result, p);
    check(order_count == 2 && order[0] == -1 && order[1] == 1 && before_result == MAP_FAILED &&
              after_result == p,
          "priority -1 runs before the call, priority 1 after it and sees the result", detail);

    /* 11 */
    void *from_thread = NULL;
    pthread_t thread;
    clear();
    pthread_create(&thread, NULL, thread_mapping, &from_thread);
    pthread_join(thread, NULL);
    vm = seen(UCM_EVENT_VM_MAPPED, from_thread, 3 * page);
    vu = seen(UCM_EVENT_VM_UNMAPPED, from_thread, 3 * page);
    snprintf(detail, sizeof detail, "VM_MAPPED %d VM_UNMAPPED %d", vm, vu);
    check(vm == 1 && vu == 1, "another thread's mappings raise events", detail);

    /* 12 */
    clear();
    int exact = 1;
    for (int i = 0; i < 1000; ++i) {
        p = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(p, page);
    }
    int counts[4] = {0, 0, 0, 0};
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < log_count; ++i) {
        if (log_records[i].size != page) continue; /* the loop's own events */
        counts[log_records[i].type == UCM_EVENT_MMAP        ? 0
               : log_records[i].type == UCM_EVENT_MUNMAP    ? 1
               : log_records[i].type == UCM_EVENT_VM_MAPPED ? 2
                                                            : 3]++;
    }
    pthread_mutex_unlock(&log_lock);
    for (int i = 0; i < 4; ++i) exact &= counts[i] == 1000;
    snprintf(detail, sizeof detail, "MMAP %d MUNMAP %d VM_MAPPED %d VM_UNMAPPED %d", counts[0],
             counts[1], counts[2], counts[3]);
    check(exact, "1000 mmap/munmap pairs: exactly 1000 events of each kind", detail);

    /* 13 */
    status = ucm_test_events(all_events);
    snprintf(detail, sizeof detail, "status %d", (int)status);
    check(status == UCS_OK, "ucm_test_events(VM_MAPPED|VM_UNMAPPED|MMAP|MUNMAP) passes", detail);

    /* 14 */
    ucm_unset_event_handler(all_events, handler, NULL);
    clear();
    p = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, page);
    char *later = malloc(64 * MIB);
    free(later);
    snprintf(detail, sizeof detail, "%d events after unset", log_count);
    check(log_count == 0, "after ucm_unset_event_handler no event reaches the handler", detail);

    printf("%d of %d checks passed\n", passed, CHECKS);
    return passed == CHECKS && number == CHECKS ? 0 : 1;
}
