/*
 * unsafe_backend.c — a heaphook C backend that is NOT thread safe (size-class free lists, no
 * lock at all), built into a plug-in with SERIALIZE (libaix_unsafe.a): the adapter's subsystem
 * mutex must make it safe in a threaded process, as the AIX framework does for such plug-ins.
 *
 * It watches itself: a thread that enters while another is inside is an overlap (what the
 * mutex prevents); a thread that enters while it is inside itself is a re-entry (what a
 * recursive mutex lets through). Re-entries come from a user callback: every 16th allocation
 * of a thread (outside a re-entry) calls the program's exported
 * `void aix_test_user_callback(void)`, found with dlsym at init, which allocates. It also has a
 * trim (M_DISCLAIM) that counts its calls. At exit it appends one line to $UNSAFE_REPORT:
 *   unsafe pid=<pid> allocs=<n> frees=<n> overlaps=<n> reentries=<n> callbacks=<n> trims=<n>
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heaphook/backend.h"

#define CLASSES 13          /* 16 B ... 64 KiB blocks; larger requests are mapped */
#define HEAD 16             /* the block's class (or mapped size) in front of it */
#define RESERVE (1ul << 32) /* address space carved from, never given back */

typedef struct free_block {
    struct free_block *next;
} free_block;

static free_block *lists[CLASSES]; /* plain pointers: no lock, no atomics */
static unsigned char *cursor, *limit;
static unsigned long allocs, frees, trims; /* plain counters, kept under the adapter's mutex */

static _Atomic long owner; /* the thread inside, 0 when none */
static __thread int depth;
static _Atomic unsigned long overlaps, reentries, callbacks;
static void (*user_callback)(void);
static int report_fd = -1;

static void enter(void) {
    if (depth++ > 0) {
        atomic_fetch_add(&reentries, 1);
        return;
    }
    long self = (long)gettid();
    long before = atomic_exchange(&owner, self);
    if (before != 0) atomic_fetch_add(&overlaps, 1);
}

static void leave(void) {
    if (--depth > 0) return;
    long self = (long)gettid();
    if (!atomic_compare_exchange_strong(&owner, &self, 0)) atomic_fetch_add(&overlaps, 1);
}

static int class_of(size_t size) {
    int c = 0;
    while (((size_t)16 << c) < size) c++;
    return c;
}

static int unsafe_init(void) {
    void *m = mmap(NULL, RESERVE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return -1;
    cursor = m;
    limit = cursor + RESERVE;
    user_callback = (void (*)(void))dlsym(RTLD_DEFAULT, "aix_test_user_callback");
    const char *path = getenv("UNSAFE_REPORT");
    if (path != NULL) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) report_fd = fcntl(fd, F_DUPFD_CLOEXEC, 100), close(fd);
    }
    return 0;
}

static void *unsafe_alloc(size_t size, size_t align) {
    enter();
    size_t need = size + HEAD + (align > 16 ? align : 0);
    unsigned char *raw;
    if (need > ((size_t)16 << (CLASSES - 1))) {
        raw = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
            raw = NULL;
        else
            memcpy(raw, &(size_t){need | 1}, sizeof(size_t)); /* odd: mapped */
    } else {
        int c = class_of(need);
        free_block *b = lists[c];
        if (b != NULL) {
            lists[c] = b->next; /* a race here hands one block to two threads */
            raw = (unsigned char *)b;
        } else if (cursor + ((size_t)16 << c) <= limit) {
            raw = cursor;
            cursor += (size_t)16 << c;
        } else {
            raw = NULL;
        }
        if (raw != NULL) memcpy(raw, &(size_t){(size_t)c << 1}, sizeof(size_t));
    }
    void *user = NULL;
    if (raw != NULL) {
        uintptr_t at = (uintptr_t)raw + HEAD;
        if (align > 16) at = (at + align - 1) & ~(uintptr_t)(align - 1);
        memcpy((unsigned char *)at - sizeof(size_t), &(size_t){at - (uintptr_t)raw},
               sizeof(size_t));
        user = (void *)at;
        allocs++;
    }
    /* the user's callback, at a point where the lists are consistent: it allocates */
    static __thread unsigned n;
    if (user_callback != NULL && depth == 1 && ++n % 16 == 0) {
        atomic_fetch_add(&callbacks, 1);
        user_callback();
    }
    leave();
    return user;
}

static unsigned char *raw_of(void *ptr) {
    size_t back;
    memcpy(&back, (unsigned char *)ptr - sizeof(size_t), sizeof back);
    return (unsigned char *)ptr - back;
}

static void unsafe_dealloc(void *ptr) {
    enter();
    unsigned char *raw = raw_of(ptr);
    size_t tag;
    memcpy(&tag, raw, sizeof tag);
    if (tag & 1) {
        munmap(raw, tag & ~(size_t)1);
    } else {
        free_block *b = (free_block *)raw;
        b->next = lists[tag >> 1];
        lists[tag >> 1] = b;
    }
    frees++;
    leave();
}

static size_t unsafe_block_size(void *ptr) {
    unsigned char *raw = raw_of(ptr);
    size_t tag;
    memcpy(&tag, raw, sizeof tag);
    size_t total = tag & 1 ? tag & ~(size_t)1 : (size_t)16 << (tag >> 1);
    return total - (size_t)((unsigned char *)ptr - raw);
}

static int unsafe_trim(size_t pad) {
    (void)pad;
    enter();
    trims++;
    leave();
    return 0;
}

__attribute__((destructor)) static void unsafe_report(void) {
    if (report_fd < 0) return;
    char line[256];
    int len = snprintf(line, sizeof line,
                       "unsafe pid=%d allocs=%lu frees=%lu overlaps=%lu reentries=%lu "
                       "callbacks=%lu trims=%lu\n",
                       (int)getpid(), allocs, frees, atomic_load(&overlaps),
                       atomic_load(&reentries), atomic_load(&callbacks), trims);
    if (len > 0) (void)!write(report_fd, line, (size_t)len);
}

static const heaphook_backend table = {
    .name = "unsafe",
    .init = unsafe_init,
    .alloc = unsafe_alloc,
    .dealloc = unsafe_dealloc,
    .get_block_size = unsafe_block_size,
    .trim = unsafe_trim,
};

const heaphook_backend *heaphook_backend_get(void) {
    return &table;
}
