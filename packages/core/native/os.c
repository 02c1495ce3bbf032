/*
 * os.c — the one seam between heaphook and the system's memory calls (heaphook/os.h).
 *
 * These call the C library's mmap/munmap/madvise/mlock (not raw syscall()), on purpose: an
 * event hook that interposes mmap (ucm-hooks) then sees the heap's own mappings too.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "heaphook/os.h"
#include "internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL and we touch pages */
#endif

/* Used until sysconf answers; every Linux target has at least this page size. */
#define HH_FALLBACK_PAGE_SIZE 4096

static _Atomic size_t hh_page_size_cache = 0;

size_t heaphook_os_page_size(void) {
    size_t page = atomic_load_explicit(&hh_page_size_cache, memory_order_relaxed);
    if (HH_LIKELY(page != 0)) return page;
    long answer = sysconf(_SC_PAGESIZE);
    page = answer > 0 ? (size_t)answer : HH_FALLBACK_PAGE_SIZE;
    atomic_store_explicit(&hh_page_size_cache, page, memory_order_relaxed);
    return page;
}

/* ---- The ranges mapped here (ownership for heaphook_attach) ---------------------------------
 * Every mapping made through this seam is recorded, so that a library installed into a running
 * process (attach.c) can tell its blocks from those of the allocator that was there before. A
 * fixed table of slots, lock-free: a slot is claimed by a CAS on its start; lookups scan the
 * slots below the high-water mark. */
#define HH_OS_RANGES 16384
static HEAPHOOK_LARGE_STORAGE struct { _Atomic uintptr_t start, end; } hh_os_ranges[HH_OS_RANGES];
static _Atomic size_t hh_os_range_high;

static void hh_os_record(void *addr, size_t size) {
    uintptr_t start = (uintptr_t)addr;
    for (size_t i = 0; i < HH_OS_RANGES; ++i) {
        uintptr_t expected = 0;
        if (atomic_load_explicit(&hh_os_ranges[i].start, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&hh_os_ranges[i].start, &expected, start)) {
            atomic_store(&hh_os_ranges[i].end, start + size);
            size_t high = atomic_load(&hh_os_range_high);
            while (high < i + 1 && !atomic_compare_exchange_weak(&hh_os_range_high, &high, i + 1)) {
            }
            return;
        }
    }
    /* Table full: the range stays unrecorded (attach then treats its blocks as foreign). */
}

/* Forgets [addr, addr + size): whole ranges are dropped, a head or tail is trimmed. */
static void hh_os_forget(void *addr, size_t size) {
    uintptr_t start = (uintptr_t)addr, end = start + size;
    size_t high = atomic_load(&hh_os_range_high);
    for (size_t i = 0; i < high; ++i) {
        uintptr_t s = atomic_load(&hh_os_ranges[i].start), e = atomic_load(&hh_os_ranges[i].end);
        if (s == 0 || e <= start || s >= end) continue;
        if (start <= s && end >= e) {
            atomic_store(&hh_os_ranges[i].end, 0);
            atomic_store(&hh_os_ranges[i].start, 0);
        } else if (start <= s) {
            atomic_store(&hh_os_ranges[i].start, end);
        } else if (end >= e) {
            atomic_store(&hh_os_ranges[i].end, start);
        } else {
            atomic_store(&hh_os_ranges[i].end, start); /* a hole: keep the head, record the tail */
            hh_os_record((void *)end, e - end);
        }
    }
}

bool hh_os_owns(const void *ptr) {
    uintptr_t p = (uintptr_t)ptr;
    size_t high = atomic_load_explicit(&hh_os_range_high, memory_order_acquire);
    for (size_t i = 0; i < high; ++i) {
        uintptr_t s = atomic_load_explicit(&hh_os_ranges[i].start, memory_order_relaxed);
        if (s != 0 && p >= s &&
            p < atomic_load_explicit(&hh_os_ranges[i].end, memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

static void *hh_os_map_raw(size_t size) {
    if (size == 0) {
        errno = EINVAL;
        return NULL;
    }
    void *addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return addr == MAP_FAILED ? NULL : addr;
}

void *heaphook_os_map(size_t size) {
    void *addr = hh_os_map_raw(size);
    if (addr != NULL) hh_os_record(addr, size);
    return addr;
}

void *heaphook_os_map_aligned(size_t size, size_t alignment) {
    size_t page = heaphook_os_page_size();
    hh_assert(hh_is_power_of_two(alignment));
    if (alignment <= page) return heaphook_os_map(size);
    /* Map alignment - page bytes more than asked, then give back the unaligned head and the
     * unused tail: the kernel has no "aligned mmap". */
    size_t slack = alignment - page;
    if (size == 0 || size > SIZE_MAX - slack) {
        errno = ENOMEM;
        return NULL;
    }
    char *raw = hh_os_map_raw(size + slack);
    if (raw == NULL) return NULL;
    char *aligned = (char *)hh_align_up((uintptr_t)raw, alignment);
    size_t head = (size_t)(aligned - raw);
    size_t tail = slack - head;
    if (head > 0) munmap(raw, head);
    if (tail > 0) munmap(aligned + size, tail);
    hh_os_record(aligned, size);
    return aligned;
}

int heaphook_os_unmap(void *addr, size_t size) {
    hh_os_forget(addr, size);
    return munmap(addr, size);
}

void heaphook_os_prefault(void *addr, size_t size) {
    if (size == 0) return;
    int saved_errno = errno;
    if (madvise(addr, size, MADV_POPULATE_WRITE) == 0) return;
    errno = saved_errno;
    /* Older kernel: write to one byte of every page (reading it first keeps the contents). */
    size_t page = heaphook_os_page_size();
    volatile char *bytes = (volatile char *)addr;
    for (size_t offset = 0; offset < size; offset += page) bytes[offset] = bytes[offset];
}

int heaphook_os_lock(void *addr, size_t size) {
    return mlock(addr, size);
}

int heaphook_os_discard(void *addr, size_t size) {
    const int saved_errno = errno;
    const int result = madvise(addr, size, MADV_DONTNEED);
    errno = saved_errno;
    return result;
}

unsigned long long heaphook_os_coarse_ns(void) {
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &now) != 0) return 0;
    return (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec;
}
