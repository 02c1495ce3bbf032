/*
 * ring.c — the shared-memory ring buffer (ring.h). Only system calls and atomics: it runs
 * inside malloc, in fork handlers and in the collector alike.
 */
#include "ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"

static uint64_t hh_tag_of(uint64_t pos) {
    return (pos >> 3) & 0xffffffffu;
}

static uint64_t hh_make_header(uint64_t pos, uint32_t len, unsigned type) {
    return (hh_tag_of(pos) << 32) | ((uint64_t)(type & 0xff) << 24) | (len & 0xffffff);
}

int hh_ring_create_fd(uint64_t capacity) {
    int fd = (int)syscall(SYS_memfd_create, "heaphook-ring", 1u /* MFD_CLOEXEC */);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)(HH_RING_HEADER_SIZE + capacity)) != 0) {
        close(fd);
        return -1;
    }
    hh_ring_header *hdr =
        hh_sys_mmap(NULL, HH_RING_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (hdr == MAP_FAILED) {
        close(fd);
        return -1;
    }
    hdr->magic = HH_RING_MAGIC;
    hdr->capacity = capacity;
    hh_sys_munmap(hdr, HH_RING_HEADER_SIZE);
    return fd;
}

int hh_ring_map(hh_ring *ring, int fd) {
    hh_ring_header *hdr =
        hh_sys_mmap(NULL, HH_RING_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (hdr == MAP_FAILED) return -1;
    uint64_t capacity = hdr->capacity;
    if (hdr->magic != HH_RING_MAGIC || capacity < HH_RING_MIN_CAPACITY ||
        (capacity & (capacity - 1)) != 0) {
        hh_sys_munmap(hdr, HH_RING_HEADER_SIZE);
        errno = EINVAL;
        return -1;
    }
    hh_sys_munmap(hdr, HH_RING_HEADER_SIZE);
    size_t total = HH_RING_HEADER_SIZE + 2 * capacity;
    uint8_t *base = hh_sys_mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return -1;
    int prot = PROT_READ | PROT_WRITE;
    if (hh_sys_mmap(base, HH_RING_HEADER_SIZE + capacity, prot, MAP_SHARED | MAP_FIXED, fd, 0) ==
            MAP_FAILED ||
        hh_sys_mmap(base + HH_RING_HEADER_SIZE + capacity, capacity, prot, MAP_SHARED | MAP_FIXED,
                    fd, HH_RING_HEADER_SIZE) == MAP_FAILED) {
        hh_sys_munmap(base, total);
        return -1;
    }
    ring->hdr = (hh_ring_header *)base;
    ring->data = base + HH_RING_HEADER_SIZE;
    ring->capacity = capacity;
    ring->mask = capacity - 1;
    ring->map_size = total;
    return 0;
}

void hh_ring_unmap(hh_ring *ring) {
    if (ring->hdr != NULL) hh_sys_munmap(ring->hdr, ring->map_size);
    ring->hdr = NULL;
    ring->data = NULL;
}

static void hh_futex_wait(_Atomic uint32_t *word, uint32_t value, long timeout_ns) {
    struct timespec ts = {0, timeout_ns};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, value, &ts, NULL, 0);
}

static void hh_futex_wake(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

void *hh_ring_reserve(hh_ring *ring, uint32_t len, bool block, void (*wake)(void *), void *arg) {
    hh_ring_header *h = ring->hdr;
    uint64_t w = atomic_load_explicit(&h->write_pos, memory_order_relaxed);
    for (;;) {
        uint64_t r = atomic_load_explicit(&h->read_pos, memory_order_acquire);
        if (w + len - r <= ring->capacity) {
            /* seq_cst, not acq_rel: the sleep handshake's order (ring.h) */
            if (atomic_compare_exchange_weak_explicit(&h->write_pos, &w, w + len,
                                                      memory_order_seq_cst, memory_order_relaxed)) {
                break;
            }
            continue; /* w was reloaded */
        }
        if (!block || atomic_load_explicit(&h->closed, memory_order_relaxed)) {
            atomic_fetch_add_explicit(&h->dropped, 1, memory_order_relaxed);
            return NULL;
        }
        uint32_t seq = atomic_load_explicit(&h->read_seq, memory_order_acquire);
        atomic_fetch_add_explicit(&h->waiters, 1, memory_order_acq_rel);
        if (wake != NULL) wake(arg);
        /* Re-check after announcing ourselves: the reader may have advanced meanwhile. */
        uint64_t r2 = atomic_load_explicit(&h->read_pos, memory_order_acquire);
        if (r2 == r) hh_futex_wait(&h->read_seq, seq, 20 * 1000 * 1000);
        atomic_fetch_sub_explicit(&h->waiters, 1, memory_order_acq_rel);
        w = atomic_load_explicit(&h->write_pos, memory_order_relaxed);
    }
    _Atomic uint64_t *header = (_Atomic uint64_t *)(ring->data + (w & ring->mask));
    atomic_store_explicit(header, hh_make_header(w, len, HH_REC_RESERVED), memory_order_relaxed);
    return (void *)header;
}

void hh_ring_commit(hh_ring *ring, void *record, unsigned type) {
    _Atomic uint64_t *header = (_Atomic uint64_t *)record;
    uint64_t provisional = atomic_load_explicit(header, memory_order_relaxed);
    (void)ring;
    atomic_store_explicit(header, (provisional & ~(uint64_t)0xff000000u) | ((uint64_t)type << 24),
                          memory_order_release);
}

/* The header word of the record at position r (below w), or 0 when no whole record is there yet
 * (not even reserved, or torn). */
static uint64_t hh_ring_record_at(const hh_ring *ring, uint64_t r, uint64_t w) {
    const _Atomic uint64_t *header = (const _Atomic uint64_t *)(ring->data + (r & ring->mask));
    uint64_t word = atomic_load_explicit(header, memory_order_acquire);
    uint32_t len = hh_rec_len(word);
    /* The collector reads a ring another process writes: a length over the capacity would read
     * past the mapping (the data is mapped twice, so a record of up to capacity bytes is whole
     * from any offset). */
    if ((word >> 32) != hh_tag_of(r) || len < 8 || (len & 7) != 0 || len > ring->capacity ||
        r + len > w)
        return 0;
    return word;
}

/* Passes the records from position `from` up to `limit` (and the write position): fn (when
 * not NULL) gets every published one; one reserved and not yet published stops the walk, or
 * is passed and counted in *unpublished with skip_unpublished. Returns the position after the
 * last record passed; *published counts fn's calls. prefetch (may be NULL) sees the published
 * records in [r, ahead) before fn does: `ahead` runs up to HH_RING_LOOKAHEAD records in front
 * of r and stops at the first record not published yet. */
static uint64_t hh_ring_walk_counting(const hh_ring *ring, uint64_t from, uint64_t limit,
                                      bool skip_unpublished, hh_ring_reader fn,
                                      hh_ring_prefetcher prefetch, void *arg, uint64_t *published,
                                      uint64_t *unpublished) {
    uint64_t w = atomic_load_explicit(&ring->hdr->write_pos, memory_order_acquire);
    if (limit < w) w = limit;
    /* Writers never get more than capacity bytes ahead of the reader: a write position further
     * on, or behind the reader, is not believed (only a ring another process wrote has one), so
     * one pass reads at most one lap. */
    if (w < from) w = from;
    if (w - from > ring->capacity) w = from + ring->capacity;
    uint64_t r = from, ahead = from;
    unsigned lead = 0; /* records in [r, ahead) */
    /* Their header words, r's at seen[first]: checked once, when prefetched (a published record
     * does not change while the reader has not passed it). */
    uint64_t seen[HH_RING_LOOKAHEAD];
    unsigned first = 0;
    uint64_t passed = 0, reserved = 0; /* counted here, stored once: fn may write anywhere */
    while (r < w) {
        while (prefetch != NULL && lead < HH_RING_LOOKAHEAD && ahead < w) {
            uint64_t next = hh_ring_record_at(ring, ahead, w);
            if (next == 0 || hh_rec_type_of(next) == HH_REC_RESERVED) break;
            prefetch(arg, hh_rec_type_of(next), ring->data + (ahead & ring->mask));
            seen[(first + lead) % HH_RING_LOOKAHEAD] = next;
            ahead += hh_rec_len(next);
            lead++;
        }
        uint64_t word = lead > 0 ? seen[first] : hh_ring_record_at(ring, r, w);
        if (word == 0) break;
        uint32_t len = hh_rec_len(word);
        unsigned type = hh_rec_type_of(word);
        if (type == HH_REC_RESERVED) {
            if (!skip_unpublished) break; /* still being written */
            reserved++;
        } else if (fn != NULL) {
            fn(arg, r, type, (const void *)(ring->data + (r & ring->mask)), len);
            passed++;
        }
        r += len;
        if (ahead < r) ahead = r; /* it stopped at the record just passed */
        if (lead > 0) {
            lead--;
            first = (first + 1) % HH_RING_LOOKAHEAD;
        }
        if (ahead == r) lead = 0;
    }
    if (published != NULL) *published += passed;
    if (unpublished != NULL) *unpublished += reserved;
    return r;
}

uint64_t hh_ring_copy_records(const hh_ring *ring, uint64_t from, uint64_t w, uint8_t *copy) {
    uint64_t r = from;
    while (r < w) {
        uint64_t word = hh_ring_record_at(ring, r, w);
        if (word == 0) break;
        uint32_t len = hh_rec_len(word);
        /* The data is mapped twice in a row: a record is contiguous from its offset, and so
         * is its copy (2 * capacity bytes); a walk reads it at the same offset. */
        uint64_t at = r & ring->mask;
        if (hh_rec_type_of(word) == HH_REC_RESERVED) {
            memcpy(copy + at, &word, sizeof word);
        } else {
            /* published with release order after its body: the acquire load above makes the
             * body complete, and nobody writes a published record's space before it is read */
            memcpy(copy + at, ring->data + at, len);
        }
        r += len;
    }
    return r;
}

void hh_ring_view(hh_ring *view, hh_ring_header *hdr, const hh_ring *ring, uint8_t *copy,
                  uint64_t end) {
    memset(hdr, 0, sizeof *hdr);
    atomic_store_explicit(&hdr->write_pos, end, memory_order_relaxed);
    *view = *ring;
    view->hdr = hdr;
    view->data = copy;
}

uint64_t hh_ring_walk(const hh_ring *ring, uint64_t from, uint64_t limit, bool skip_unpublished,
                      hh_ring_reader fn, void *arg) {
    return hh_ring_walk_counting(ring, from, limit, skip_unpublished, fn, NULL, arg, NULL, NULL);
}

uint64_t hh_ring_read(hh_ring *ring, hh_ring_reader fn, hh_ring_prefetcher prefetch, void *arg,
                      bool crashed) {
    hh_ring_header *h = ring->hdr;
    uint64_t count = 0;
    uint64_t r =
        hh_ring_walk_counting(ring, atomic_load_explicit(&h->read_pos, memory_order_relaxed),
                              UINT64_MAX, crashed, fn, prefetch, arg, &count, NULL);
    atomic_store_explicit(&h->read_pos, r, memory_order_release);
    atomic_fetch_add_explicit(&h->read_seq, 1, memory_order_acq_rel);
    if (atomic_load_explicit(&h->waiters, memory_order_acquire) != 0) hh_futex_wake(&h->read_seq);
    return count;
}

uint64_t hh_ring_pending(const hh_ring *ring) {
    return atomic_load_explicit(&ring->hdr->write_pos, memory_order_acquire) -
           atomic_load_explicit(&ring->hdr->read_pos, memory_order_acquire);
}

bool hh_ring_should_notify(hh_ring *ring, uint64_t batch) {
    hh_ring_header *h = ring->hdr;
    uint64_t w = atomic_load_explicit(&h->write_pos, memory_order_relaxed);
    uint64_t last = atomic_load_explicit(&h->notified, memory_order_relaxed);
    if (w - last < batch) return false;
    return atomic_compare_exchange_strong_explicit(&h->notified, &last, w, memory_order_relaxed,
                                                   memory_order_relaxed);
}

bool hh_ring_reader_sleep(hh_ring *ring) {
    hh_ring_header *h = ring->hdr;
    atomic_store_explicit(&h->reader_sleeping, 1, memory_order_seq_cst);
    uint64_t w = atomic_load_explicit(&h->write_pos, memory_order_seq_cst);
    if (w == atomic_load_explicit(&h->read_pos, memory_order_relaxed)) return true;
    atomic_store_explicit(&h->reader_sleeping, 0, memory_order_relaxed);
    return false;
}

void hh_ring_reader_awake(hh_ring *ring) {
    atomic_store_explicit(&ring->hdr->reader_sleeping, 0, memory_order_relaxed);
}

void hh_ring_close(hh_ring *ring) {
    atomic_store_explicit(&ring->hdr->closed, 1, memory_order_release);
    atomic_fetch_add_explicit(&ring->hdr->read_seq, 1, memory_order_acq_rel);
    hh_futex_wake(&ring->hdr->read_seq);
}

void hh_ring_close_error(hh_ring *ring, int error) {
    atomic_store_explicit(&ring->hdr->close_error, (uint32_t)error, memory_order_relaxed);
    hh_ring_close(ring);
}

uint64_t hh_ring_unpublished(const hh_ring *ring) {
    uint64_t count = 0;
    hh_ring_walk_counting(ring, atomic_load_explicit(&ring->hdr->read_pos, memory_order_acquire),
                          UINT64_MAX, true, NULL, NULL, NULL, NULL, &count);
    return count;
}

void hh_ring_reopen(hh_ring *ring) {
    atomic_store_explicit(&ring->hdr->dropped, 0, memory_order_relaxed);
    atomic_store_explicit(&ring->hdr->notified,
                          atomic_load_explicit(&ring->hdr->write_pos, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&ring->hdr->close_error, 0, memory_order_relaxed);
    atomic_store_explicit(&ring->hdr->closed, 0, memory_order_release);
}
