/*
 * collector_fuzz.c — the collector's input path (native/track/ring.c's reader, then
 * hh_writer_record_checked in native/track/writer.c, as collector.c drains a ring) fed hostile
 * rings, for the sanitizer tier (built with ASan + UBSan, test/sanitize/collector.test.ts).
 *
 *   hh_test_collector_fuzz_asan DIR SEED MS
 *
 * First the probes of issue 35, each a line "probe <name>: <the writer's reason>" (or "...:
 * accepted"): an EVENT before any PROCESS; a PROCESS that claims a 3 GB exe; a PROCESS with a
 * real 8 MB exe (in a 16 MiB ring); a MODULE whose path runs past its record; a record longer
 * than the ring. Then "valid: <records> records, <events> events" for a stream of every record
 * kind in the shapes the tracer writes them (a PROCESS, MODULEs, NODEs, events of every
 * operation with and without extras, VM, LEAK, LEAK_CHECK, EXIT), its log kept as
 * DIR/heaplog.1.log. Then, for MS ms, that stream copied into a fresh ring and mutated (bytes
 * flipped, fields set to boundary values, headers' lengths and types changed, records swapped,
 * the write position moved) and read through the same path into a log in DIR (removed again);
 * prints "fuzz seed <seed>" first and "fuzz: <n> streams, <k> refused" at the end. A report of
 * ASan or UBSan ends the program (the test prints the seed to reproduce it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "format/heaplog.h"
#include "ring.h"
#include "trace.h"
#include "writer.h"

static uint64_t g_rng;
static uint64_t rnd(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *g_dir;

static hh_ring new_ring(uint64_t capacity) {
    hh_ring ring;
    int fd = hh_ring_create_fd(capacity);
    if (fd < 0 || hh_ring_map(&ring, fd) != 0) {
        perror("collector_fuzz: ring");
        exit(3);
    }
    close(fd);
    return ring;
}

static void *reserve(hh_ring *ring, size_t len) {
    void *r = hh_ring_reserve(ring, (uint32_t)hh_round8(len), false, NULL, NULL);
    if (r == NULL) {
        fprintf(stderr, "collector_fuzz: ring full\n");
        exit(3);
    }
    memset((uint8_t *)r + 8, 0, hh_round8(len) - 8);
    return r;
}

/* Reads the ring as the collector does; returns the writer's reason (NULL: none) and removes
 * the log unless keep. */
static const char *collect(hh_ring *ring, int pid, bool keep, uint64_t *events) {
    char path[4096];
    hh_writer *w = hh_writer_open(g_dir, pid, path, sizeof path);
    if (w == NULL) {
        perror("collector_fuzz: log");
        exit(3);
    }
    hh_writer_set_pid(w, (uint32_t)pid);
    for (int pass = 0; pass < 16; pass++)
        if (hh_ring_read(ring, hh_writer_record_checked, hh_writer_prefetch, w, pass > 0) == 0)
            break;
    const char *why = hh_writer_violation(w);
    int error = 0;
    uint64_t n = hh_writer_close(w, why != NULL ? HH_END_PROTOCOL : HH_END_EXIT, 0, &error);
    if (events != NULL) *events = n;
    if (!keep) unlink(path);
    return why;
}

static void process(hh_ring *ring, uint32_t exe_len, uint32_t real) {
    hh_rec_process *p = reserve(ring, sizeof *p + real + 12);
    p->pid = 4242;
    p->ppid = 1;
    p->mono_start = now_ns() - 1000000;
    p->real_start = 1700000000000000000ull;
    p->flags = HH_PF_STACKS | HH_PF_TIMING | HH_PF_SAMPLING | HH_PF_FREE_STACKS | HH_PF_VM;
    p->stack_depth = 64;
    p->sample_bytes = 0;
    p->time_unit = 1000;
    p->compress = HH_CODEC_ZSTD;
    p->exe_len = exe_len;
    p->cmdline_len = real >= exe_len ? 12 : 0;
    memset(p + 1, '/', real);
    if (real >= exe_len) memcpy((char *)(p + 1) + exe_len, "prog\0-x\0arg\0", 12);
    hh_ring_commit(ring, p, HH_REC_PROCESS);
}

static void module(hh_ring *ring, const char *path, uint32_t claimed_path) {
    size_t n = strlen(path);
    hh_rec_module *m = reserve(ring, sizeof *m + 20 + n);
    m->base = 0x555500000000ull;
    m->lo = 0;
    m->hi = 0x4000;
    m->build_id_len = 20;
    m->path_len = claimed_path ? claimed_path : (uint32_t)n;
    memset(m + 1, 0xab, 20);
    memcpy((uint8_t *)(m + 1) + 20, path, n);
    hh_ring_commit(ring, m, HH_REC_MODULE);
}

static void event(hh_ring *ring, uint8_t op, uint32_t tid, uint32_t stack, uint64_t addr,
                  uint64_t size, uint64_t old, bool extra) {
    hh_rec_event *e = reserve(ring, sizeof *e + (extra ? sizeof(hh_rec_event_extra) : 0));
    e->time = now_ns();
    e->tid = tid;
    e->stack = stack;
    e->addr = addr;
    e->size = size;
    e->op = op;
    e->flags = extra ? HH_EV_EXTRA : 0;
    if (extra) {
        hh_rec_event_extra *x = (hh_rec_event_extra *)(e + 1);
        *x = (hh_rec_event_extra){old, 3, 64, size, 1234};
    }
    hh_ring_commit(ring, e, HH_REC_EVENT);
}

/* A stream of every record kind, as the tracer writes them. Returns the records written. */
static int valid_stream(hh_ring *ring) {
    int records = 0;
    process(ring, 9, 9);
    records++;
    module(ring, "/usr/bin/prog", 0);
    module(ring, "/lib/x86_64-linux-gnu/libc.so.6", 0);
    records += 2;
    for (uint32_t id = 1; id <= 8; id++) {
        hh_rec_node *n = reserve(ring, sizeof *n);
        n->id = id;
        n->parent = id - 1;
        n->pc = 0x555500001000ull + id * 16;
        hh_ring_commit(ring, n, HH_REC_NODE);
        records++;
    }
    uint64_t base = 0x7f0000001000ull;
    for (int i = 0; i < 64; i++) {
        uint32_t tid = 100 + (uint32_t)(i % 3);
        uint64_t a = base + 64 * (uint64_t)i;
        event(ring, HH_OP_MALLOC, tid, 1 + (uint32_t)(i % 8), a, 24 + (uint64_t)i, 0, i % 2);
        event(ring, (uint8_t)(i % HH_OP_COUNT), tid, (uint32_t)(i % 8), a + 32, 16, a, true);
        event(ring, HH_OP_FREE, tid, 0, a, 0, 0, false);
        records += 3;
    }
    hh_rec_vm *v = reserve(ring, sizeof *v);
    v->time = now_ns();
    v->tid = 100;
    v->stack = 2;
    v->mapped = 1;
    v->addr = 0x7f1000000000ull;
    v->size = 1 << 20;
    hh_ring_commit(ring, v, HH_REC_VM);
    hh_rec_leak *l = reserve(ring, sizeof *l);
    l->check = 1;
    l->ptr = base + 32;
    l->size = 16;
    hh_ring_commit(ring, l, HH_REC_LEAK);
    hh_rec_leak_check *c = reserve(ring, sizeof *c);
    c->check = 1;
    c->time = now_ns();
    c->trigger = HH_TRIGGER_EXIT;
    c->live = 1;
    c->leaked = 1;
    c->leaked_bytes = 16;
    hh_ring_commit(ring, c, HH_REC_LEAK_CHECK);
    hh_rec_exit *x = reserve(ring, sizeof *x);
    x->time = now_ns();
    hh_ring_commit(ring, x, HH_REC_EXIT);
    return records + 4;
}

static void probe(const char *name, hh_ring *ring) {
    const char *why = collect(ring, 7, false, NULL);
    printf("probe %s: %s\n", name, why != NULL ? why : "accepted");
    hh_ring_unmap(ring);
}

static const uint64_t boundary[] = {0,
                                    1,
                                    7,
                                    8,
                                    0x7fffffff,
                                    0x80000000u,
                                    0xffffffffu,
                                    3ull << 30,
                                    8u << 20,
                                    HH_MAX_EXACT,
                                    HH_MAX_EXACT + 1,
                                    UINT64_MAX};

/* Mutates the bytes [0, end) of a ring's data (records from position 0). */
static void mutate(uint8_t *data, uint64_t end, hh_ring_header *hdr) {
    int n = 1 + (int)(rnd() % 6);
    for (int k = 0; k < n; k++) {
        uint64_t at = rnd() % end;
        switch (rnd() % 6) {
            case 0: /* a byte flipped */
                data[at] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 1: /* a 32-bit field set to a boundary value */
            {
                uint32_t v = (uint32_t)boundary[rnd() % (sizeof boundary / sizeof *boundary)];
                memcpy(data + (at & ~3ull), &v, 4);
                break;
            }
            case 2: /* a 64-bit field set to a boundary value */
                memcpy(data + (at & ~7ull), &boundary[rnd() % (sizeof boundary / sizeof *boundary)],
                       8);
                break;
            case 3: /* a record header's type or length changed (keeping its position tag) */
            {
                uint64_t *word = (uint64_t *)(data + (at & ~7ull));
                if (rnd() % 2)
                    *word = (*word & ~0xff000000ull) | ((rnd() % 12) << 24);
                else
                    *word = (*word & ~0xffffffull) | ((rnd() % 2 ? rnd() % 512 : rnd()) & 0xfffff8);
                break;
            }
            case 4: /* 8 to 64 bytes moved elsewhere (records cut, swapped, repeated) */
            {
                uint64_t len = 8 * (1 + rnd() % 8), to = (rnd() % end) & ~7ull;
                if (at + len <= end && to + len <= end)
                    memmove(data + to, data + (at & ~7ull), len);
                break;
            }
            default: /* the write position moved */
                atomic_store(&hdr->write_pos, rnd() % 2 ? end + rnd() % 4096 : rnd());
                break;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: hh_test_collector_fuzz_asan DIR SEED MS\n");
        return 2;
    }
    g_dir = argv[1];
    uint64_t seed = strtoull(argv[2], NULL, 10);
    long ms = atol(argv[3]);

    hh_ring ring = new_ring(1 << 20);
    event(&ring, HH_OP_MALLOC, 1, 0, 0x1000, 32, 0, false);
    probe("event-first", &ring);
    ring = new_ring(1 << 20);
    process(&ring, 3u << 30, 64);
    probe("giant-exe", &ring);
    ring = new_ring(16 << 20);
    process(&ring, 8u << 20, 8u << 20);
    probe("big-exe", &ring);
    ring = new_ring(1 << 20);
    process(&ring, 9, 9);
    module(&ring, "/lib/libc.so.6", 4000);
    probe("module-past-end", &ring);
    ring = new_ring(1 << 16);
    process(&ring, 9, 9);
    /* a header that claims 1 MiB in a 64 KiB ring: the reader must not believe it */
    uint64_t *r = reserve(&ring, 64);
    hh_ring_commit(&ring, r, HH_REC_MODULE);
    *r = (*r & ~0xffffffull) | (1u << 20);
    atomic_store(&ring.hdr->write_pos, 1u << 21);
    probe("longer-than-ring", &ring);

    /* The valid stream, kept: the test decodes it. */
    hh_ring source = new_ring(1 << 20);
    int records = valid_stream(&source);
    uint64_t end = atomic_load(&source.hdr->write_pos);
    uint8_t *pristine = malloc(end);
    memcpy(pristine, source.data, end);
    uint64_t events = 0;
    const char *why = collect(&source, 1, true, &events);
    printf("valid: %d records, %llu events%s%s\n", records, (unsigned long long)events,
           why != NULL ? ", refused: " : "", why != NULL ? why : "");
    hh_ring_unmap(&source);

    g_rng = seed ? seed : 1;
    printf("fuzz seed %llu\n", (unsigned long long)seed);
    fflush(stdout);
    hh_ring fuzzed = new_ring(1 << 20);
    uint64_t start = now_ns();
    long streams = 0, refused = 0;
    while ((now_ns() - start) / 1000000 < (uint64_t)ms) {
        memset(fuzzed.data, 0, end);
        memcpy(fuzzed.data, pristine, end);
        atomic_store(&fuzzed.hdr->read_pos, 0);
        atomic_store(&fuzzed.hdr->write_pos, end);
        mutate(fuzzed.data, end, fuzzed.hdr);
        if (collect(&fuzzed, 2, false, NULL) != NULL) refused++;
        streams++;
    }
    hh_ring_unmap(&fuzzed);
    free(pristine);
    printf("fuzz: %ld streams, %ld refused\n", streams, refused);
    return 0;
}
