/*
 * bump_plugin.c — a deliberately simple AIX malloc plug-in that is not a heaphook backend:
 * a bump allocator that never reuses memory, with counters of every entry point. It shows the
 * emulation works for plug-ins written against the AIX ABI alone.
 *
 * Blocks come from 64 MiB mappings carved by a bump pointer under one spin lock (taken by
 * __malloc_prefork_lock__, released by __malloc_postfork_unlock__); a 16-byte header holds the
 * size for realloc. Blocks larger than 1 MiB get a mapping of their own. free only counts.
 * BUMP_REPORT=<file>: one line of counters appended at exit (the file is opened by
 * __malloc_start__, or by the first call when start is not called).
 * Built three ways: complete; BUMP_NO_MEMALIGN (no __posix_memalign__); BUMP_NO_MALLOPT (a
 * required entry point missing, which the loader must refuse).
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define CHUNK (64u << 20)
#define LARGE (1u << 20)
#define HEADER 16

static atomic_flag lock = ATOMIC_FLAG_INIT;
static unsigned char *cursor, *limit;
static size_t bytes_mapped, bytes_used;
static int report_fd = -1;
static _Atomic unsigned long n_start, n_init, n_malloc, n_free, n_realloc, n_calloc, n_memalign,
    n_mallinfo, n_mallopt, n_prefork, n_postfork, n_before_init;
static _Atomic int initialised;

static void take(void) {
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) sched_yield();
}
static void give(void) {
    atomic_flag_clear_explicit(&lock, memory_order_release);
}

static void count(_Atomic unsigned long *n) {
    atomic_fetch_add_explicit(n, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&initialised, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&n_before_init, 1, memory_order_relaxed);
    }
}

static void open_report(void) {
    if (report_fd >= 0) return;
    const char *path = getenv("BUMP_REPORT"); /* getenv does not allocate */
    if (path == NULL) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) report_fd = fcntl(fd, F_DUPFD_CLOEXEC, 100), close(fd);
}

/* Returns a block of at least size bytes aligned to align (>= 16), or NULL. */
static void *bump(size_t size, size_t align) {
    if (size > ((size_t)1 << 46)) return NULL;
    size_t need = size + HEADER + align;
    if (need > LARGE) {
        unsigned char *m =
            mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
        take();
        bytes_mapped += need;
        bytes_used += need;
        give();
        unsigned char *user =
            (unsigned char *)(((uintptr_t)m + HEADER + align - 1) & ~(uintptr_t)(align - 1));
        memcpy(user - HEADER, &size, sizeof size);
        return user;
    }
    take();
    uintptr_t user = ((uintptr_t)cursor + HEADER + align - 1) & ~(uintptr_t)(align - 1);
    if (cursor == NULL || user + size > (uintptr_t)limit) {
        unsigned char *m =
            mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            give();
            return NULL;
        }
        cursor = m;
        limit = m + CHUNK;
        bytes_mapped += CHUNK;
        user = ((uintptr_t)cursor + HEADER + align - 1) & ~(uintptr_t)(align - 1);
    }
    bytes_used += user + size - (uintptr_t)cursor;
    cursor = (unsigned char *)((user + size + 15) & ~(uintptr_t)15);
    give();
    memcpy((unsigned char *)user - HEADER, &size, sizeof size);
    return (void *)user;
}

static size_t size_of(void *ptr) {
    size_t size;
    memcpy(&size, (unsigned char *)ptr - HEADER, sizeof size);
    return size;
}

EXPORT void __malloc_start__(void) {
    count(&n_start);
    open_report();
}

EXPORT void *__malloc__(size_t size) {
    count(&n_malloc);
    void *p = bump(size ? size : 1, 16);
    if (p == NULL) errno = ENOMEM;
    return p;
}

EXPORT void __free__(void *ptr) {
    count(&n_free);
    (void)ptr; /* never reused */
}

EXPORT void *__realloc__(void *ptr, size_t size) {
    count(&n_realloc);
    if (ptr == NULL) return __malloc__(size);
    void *p = bump(size ? size : 1, 16);
    if (p == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    size_t old = size_of(ptr);
    memcpy(p, ptr, old < size ? old : size);
    return p;
}

EXPORT void *__calloc__(size_t count_, size_t size) {
    count(&n_calloc);
    size_t total;
    if (__builtin_mul_overflow(count_, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = bump(total ? total : 1, 16); /* fresh mappings are zero and never reused */
    if (p == NULL) errno = ENOMEM;
    return p;
}

#ifndef BUMP_NO_MEMALIGN
EXPORT int __posix_memalign__(void **result, size_t align, size_t size) {
    count(&n_memalign);
    if (align < 16) align = 16;
    if (align > ((size_t)1 << 40)) return ENOMEM;
    void *p = bump(size ? size : 1, align);
    if (p == NULL) return ENOMEM;
    *result = p;
    return 0;
}
#endif

EXPORT struct mallinfo __mallinfo__(void) {
    count(&n_mallinfo);
    struct mallinfo info;
    memset(&info, 0, sizeof info);
    take();
    info.arena = bytes_mapped > INT32_MAX ? INT32_MAX : (int)bytes_mapped;
    info.uordblks = bytes_used > INT32_MAX ? INT32_MAX : (int)bytes_used;
    give();
    return info;
}

#ifndef BUMP_NO_MALLOPT
EXPORT int __mallopt__(int command, int value) {
    count(&n_mallopt);
    (void)command;
    (void)value;
    return 0;
}
#endif

EXPORT void __malloc_init__(void) {
    count(&n_init);
    atomic_store(&initialised, 1);
}

EXPORT void __malloc_prefork_lock__(void) {
    count(&n_prefork);
    take();
}

EXPORT void __malloc_postfork_unlock__(void) {
    count(&n_postfork);
    give();
}

__attribute__((destructor)) static void bump_report(void) {
    if (report_fd < 0) return;
    char line[512];
    int len =
        snprintf(line, sizeof line,
                 "bump pid=%d start=%lu init=%lu malloc=%lu free=%lu realloc=%lu calloc=%lu "
                 "memalign=%lu mallinfo=%lu mallopt=%lu prefork=%lu postfork=%lu "
                 "before_init=%lu mapped=%zu\n",
                 (int)getpid(), n_start, n_init, n_malloc, n_free, n_realloc, n_calloc, n_memalign,
                 n_mallinfo, n_mallopt, n_prefork, n_postfork, n_before_init, bytes_mapped);
    if (len > 0) (void)!write(report_fd, line, (size_t)len);
}
