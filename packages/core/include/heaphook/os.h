/*
 * heaphook/os.h — the one seam between heaphook and the operating system's memory calls.
 *
 * Backends get their memory here rather than calling mmap directly, so that every mapping
 * made for the heap goes through one place (ucm-hooks reports these as VM events; tests can
 * count them). All functions are async-signal-safe system-call wrappers: no allocation, no
 * locks. Failures return NULL / -1 with errno set by the system.
 */
#ifndef HEAPHOOK_OS_H
#define HEAPHOOK_OS_H

#include <stdbool.h>
#include <stddef.h>

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

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_OS_H */
