/*
 * ring_stress.c — the ring buffer (native/track/ring.c) under its real concurrency: several
 * writer threads reserve, fill and commit records at once while one reader drains them, as the
 * traced program's threads and the drain thread (or the collector) do. The ring is the smallest
 * one, so writers keep filling it and wait for the reader (blocking mode), and records wrap
 * around its end. Built under ThreadSanitizer by the sanitizer tier (test/sanitize): a data race
 * between a writer filling a record and the reader reading it, or between the reader and a
 * writer reusing the space it gave back, is reported and fails the run.
 *
 * Checks: every record read once, each writer's records in the order it wrote them, and every
 * word of every record as written. Prints "ring_stress: <writers> writers, <n> records" and exits
 * 0, or prints "FAIL ..." on stderr and exits 1.
 *
 *   ring_stress [writers] [records per writer]      (defaults 4 and 20000)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ring.h"
#include "trace.h"

#define MAX_WRITERS 16

static hh_ring g_ring;
static unsigned g_writers;
static uint32_t g_per_writer;
static _Atomic unsigned g_done; /* writers finished */

static void fail(const char *what, uint64_t a, uint64_t b) {
    fprintf(stderr, "FAIL ring_stress: %s (%llu, %llu)\n", what, (unsigned long long)a,
            (unsigned long long)b);
    exit(1);
}

/* Record: header word, (writer << 32 | sequence), then 0..6 words of a pattern of both. */
static uint32_t words_of(uint32_t seq) {
    return 2 + seq % 7;
}
static uint64_t pattern(uint64_t id, uint32_t k) {
    return id * 0x9e3779b97f4a7c15ULL + k;
}

static void *writer(void *arg) {
    uint64_t w = (uint64_t)(uintptr_t)arg;
    for (uint32_t seq = 0; seq < g_per_writer; seq++) {
        uint32_t words = words_of(seq);
        uint64_t *r = hh_ring_reserve(&g_ring, words * 8, true, NULL, NULL);
        if (r == NULL) fail("a blocking reservation failed", w, seq);
        uint64_t id = w << 32 | seq;
        r[1] = id;
        for (uint32_t k = 2; k < words; k++) r[k] = pattern(id, k);
        hh_ring_commit(&g_ring, r, HH_REC_EVENT);
    }
    atomic_fetch_add(&g_done, 1);
    return NULL;
}

static uint32_t g_next[MAX_WRITERS]; /* reader: the sequence expected next from each writer */
static uint64_t g_read;

static void on_record(void *arg, uint64_t pos, unsigned type, const void *record, uint32_t len) {
    (void)arg;
    (void)pos;
    const uint64_t *r = record;
    uint64_t id = r[1];
    uint32_t w = (uint32_t)(id >> 32), seq = (uint32_t)id;
    if (type != HH_REC_EVENT) fail("a record of the wrong type", type, id);
    if (w >= g_writers) fail("a record from no writer", w, seq);
    if (seq != g_next[w]) fail("a writer's records out of order", seq, g_next[w]);
    if (len != words_of(seq) * 8) fail("a record of the wrong length", len, seq);
    for (uint32_t k = 2; k < len / 8; k++) {
        if (r[k] != pattern(id, k)) fail("a record's word is not what was written", id, k);
    }
    g_next[w]++;
    g_read++;
}

int main(int argc, char **argv) {
    g_writers = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
    g_per_writer = argc > 2 ? (uint32_t)atoi(argv[2]) : 20000;
    if (g_writers == 0 || g_writers > MAX_WRITERS) fail("writers: 1 to 16", g_writers, 0);
    int fd = hh_ring_create_fd(HH_RING_MIN_CAPACITY);
    if (fd < 0 || hh_ring_map(&g_ring, fd) != 0) fail("cannot create the ring", 0, 0);
    close(fd);
    pthread_t threads[MAX_WRITERS];
    for (unsigned i = 0; i < g_writers; i++) {
        if (pthread_create(&threads[i], NULL, writer, (void *)(uintptr_t)i) != 0) {
            fail("pthread_create", i, 0);
        }
    }
    uint64_t total = (uint64_t)g_writers * g_per_writer;
    while (g_read < total) {
        unsigned done = atomic_load(&g_done);
        uint64_t n = hh_ring_read(&g_ring, on_record, NULL, NULL, false);
        /* All writers done and nothing left: records were lost. */
        if (n == 0 && done == g_writers && hh_ring_pending(&g_ring) == 0 && g_read < total) {
            fail("records lost", g_read, total);
        }
        if (n == 0) sched_yield();
    }
    for (unsigned i = 0; i < g_writers; i++) pthread_join(threads[i], NULL);
    if (hh_ring_pending(&g_ring) != 0) fail("bytes left in the ring", hh_ring_pending(&g_ring), 0);
    hh_ring_unmap(&g_ring);
    printf("ring_stress: %u writers, %llu records\n", g_writers, (unsigned long long)g_read);
    return 0;
}
