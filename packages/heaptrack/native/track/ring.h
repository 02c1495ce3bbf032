/*
 * ring.h — the shared-memory ring buffer between the traced process (many writer threads)
 * and one reader (the drain thread, or the collector in another process).
 *
 * The buffer is a memfd: one header page, then `capacity` bytes of data mapped twice in a
 * row, so a record never has to be split at the end. Writers reserve space with a
 * compare-and-swap on write_pos (no lock), write a provisional header, fill the record and
 * publish it by storing its final header with release order. The reader consumes records in
 * reservation order and stops at the first one not yet published. After the writer process
 * died, ring_read(..., crashed=true) also skips records that were reserved but never
 * finished, so only the records being written at the moment of the crash are lost.
 */
#ifndef HH_RING_H
#define HH_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define HH_RING_MAGIC 0x31474e4952484848ULL /* "HHHRING1" */
#define HH_RING_HEADER_SIZE 4096u
#define HH_RING_MIN_CAPACITY (64u * 1024u)

typedef struct hh_ring_header {
    uint64_t magic;
    uint64_t capacity; /* bytes of data, a power of two */
    uint32_t flags;
    _Atomic uint32_t closed;      /* set by the reader when it stops: writers no longer wait */
    _Atomic uint32_t close_error; /* set before closed: the errno that ended the reader's log */
    char pad1[64 - 28];
    _Atomic uint64_t write_pos; /* next byte to reserve */
    char pad2[56];
    _Atomic uint64_t read_pos; /* next byte to read */
    char pad3[56];
    _Atomic uint32_t read_seq; /* futex word: bumped after every read pass */
    _Atomic uint32_t waiters;  /* writers sleeping on read_seq */
    _Atomic uint64_t dropped;  /* records dropped (HEAPHOOK_ON_FULL=drop) */
    _Atomic uint64_t notified; /* write position at the last wake-up byte */
    _Atomic uint32_t ending;   /* set by the traced process before it closes its connection */
    /* The reader's sleep handshake (hh_ring_reader_sleep, hh_ring_reader_wanted): set by the
     * collector before it waits with no timeout, taken back by the first writer that publishes
     * after it (that writer sends the one wake-up byte). On a line of its own: writers load it
     * on every commit, and it changes only when the reader falls asleep or wakes. */
    _Alignas(64) _Atomic uint32_t reader_sleeping;
} hh_ring_header;
_Static_assert(sizeof(hh_ring_header) <= HH_RING_HEADER_SIZE, "the header fits its page");

/* Values of hh_ring_header.ending: why the traced process ends its connection. */
#define HH_RING_ENDING_NONE 0u
#define HH_RING_ENDING_DETACH 1u /* heaphook_heaptrack_detach: the log ends with reason detach */

typedef struct hh_ring {
    hh_ring_header *hdr;
    uint8_t *data; /* capacity bytes, followed by the same bytes again */
    uint64_t capacity;
    uint64_t mask;
    size_t map_size; /* bytes of the whole mapping (header page + 2 * capacity) */
} hh_ring;

/* Creates a memfd of header + capacity bytes and initialises the header. Returns the fd, or
 * -1. capacity must be a power of two >= HH_RING_MIN_CAPACITY. */
int hh_ring_create_fd(uint64_t capacity);
/* Maps the ring in fd (header page, data twice). Returns 0 or -1. */
int hh_ring_map(hh_ring *ring, int fd);
void hh_ring_unmap(hh_ring *ring);

/* Reserves len bytes (a multiple of 8). Returns a pointer to the record, or NULL when the
 * ring is full and block is false (the drop is counted). When block is true, waits for the
 * reader; wake(arg) is called before sleeping so the reader learns it is needed. */
void *hh_ring_reserve(hh_ring *ring, uint32_t len, bool block, void (*wake)(void *), void *arg);
/* Tells writers the reader is gone: reservations fail instead of waiting. */
void hh_ring_close(hh_ring *ring);
/* The same, because the reader could not write the log (error: its errno, for the writers to
 * say). */
void hh_ring_close_error(hh_ring *ring, int error);
/* Publishes a reserved record with its type. */
void hh_ring_commit(hh_ring *ring, void *record, unsigned type);

/* Gets a published record: its ring position, type and bytes. */
typedef void (*hh_ring_reader)(void *arg, uint64_t pos, unsigned type, const void *record,
                               uint32_t len);
/* Is told of a published record some records before the reader gets it, so that the reader
 * can prefetch what it will look up for it (a table slot that would miss the cache). */
typedef void (*hh_ring_prefetcher)(void *arg, unsigned type, const void *record);
#define HH_RING_LOOKAHEAD 8 /* records: a cache miss' time at the reader's pace, and then some */

/* Calls fn for every published record from read_pos on, then frees the space. Returns the
 * number of records read. With crashed, records reserved but never published are skipped.
 * prefetch (may be NULL) is given each published record up to HH_RING_LOOKAHEAD records before fn
 * gets it (fewer when the records after it are not published yet). */
uint64_t hh_ring_read(hh_ring *ring, hh_ring_reader fn, hh_ring_prefetcher prefetch, void *arg,
                      bool crashed);
/* Reads ahead without freeing anything (tracer.c's leak-table cursor): calls fn for the
 * published records from position `from` (a record's start, at or after read_pos) up to
 * `limit` and the write position; stops at a record still being written, or passes it with
 * skip_unpublished. Returns the position after the last record passed. */
uint64_t hh_ring_walk(const hh_ring *ring, uint64_t from, uint64_t limit, bool skip_unpublished,
                      hh_ring_reader fn, void *arg);

/* Copies the records from position `from` up to `end` (at most the write position) into copy
 * (2 * capacity bytes, private memory) at their offsets in the ring: a published record whole,
 * one still being written by its header alone (so a walk of the copy can pass it). Stops at a
 * slot that holds no record of this lap. Returns the position after the last record copied.
 * For a fork child, which must not read the shared ring: the parent frees and reuses that
 * space while the child reads it (tracer.c, "Fork"). */
uint64_t hh_ring_copy_records(const hh_ring *ring, uint64_t from, uint64_t end, uint8_t *copy);
/* A ring that reads such a copy: hh_ring_walk(view, ...) up to `end` gives its records. hdr is
 * the view's own header (only write_pos is read). */
void hh_ring_view(hh_ring *view, hh_ring_header *hdr, const hh_ring *ring, uint8_t *copy,
                  uint64_t end);

/* Records between read_pos and write_pos that are reserved and not yet published. */
uint64_t hh_ring_unpublished(const hh_ring *ring);

/* Undoes hh_ring_close for a new reader of the same ring (its drop counter starts at 0). */
void hh_ring_reopen(hh_ring *ring);

/* Bytes written and not yet read. */
uint64_t hh_ring_pending(const hh_ring *ring);

/* True when a wake-up byte should be sent (batch bytes since the last one); claims it. */
bool hh_ring_should_notify(hh_ring *ring, uint64_t batch);

/* The sleep handshake, after futexes: a reader that found the ring empty announces that it is
 * going to wait for a wake-up byte with no timeout, and a writer that publishes after that
 * announcement sends exactly one byte.
 *
 * Reader: hh_ring_reader_sleep(ring) stores the flag, then looks at write_pos again; false means
 * a record was reserved meanwhile (the flag is withdrawn, the reader must not wait without a
 * timeout). After its wait the reader calls hh_ring_reader_awake(ring).
 * Writer, after hh_ring_commit: hh_ring_reader_wanted(ring) is one load when the reader is
 * awake; true (for one writer only) when the reader sleeps: send the byte.
 *
 * The race is closed by sequential consistency: the reservation's compare-and-swap on write_pos
 * and the writer's load of the flag, the reader's store of the flag and its load of write_pos
 * are all seq_cst. Either the reader's load sees the reservation (it does not sleep), or the
 * reservation, and so the writer's later load of the flag, come after the reader's store (the
 * writer sees the flag and wakes it). A record reserved and not yet published when the reader
 * looks counts as pending: the reader does not sleep, and polls until it is published. */
bool hh_ring_reader_sleep(hh_ring *ring);
void hh_ring_reader_awake(hh_ring *ring);
static inline bool hh_ring_reader_wanted(hh_ring *ring) {
    _Atomic uint32_t *flag = &ring->hdr->reader_sleeping;
    if (__builtin_expect(atomic_load_explicit(flag, memory_order_seq_cst) == 0, 1)) return false;
    return atomic_exchange_explicit(flag, 0, memory_order_seq_cst) != 0;
}

#endif /* HH_RING_H */
