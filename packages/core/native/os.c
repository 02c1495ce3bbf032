/*
 * os.c — the one seam between heaphook and the system's memory calls (heaphook/os.h).
 *
 * These call the C library's mmap/munmap/madvise/mlock (not raw syscall()), on purpose: an
 * event hook that interposes mmap (ucm-hooks) then sees the heap's own mappings too.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
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

void *heaphook_os_map(size_t size) {
    if (size == 0) {
        errno = EINVAL;
        return NULL;
    }
    void *addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return addr == MAP_FAILED ? NULL : addr;
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
    char *raw = heaphook_os_map(size + slack);
    if (raw == NULL) return NULL;
    char *aligned = (char *)hh_align_up((uintptr_t)raw, alignment);
    size_t head = (size_t)(aligned - raw);
    size_t tail = slack - head;
    if (head > 0) munmap(raw, head);
    if (tail > 0) munmap(aligned + size, tail);
    return aligned;
}

int heaphook_os_unmap(void *addr, size_t size) {
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
    return madvise(addr, size, MADV_DONTNEED);
}
