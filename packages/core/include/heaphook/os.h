/*
 * heaphook/os.h — the one seam between heaphook and the operating system's memory calls.
 *
 * Backends get their memory here rather than calling mmap directly, so that every mapping
 * made for the heap goes through one place (ucm-hooks reports these as VM events; tests can
 * count them). All functions are async-signal-safe system-call wrappers: no allocation, no
 * locks. Failures return NULL / -1 with errno set by the system.
 *
 * Two kinds of call, on purpose:
 * - observed (heaphook_os_map and the others above the "Unobserved" section): through the C
 *   library's mmap/munmap/madvise, so that an event hook interposing them (ucm-hooks) sees the
 *   heap's mappings like any other program's;
 * - unobserved (heaphook_os_unobserved_*): the system-call instruction itself, inline, for code
 *   that interposes those functions or syscall() and must not see its own calls (ucm-hooks' real
 *   calls, heaptrack's ring and tables, rtcheck's report): no symbol, no GOT, no PLT.
 */
#ifndef HEAPHOOK_OS_H
#define HEAPHOOK_OS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The system page size (cached after the first call). */
size_t heaphook_os_page_size(void);

/* Maps size bytes (a multiple of the page size) of private, anonymous, read-write memory,
 * aligned to at least the page size. Zero-filled. NULL on failure (errno ENOMEM). */
void *heaphook_os_map(size_t size);

/* Maps size bytes aligned to alignment (a power of two >= page size). NULL on failure. */
void *heaphook_os_map_aligned(size_t size, size_t alignment);

/* Unmaps memory obtained from heaphook_os_map*; returns 0 or -1. */
int heaphook_os_unmap(void *addr, size_t size);

/* Touches every page of [addr, addr + size) so it is backed now, not at first use. */
void heaphook_os_prefault(void *addr, size_t size);

/* mlock()s [addr, addr + size); returns 0 or -1 (errno from the system, often EPERM/ENOMEM
 * when RLIMIT_MEMLOCK is too small). */
int heaphook_os_lock(void *addr, size_t size);

/* Tells the system the pages of [addr, addr + size) may be dropped (MADV_DONTNEED); their
 * contents read back as zero. Returns 0 or -1, and keeps errno (a free may call it). */
int heaphook_os_discard(void *addr, size_t size);

/* A monotonic clock in nanoseconds, cheap and coarse (CLOCK_MONOTONIC_COARSE: read from the
 * vDSO with no system call, a few milliseconds of resolution): for rates and delays of the
 * heap's housekeeping, never for measuring. */
unsigned long long heaphook_os_coarse_ns(void);

/* ---- Unobserved system calls ------------------------------------------------------------------
 *
 * The kernel's answer as it comes: the result, or -errno on failure (heaphook_os_unobserved_failed
 * tells which). Inline, so a hook pays for the instruction and nothing else. x86-64 and aarch64
 * make the call themselves; elsewhere it goes through the C library's syscall(), which is then
 * observed by anything interposing that. */
static inline __attribute__((always_inline)) long heaphook_os_unobserved_syscall(long number,
                                                                                 long a, long b,
                                                                                 long c, long d,
                                                                                 long e, long f) {
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
#else
    long ret = syscall(number, a, b, c, d, e, f);
    return ret == -1 ? -errno : ret;
#endif
}

/* The same with any argument types, unused arguments 0:
 * HEAPHOOK_OS_UNOBSERVED(SYS_munmap, addr, size, 0, 0, 0, 0). */
#define HEAPHOOK_OS_UNOBSERVED(number, a, b, c, d, e, f)                                       \
    heaphook_os_unobserved_syscall((long)(number), (long)(a), (long)(b), (long)(c), (long)(d), \
                                   (long)(e), (long)(f))

/* Is ret (from the above) a failure, -4095..-1 as the kernel answers them? */
static inline __attribute__((always_inline)) bool heaphook_os_unobserved_failed(long ret) {
    return (unsigned long)ret > -4096ul;
}

/* A failed call's result as the C library returns it: errno set, -1 (MAP_FAILED as a pointer).
 * Out of line and cold, so the success path of a hook stays straight. */
static __attribute__((noinline, cold, unused)) long heaphook_os_unobserved_set_errno(long ret) {
    errno = (int)-ret;
    return -1;
}

/* The kernel's answer turned into the C library's: the result, or -1 with errno. */
static inline __attribute__((always_inline)) long heaphook_os_unobserved_libc(long ret) {
    return __builtin_expect(heaphook_os_unobserved_failed(ret), 0)
               ? heaphook_os_unobserved_set_errno(ret)
               : ret;
}

/* mmap and munmap, unobserved, with the C library's results (MAP_FAILED / -1 and errno). */
static inline __attribute__((always_inline)) void *heaphook_os_unobserved_mmap(
    void *addr, size_t size, int prot, int flags, int fd, off_t offset) {
    return (void *)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_mmap, addr, size, prot, flags, fd, offset));
}
static inline __attribute__((always_inline)) int heaphook_os_unobserved_munmap(void *addr,
                                                                               size_t size) {
    return (int)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_munmap, addr, size, 0, 0, 0, 0));
}

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_OS_H */
