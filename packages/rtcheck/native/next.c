/*
 * next.c — resolving the functions under us (next.h) and the bootstrap arena.
 *
 * dlsym may allocate (its error buffer), and the dynamic loader may call malloc before our
 * constructor: until the table is resolved, the malloc family is served from the core's
 * bootstrap arena, whose blocks are recognised by address and never passed on. The family
 * itself is looked up by the core too (heaphook_next_resolve); the other calls under us here.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "next.h"
#include "sys.h"

/* ---- The bootstrap arena: the core's (heaphook/bootstrap.h) ---------------------------- */

#define hh_arena_alloc heaphook_bootstrap_alloc

/* ---- Resolution ------------------------------------------------------------------------- */

static _Atomic int hh_next_state; /* 0 unresolved, 1 resolving, 2 resolved */
static HH_TLS bool t_resolving;   /* this thread is inside dlsym: serve it from the arena */

static void *hh_sym(const char *name) {
    return dlsym(RTLD_NEXT, name);
}

/* True when hh_next may be used; false when the caller must use the arena. */
static bool hh_next_ready(void) {
    if (atomic_load_explicit(&hh_next_state, memory_order_acquire) == 2) return true;
    if (t_resolving) return false;
    hh_rt_next_resolve();
    return atomic_load_explicit(&hh_next_state, memory_order_acquire) == 2;
}

static void *hh_boot_malloc(size_t size) {
    return hh_next_ready() ? hh_next.alloc.malloc(size) : hh_arena_alloc(size, 1);
}
static void hh_boot_free(void *ptr) {
    if (heaphook_bootstrap_owns(ptr) || ptr == NULL) return;
    if (hh_next_ready()) hh_next.alloc.free(ptr);
}
static void *hh_boot_calloc(size_t n, size_t size) {
    if (hh_next_ready()) return hh_next.alloc.calloc(n, size);
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return hh_arena_alloc(total, 1);
}
static void *hh_boot_realloc(void *ptr, size_t size) {
    if (hh_next_ready()) return hh_next.alloc.realloc(ptr, size);
    void *moved = hh_arena_alloc(size, 1);
    if (moved != NULL && ptr != NULL) {
        size_t old = heaphook_bootstrap_block_size(ptr);
        memcpy(moved, ptr, old < size ? old : size);
    }
    return moved;
}
static void *hh_boot_reallocarray(void *ptr, size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return hh_boot_realloc(ptr, total);
}
static int hh_boot_posix_memalign(void **out, size_t align, size_t size) {
    if (hh_next_ready()) return hh_next.alloc.posix_memalign(out, align, size);
    void *p = hh_arena_alloc(size, align);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
}
static void *hh_boot_memalign(size_t align, size_t size) {
    return hh_next_ready() ? hh_next.alloc.memalign(align, size) : hh_arena_alloc(size, align);
}
static void *hh_boot_aligned_alloc(size_t align, size_t size) {
    return hh_next_ready() ? hh_next.alloc.aligned_alloc(align, size) : hh_arena_alloc(size, align);
}
static void *hh_boot_valloc(size_t size) {
    return hh_next_ready() ? hh_next.alloc.valloc(size) : hh_arena_alloc(size, 4096);
}
static void *hh_boot_pvalloc(size_t size) {
    return hh_next_ready() ? hh_next.alloc.pvalloc(size)
                           : hh_arena_alloc((size + 4095) & ~4095ul, 4096);
}

static size_t hh_boot_usable_size(void *ptr) {
    if (heaphook_bootstrap_owns(ptr)) return heaphook_bootstrap_block_size(ptr);
    if (ptr == NULL || !hh_next_ready() || hh_next.alloc.malloc_usable_size == NULL) return 0;
    return hh_next.alloc.malloc_usable_size(ptr);
}

hh_rt_next hh_next = {
    .alloc =
        {
            .malloc = hh_boot_malloc,
            .free = hh_boot_free,
            .calloc = hh_boot_calloc,
            .realloc = hh_boot_realloc,
            .reallocarray = hh_boot_reallocarray,
            .posix_memalign = hh_boot_posix_memalign,
            .memalign = hh_boot_memalign,
            .aligned_alloc = hh_boot_aligned_alloc,
            .valloc = hh_boot_valloc,
            .pvalloc = hh_boot_pvalloc,
            .malloc_usable_size = hh_boot_usable_size,
        },
};

/* Stores one pointer of hh_next: a hook that reads it sees NULL or the function, never half. */
#define HH_SET(field, name) \
    __atomic_store_n(&hh_next.field, (__typeof__(hh_next.field))hh_sym(name), __ATOMIC_RELEASE)

/*
 * The order matters. dlsym allocates only to report a symbol it did not find, and that
 * allocation may reach another preloaded library (heaptrack before us), which may call one of
 * our hooks (its syscall(), mmap) while this thread is still resolving: so every function a
 * libc always has is stored first, each as it is found; the malloc family becomes usable next;
 * the symbols a libc may lack (sched_setattr before glibc 2.41) come last.
 */
void hh_rt_next_resolve(void) {
    if (t_resolving) return; /* called from inside our own dlsym: use what is set so far */
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hh_next_state, &expected, 1)) {
        /* another thread resolves: wait for it (it never waits for us) */
        while (atomic_load_explicit(&hh_next_state, memory_order_acquire) != 2) sched_yield();
        return;
    }
    t_resolving = true;
    HH_SET(syscall, "syscall");
    HH_SET(mmap, "mmap");
    HH_SET(munmap, "munmap");
    HH_SET(mremap, "mremap");
    HH_SET(madvise, "madvise");
    HH_SET(brk, "brk");
    HH_SET(sbrk, "sbrk");
    HH_SET(mutex_lock, "pthread_mutex_lock");
    /* the default versions: dlsym without one may give the pre-2.3.2 condition variables */
    __atomic_store_n(
        &hh_next.cond_wait,
        (__typeof__(hh_next.cond_wait))dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2"),
        __ATOMIC_RELEASE);
    if (hh_next.cond_wait == NULL) HH_SET(cond_wait, "pthread_cond_wait");
    __atomic_store_n(&hh_next.cond_timedwait,
                     (__typeof__(hh_next.cond_timedwait))dlvsym(RTLD_NEXT, "pthread_cond_timedwait",
                                                                "GLIBC_2.3.2"),
                     __ATOMIC_RELEASE);
    if (hh_next.cond_timedwait == NULL) HH_SET(cond_timedwait, "pthread_cond_timedwait");
    HH_SET(sem_wait, "sem_wait");
    HH_SET(sem_timedwait, "sem_timedwait");
    HH_SET(nanosleep, "nanosleep");
    HH_SET(clock_nanosleep, "clock_nanosleep");
    HH_SET(usleep, "usleep");
    HH_SET(sleep, "sleep");
    HH_SET(open, "open");
    HH_SET(openat, "openat");
    HH_SET(read, "read");
    HH_SET(write, "write");
    HH_SET(fopen, "fopen");
    HH_SET(fclose, "fclose");
    HH_SET(vfprintf, "vfprintf");
    HH_SET(puts, "puts");
    HH_SET(fputs, "fputs");
    HH_SET(fwrite, "fwrite");
    HH_SET(send, "send");
    HH_SET(sendto, "sendto");
    HH_SET(recv, "recv");
    HH_SET(recvfrom, "recvfrom");
    HH_SET(pthread_create, "pthread_create");
    HH_SET(pthread_join, "pthread_join");
    HH_SET(fork, "fork");
    HH_SET(sched_setscheduler, "sched_setscheduler");
    HH_SET(pthread_setschedparam, "pthread_setschedparam");
    HH_SET(pthread_setschedprio, "pthread_setschedprio");

    heaphook_next_resolve("rtcheck");
    const heaphook_next_allocator next = heaphook_next;
    /* Every hook of the family calls its function under it unconditionally, so all ten are
     * required (malloc_usable_size's hook tests it). */
    if (next.malloc == NULL || next.free == NULL || next.calloc == NULL || next.realloc == NULL ||
        next.reallocarray == NULL || next.posix_memalign == NULL || next.memalign == NULL ||
        next.aligned_alloc == NULL || next.valloc == NULL || next.pvalloc == NULL) {
        static const char msg[] =
            "heaphook rtcheck: no allocator after libheaphook_rtcheck.so in the lookup order "
            "(dlsym(RTLD_NEXT, \"malloc\") failed); preload it before the backend\n";
        hh_rt_write_all(2, msg, sizeof msg - 1);
        HEAPHOOK_OS_UNOBSERVED(SYS_exit_group, 127, 0, 0, 0, 0, 0);
    }
    hh_next.alloc = next;
    atomic_store_explicit(&hh_next_state, 2, memory_order_release);

    HH_SET(sched_setattr, "sched_setattr"); /* glibc 2.41+; NULL before */
    t_resolving = false;
}

void *hh_rt_next_cxx(const char *mangled_name, void **cache) {
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (HH_LIKELY(fn != NULL)) return fn;
    fn = hh_sym(mangled_name);
    __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    return fn;
}

void hh_rt_write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        long n = HEAPHOOK_OS_UNOBSERVED(SYS_write, fd, buf, len, 0, 0, 0);
        if (n < 0) {
            if (n == -EINTR) continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}
