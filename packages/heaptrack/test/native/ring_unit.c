/*
 * ring_unit.c — unit tests of the ring buffer's reader (native/track/ring.c), linked with ring.c
 * alone: records come back in reservation order, a record reserved and not yet published holds
 * back every record after it (or is skipped when the writer crashed), and the prefetcher sees
 * each published record before the reader does, at most HH_RING_LOOKAHEAD records ahead, and
 * never a record that is not published; a copy of the records made for a fork child reads
 * back the same records after the ring's space was reused.
 *
 * Prints one "ok <case>" line per case; on a failed expectation prints "FAIL <case>: <what>"
 * on stderr and exits with 1 (test/unit/ring.test.ts runs it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ring.h"
#include "trace.h"

#define MAX_SEEN 4096

/* What a read saw, in order: fn's records (by the index written in them) and, for each fn
 * call, how many records the prefetcher had seen by then. */
typedef struct seen {
    uint32_t read[MAX_SEEN], prefetched_before[MAX_SEEN], nread;
    uint32_t prefetched[MAX_SEEN], nprefetched;
    uint64_t pos[MAX_SEEN];
} seen;

static const char *g_case;

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "FAIL %s: %s\n", g_case, what);
        exit(1);
    }
}

/* Record i: the header word, then i, then (i % 5) words of padding: lengths 16 to 48 bytes. */
static uint32_t record_len(uint32_t i) {
    return 16 + 8 * (i % 5);
}

static void *reserve(hh_ring *ring, uint32_t i) {
    uint64_t *r = hh_ring_reserve(ring, record_len(i), false, NULL, NULL);
    expect(r != NULL, "a reservation failed in a ring with room");
    r[1] = i;
    return r;
}

static void on_record(void *arg, uint64_t pos, unsigned type, const void *record, uint32_t len) {
    seen *s = arg;
    uint32_t i = (uint32_t)((const uint64_t *)record)[1];
    expect(type == HH_REC_EVENT, "the type read is not the type published");
    expect(len == record_len(i), "the length read is not the length reserved");
    s->pos[s->nread] = pos;
    s->prefetched_before[s->nread] = s->nprefetched;
    s->read[s->nread++] = i;
}

static void on_prefetch(void *arg, unsigned type, const void *record) {
    seen *s = arg;
    expect(type != HH_REC_RESERVED, "the prefetcher was shown a record not yet published");
    s->prefetched[s->nprefetched++] = (uint32_t)((const uint64_t *)record)[1];
}

/* A case begins: a new ring of the smallest size, and an empty record of what was seen. */
static seen *begin_case(const char *name, hh_ring *ring) {
    g_case = name;
    int fd = hh_ring_create_fd(HH_RING_MIN_CAPACITY);
    expect(fd >= 0, "hh_ring_create_fd failed");
    expect(hh_ring_map(ring, fd) == 0, "hh_ring_map failed");
    close(fd);
    seen *s = calloc(1, sizeof *s);
    expect(s != NULL, "out of memory");
    return s;
}

static void end_case(hh_ring *ring, seen *s) {
    free(s);
    hh_ring_unmap(ring);
    printf("ok %s\n", g_case);
}

/* Records 0..n-1 published in order, read in one pass: each once, in order, and each shown to
 * the prefetcher first, up to HH_RING_LOOKAHEAD records ahead of the reader. */
static void case_order_and_lookahead(void) {
    hh_ring ring;
    seen *s = begin_case("order-and-lookahead", &ring);
    const uint32_t n = 200;
    for (uint32_t i = 0; i < n; i++) hh_ring_commit(&ring, reserve(&ring, i), HH_REC_EVENT);
    expect(hh_ring_read(&ring, on_record, on_prefetch, s, false) == n, "not every record read");
    expect(s->nread == n && s->nprefetched == n, "a record was read or prefetched twice, or not");
    for (uint32_t i = 0; i < n; i++) {
        expect(s->read[i] == i && s->prefetched[i] == i, "records out of reservation order");
        uint32_t ahead = i + HH_RING_LOOKAHEAD < n ? i + HH_RING_LOOKAHEAD : n;
        expect(s->prefetched_before[i] == ahead,
               "the prefetcher was not HH_RING_LOOKAHEAD records ahead of the reader");
        if (i > 0) expect(s->pos[i] == s->pos[i - 1] + record_len(i - 1), "wrong positions");
    }
    expect(hh_ring_pending(&ring) == 0, "read records were not given back");
    end_case(&ring, s);
}

/* Record 5 is reserved and not published (a thread inside a hook): the reader stops before it
 * and the prefetcher never looks past it; once it is published, the rest follows. */
static void case_unpublished_holds_back(void) {
    hh_ring ring;
    seen *s = begin_case("unpublished-holds-back", &ring);
    void *held = NULL;
    for (uint32_t i = 0; i < 20; i++) {
        void *r = reserve(&ring, i);
        if (i == 5)
            held = r;
        else
            hh_ring_commit(&ring, r, HH_REC_EVENT);
    }
    expect(hh_ring_read(&ring, on_record, on_prefetch, s, false) == 5,
           "read past a reserved record");
    expect(s->nprefetched == 5, "the prefetcher looked past a reserved record");
    expect(hh_ring_unpublished(&ring) == 1, "hh_ring_unpublished does not count the held record");
    hh_ring_commit(&ring, held, HH_REC_EVENT);
    expect(hh_ring_read(&ring, on_record, on_prefetch, s, false) == 15,
           "the records after a published one did not follow");
    for (uint32_t i = 0; i < 20; i++) expect(s->read[i] == i, "records out of order");
    end_case(&ring, s);
}

/* After the writer crashed, a record it never published is skipped, and nobody is shown it. */
static void case_crashed_skips(void) {
    hh_ring ring;
    seen *s = begin_case("crashed-skips-unpublished", &ring);
    for (uint32_t i = 0; i < 20; i++) {
        void *r = reserve(&ring, i);
        if (i != 7) hh_ring_commit(&ring, r, HH_REC_EVENT);
    }
    expect(hh_ring_read(&ring, on_record, on_prefetch, s, true) == 19, "not 19 records read");
    expect(s->nprefetched == 19, "the prefetcher was not shown the 19 published records");
    for (uint32_t k = 0, i = 0; i < 20; i++) {
        if (i == 7) continue;
        expect(s->read[k] == i && s->prefetched[k] == i, "records out of order around the hole");
        k++;
    }
    expect(hh_ring_pending(&ring) == 0, "the skipped record's space was not given back");
    end_case(&ring, s);
}

/* Records that wrap around the end of the data are read whole (the data is mapped twice). */
static void case_wraparound(void) {
    hh_ring ring;
    seen *s = begin_case("wraparound", &ring);
    uint32_t next = 0;
    /* three times the capacity, in passes of up to 1000 records */
    while ((uint64_t)atomic_load(&ring.hdr->write_pos) < 3 * ring.capacity) {
        uint32_t first = next;
        for (uint32_t k = 0; k < 1000; k++, next++)
            hh_ring_commit(&ring, reserve(&ring, next), HH_REC_EVENT);
        s->nread = s->nprefetched = 0;
        expect(hh_ring_read(&ring, on_record, on_prefetch, s, false) == 1000,
               "a pass lost records");
        for (uint32_t k = 0; k < 1000; k++) expect(s->read[k] == first + k, "out of order");
    }
    end_case(&ring, s);
}

static void ignore_record(void *arg, uint64_t pos, unsigned type, const void *record,
                          uint32_t len) {
    (void)arg, (void)pos, (void)type, (void)record, (void)len;
}

/* A fork child's copy (hh_ring_copy_records, hh_ring_view): the records from a position on,
 * copied while one of them is still being written, read back from the copy whole and in
 * order, the unpublished one passed; then the ring's space is read and reused by the "parent"
 * (three laps of new records), and the copy still gives the same records. Before the copy,
 * a fork child read them in the shared ring while the parent overwrote them. The records
 * start near the end of the data, so some wrap around it. */
static void case_fork_copy(void) {
    hh_ring ring;
    seen *s = begin_case("fork-copy", &ring);
    uint32_t next = 0;
    while ((uint64_t)atomic_load(&ring.hdr->write_pos) < ring.capacity - 200) {
        hh_ring_commit(&ring, reserve(&ring, next++), HH_REC_EVENT);
    }
    expect(hh_ring_read(&ring, ignore_record, NULL, NULL, false) == next,
           "the first records not read");
    uint64_t from = atomic_load(&ring.hdr->write_pos);
    for (uint32_t i = 0; i < 20; i++) {
        void *r = reserve(&ring, 1000 + i);
        if (i != 3) hh_ring_commit(&ring, r, HH_REC_EVENT); /* 3: a thread inside a hook */
    }
    uint64_t end = atomic_load(&ring.hdr->write_pos);
    uint8_t *copy = calloc(2, ring.capacity);
    expect(copy != NULL, "out of memory");
    expect(hh_ring_copy_records(&ring, from, end, copy) == end, "the copy stopped short");
    /* the parent: its reader passes the held record (as a crashed writer's), then 3 laps */
    expect(hh_ring_read(&ring, ignore_record, NULL, NULL, true) == 19,
           "the parent read not 19 records");
    for (uint32_t k = 0; (uint64_t)atomic_load(&ring.hdr->write_pos) < end + 3 * ring.capacity;
         k++) {
        hh_ring_commit(&ring, reserve(&ring, 5000 + k % 1000), HH_REC_EVENT);
        if (k % 1000 == 999) hh_ring_read(&ring, ignore_record, NULL, NULL, false);
    }
    hh_ring view;
    hh_ring_header view_header;
    hh_ring_view(&view, &view_header, &ring, copy, end);
    expect(hh_ring_walk(&view, from, end, true, on_record, s) == end, "the walk stopped short");
    expect(s->nread == 19, "not the 19 published records read from the copy");
    for (uint32_t k = 0, i = 0; i < 20; i++) {
        if (i == 3) continue;
        expect(s->read[k++] == 1000 + i, "the copy gave a record out of order or overwritten");
    }
    free(copy);
    end_case(&ring, s);
}

int main(void) {
    case_order_and_lookahead();
    case_unpublished_holds_back();
    case_crashed_skips();
    case_wraparound();
    case_fork_copy();
    return 0;
}
