/*
 * writer_roundtrip.c — one of every record kind of the log format, written by the tracer's own
 * encoder (native/track/writer.c, linked alone) as the drain thread hands it ring records.
 *
 *   hh_test_writer_roundtrip <log path> <codec: 0 none | 1 deflate | 2 zstd>
 *   hh_test_writer_roundtrip <log path> <codec> fsize <bytes>
 *   hh_test_writer_roundtrip <log path> <codec> deep
 *
 * Writes a PROCESS (every flag set, so events carry durations, weights and free stacks), a
 * MODULE, two stack NODEs, an event of every operation (realloc moved and split, so a
 * REALLOC_DONE follows) on two threads (so two THREADs), VM_MAPPED and VM_UNMAPPED, a LEAK, a
 * LEAK_CHECK, the ring's EXIT, and the END (reason detach, 7 dropped). Prints on stdout, as one
 * JSON object, every field of every ring record it handed the writer; test/unit/roundtrip.test.ts
 * decodes the log with the TypeScript decoder and checks each decoded field against it.
 *
 * With fsize, the file may not grow beyond that many bytes (RLIMIT_FSIZE, SIGXFSZ ignored: a
 * write past it fails with EFBIG, as on a full disk): a PROCESS, then events of changing sizes
 * and addresses until a write fails and 1,000 more, then the close (reason exit asked). Prints
 * {"error": errno of the failed write, "written": the events the writer says reached the file,
 * "events": the events handed over}.
 *
 * With deep (the size classes' lists of recent frees, 128 deep since format version 3): a
 * PROCESS, then three rounds on one thread of 300 blocks of 24 bytes (one size class) allocated,
 * all freed in allocation order, and allocated again at (i * 7) % 300 (the first ones beyond the
 * list's depth, the others at indices up to 127), and 300 unrelated large blocks; the
 * class lists persist across rounds. Then the close. Prints {"events": the events handed over}.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "format/heaplog.h"
#include "trace.h"
#include "writer.h"

static hh_writer *g_w;
static uint64_t g_pos;
static const char *g_sep = "";

/* Hands one ring record to the writer, as hh_ring_read does. */
static void emit(unsigned type, void *record, uint32_t len) {
    len = (uint32_t)hh_round8(len);
    *(uint64_t *)record = (uint64_t)len | ((uint64_t)type << 24) | ((g_pos / 8) << 32);
    hh_writer_record(g_w, g_pos, type, record, len);
    g_pos += len;
}

#define MONO_START 5000000000ull
#define T(ns) (MONO_START + (ns))

static void event(uint64_t buf[16], uint8_t op, uint64_t time, uint32_t tid, uint32_t stack,
                  uint64_t addr, uint64_t size, uint64_t old, uint64_t count, uint64_t align,
                  uint64_t weight, uint64_t duration, int split) {
    memset(buf, 0, 16 * sizeof *buf);
    hh_rec_event *e = (hh_rec_event *)buf;
    hh_rec_event_extra *x = (hh_rec_event_extra *)(e + 1);
    e->time = time;
    e->tid = tid;
    e->stack = stack;
    e->addr = addr;
    e->size = size;
    e->op = op;
    e->flags = HH_EV_EXTRA | (split ? HH_EV_SPLIT : 0);
    *x = (hh_rec_event_extra){old, count, align, weight, duration};
    emit(HH_REC_EVENT, e, sizeof *e + sizeof *x);
    printf(
        "%s{\"op\":%u,\"time\":%llu,\"tid\":%u,\"stack\":%u,\"addr\":%llu,\"size\":%llu,"
        "\"old\":%llu,\"count\":%llu,\"align\":%llu,\"weight\":%llu,\"duration\":%llu,"
        "\"split\":%d}",
        g_sep, op, (unsigned long long)time, tid, stack, (unsigned long long)addr,
        (unsigned long long)size, (unsigned long long)old, (unsigned long long)count,
        (unsigned long long)align, (unsigned long long)weight, (unsigned long long)duration, split);
    g_sep = ",";
}

/* A PROCESS of the fsize and deep modes: no flags, the exe, then cmdline (cmdline_len bytes,
 * NUL-separated, may be 0). */
static void emit_plain_process(uint32_t pid, const char *exe, const char *cmdline,
                               uint32_t cmdline_len, int codec) {
    uint64_t buf[16];
    const uint32_t exe_len = (uint32_t)strlen(exe);
    hh_rec_process *p = (hh_rec_process *)buf;
    memset(buf, 0, sizeof buf);
    *p = (hh_rec_process){.pid = pid,
                          .ppid = pid - 1,
                          .mono_start = MONO_START,
                          .time_unit = 1,
                          .compress = (uint32_t)codec,
                          .exe_len = exe_len,
                          .cmdline_len = cmdline_len};
    memcpy(p + 1, exe, exe_len);
    memcpy((char *)(p + 1) + exe_len, cmdline, cmdline_len);
    emit(HH_REC_PROCESS, p, sizeof *p + exe_len + cmdline_len);
}

/* fsize mode (see the top). */
static int fill(const char *path, int codec, long limit) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit r = {(rlim_t)limit, (rlim_t)limit};
    if (setrlimit(RLIMIT_FSIZE, &r) != 0) {
        perror("setrlimit");
        return 1;
    }
    g_w = hh_writer_open_file(path, NULL, 0);
    if (g_w == NULL) {
        printf("{\"open\":%d}\n", errno);
        return 0;
    }
    uint64_t buf[16];
    emit_plain_process(4343, "/usr/bin/fill", "fill", 5, codec);
    uint64_t events = 0, after = 0, x = 88172645463325252ull;
    while (after < 1000 && events < 50000000) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: sizes and addresses vary */
        memset(buf, 0, sizeof buf);
        hh_rec_event *e = (hh_rec_event *)buf;
        e->time = T(events * 10);
        e->tid = 9001;
        e->addr = 0x555500000000ull + ((x >> 20) & 0xffffff) * 16;
        e->size = 1 + (x & 0xfff);
        e->op = HH_OP_MALLOC;
        emit(HH_REC_EVENT, e, sizeof *e);
        events++;
        if (hh_writer_error(g_w) != 0) after++;
    }
    int error = 0;
    uint64_t written = hh_writer_close(g_w, HH_END_EXIT, 0, &error);
    printf("{\"error\":%d,\"written\":%llu,\"events\":%llu}\n", error, (unsigned long long)written,
           (unsigned long long)events);
    return 0;
}

/* deep mode (see the top). */
static int deep(const char *path, int codec) {
    g_w = hh_writer_open_file(path, NULL, 0);
    if (g_w == NULL) return perror(path), 1;
    uint64_t buf[16];
    emit_plain_process(4444, "/usr/bin/deep", "", 0, codec);
    uint64_t events = 0;
    for (uint64_t r = 0; r < 3; r++) {
        const uint64_t a = 0x5555000010a0ull + r * 0x100000;
        for (uint64_t k = 0; k < 4 * 300; k++) {
            uint64_t i = k % 300, phase = k / 300; /* 3: unrelated blocks, padding */
            memset(buf, 0, sizeof buf);
            hh_rec_event *e = (hh_rec_event *)buf;
            e->time = T(events * 10);
            e->tid = 9001;
            e->op = phase == 1 ? HH_OP_FREE : HH_OP_MALLOC;
            e->size = phase == 1 ? 0 : phase == 3 ? 5000 + i : 24;
            e->addr = phase == 2   ? a + (i * 7) % 300 * 0x20
                      : phase == 3 ? 0x7000000000ull + (events << 13)
                                   : a + i * 0x20;
            emit(HH_REC_EVENT, e, sizeof *e);
            events++;
        }
    }
    hh_writer_close(g_w, HH_END_EXIT, 0, NULL);
    printf("{\"events\":%llu}\n", (unsigned long long)events);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[3], "deep") == 0) {
        hh_writer_prepare(atoi(argv[2]));
        return deep(argv[1], atoi(argv[2]));
    }
    if (argc == 5 && strcmp(argv[3], "fsize") == 0) {
        hh_writer_prepare(atoi(argv[2]));
        return fill(argv[1], atoi(argv[2]), atol(argv[4]));
    }
    if (argc != 3) return 64;
    int codec = atoi(argv[2]);
    hh_writer_prepare(codec);
    g_w = hh_writer_open_file(argv[1], NULL, 0);
    if (g_w == NULL) {
        perror(argv[1]);
        return 1;
    }
    uint64_t buf[64];

    /* PROCESS: exe, then the arguments separated (and ended) by NUL */
    static const char exe[] = "/usr/bin/roundtrip";
    static const char cmdline[] = "roundtrip\0--flag\0value with spaces";
    hh_rec_process *p = (hh_rec_process *)buf;
    memset(buf, 0, sizeof buf);
    *p = (hh_rec_process){.pid = 4242,
                          .ppid = 4241,
                          .mono_start = MONO_START,
                          .real_start = 1764000000123456789ull,
                          .clock = 0,
                          .flags = HH_PF_STACKS | HH_PF_TIMING | HH_PF_SAMPLING | HH_PF_DROP |
                                   HH_PF_FREE_STACKS | HH_PF_FORK_CHILD | HH_PF_VM,
                          .stack_depth = 48,
                          .sample_bytes = 4096,
                          .time_unit = 1,
                          .compress = (uint32_t)codec,
                          .exe_len = sizeof exe - 1,
                          .cmdline_len = sizeof cmdline};
    memcpy(p + 1, exe, sizeof exe - 1);
    memcpy((char *)(p + 1) + sizeof exe - 1, cmdline, sizeof cmdline);
    emit(HH_REC_PROCESS, p, sizeof *p + sizeof exe - 1 + sizeof cmdline);
    printf(
        "{\"process\":{\"pid\":%u,\"ppid\":%u,\"mono_start\":%llu,\"real_start\":%llu,"
        "\"flags\":%u,\"stack_depth\":%u,\"sample_bytes\":%llu,\"time_unit\":%u,"
        "\"version\":\"%s\",\"exe\":\"%s\",\"argv\":[\"roundtrip\",\"--flag\","
        "\"value with spaces\"]},",
        p->pid, p->ppid, (unsigned long long)p->mono_start, (unsigned long long)p->real_start,
        p->flags, p->stack_depth, (unsigned long long)p->sample_bytes, p->time_unit,
        HH_TRACE_VERSION, exe);

    /* MODULE: a 20-byte build id */
    static const char path[] = "/usr/lib/libroundtrip.so";
    hh_rec_module *m = (hh_rec_module *)buf;
    memset(buf, 0, sizeof buf);
    *m = (hh_rec_module){.base = 0x7f1234560000ull,
                         .lo = 0x1000,
                         .hi = 0x9000,
                         .build_id_len = 20,
                         .path_len = sizeof path - 1};
    uint8_t *bytes = (uint8_t *)(m + 1);
    printf("\"module\":{\"base\":%llu,\"lo\":%llu,\"hi\":%llu,\"build_id\":\"",
           (unsigned long long)m->base, (unsigned long long)m->lo, (unsigned long long)m->hi);
    for (int i = 0; i < 20; i++) {
        bytes[i] = (uint8_t)(0xa0 + i * 3);
        printf("%02x", bytes[i]);
    }
    memcpy(bytes + 20, path, sizeof path - 1);
    emit(HH_REC_MODULE, m, sizeof *m + 20 + sizeof path - 1);
    printf("\",\"path\":\"%s\"},", path);

    /* two NODEs: an outer frame and a frame it called */
    printf("\"nodes\":[");
    for (uint32_t id = 1; id <= 2; id++) {
        hh_rec_node *n = (hh_rec_node *)buf;
        *n = (hh_rec_node){.id = id, .parent = id - 1, .pc = 0x7f1234561000ull + id * 0x24};
        emit(HH_REC_NODE, n, sizeof *n);
        printf("%s{\"id\":%u,\"parent\":%u,\"pc\":%llu}", id == 1 ? "" : ",", n->id, n->parent,
               (unsigned long long)n->pc);
    }
    printf("],\"events\":[");

    /* every operation, on threads 7001 and 7002 */
    const uint64_t a = 0x5555000010a0ull;
    event(buf, HH_OP_MALLOC, T(1000), 7001, 2, a, 40, 0, 0, 0, 40, 11, 0);
    event(buf, HH_OP_CALLOC, T(2000), 7001, 2, a + 0x40, 24, 0, 3, 0, 72, 12, 0);
    event(buf, HH_OP_REALLOC, T(3000), 7002, 1, a + 0x1000, 4000, a, 0, 0, 4000, 13, 1);
    event(buf, HH_OP_REALLOC_DONE, T(3100), 7002, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    event(buf, HH_OP_REALLOCARRAY, T(4000), 7001, 1, a + 0x2000, 16, a + 0x40, 5, 0, 80, 14, 0);
    event(buf, HH_OP_POSIX_MEMALIGN, T(5000), 7001, 2, a + 0x3000, 100, 0, 0, 64, 100, 15, 0);
    event(buf, HH_OP_MEMALIGN, T(6000), 7002, 2, a + 0x4000, 200, 0, 0, 128, 200, 16, 0);
    event(buf, HH_OP_ALIGNED_ALLOC, T(7000), 7002, 1, a + 0x5000, 256, 0, 0, 256, 256, 17, 0);
    event(buf, HH_OP_VALLOC, T(8000), 7001, 1, a + 0x6000, 300, 0, 0, 0, 300, 18, 0);
    event(buf, HH_OP_PVALLOC, T(9000), 7001, 2, a + 0x8000, 5000, 0, 0, 0, 5000, 19, 0);
    event(buf, HH_OP_FREE, T(10000), 7002, 2, a + 0x3000, 0, 0, 0, 0, 0, 20, 0);
    printf("],");

    /* VM_MAPPED and VM_UNMAPPED */
    printf("\"vm\":[");
    for (int k = 0; k < 2; k++) {
        uint32_t mapped = k == 0;
        hh_rec_vm *v = (hh_rec_vm *)buf;
        *v = (hh_rec_vm){.time = T(11000 + 1000 * (uint64_t)k),
                         .tid = 7001,
                         .stack = 2 - (uint32_t)k,
                         .mapped = mapped,
                         .addr = 0x7f0000200000ull,
                         .size = mapped ? 0x200000 : 0x100000};
        emit(HH_REC_VM, v, sizeof *v);
        printf(
            "%s{\"mapped\":%u,\"time\":%llu,\"tid\":%u,\"stack\":%u,\"addr\":%llu,"
            "\"size\":%llu}",
            k == 0 ? "" : ",", mapped, (unsigned long long)v->time, v->tid, v->stack,
            (unsigned long long)v->addr, (unsigned long long)v->size);
    }
    printf("],");

    /* RT_VIOLATION: a site's first call (with its stack), then its count at exit; the thread
     * 7003 is new here, so the record declares it. A name of the whole field (no NUL). */
    printf("\"rt\":[");
    for (int k = 0; k < 2; k++) {
        hh_rec_rt *r = (hh_rec_rt *)buf;
        *r = (hh_rec_rt){.time = T(12000 + 100 * (uint64_t)k),
                         .tid = 7003,
                         .stack = 2,
                         .site = 5,
                         .policy = 1,
                         .priority = 80,
                         .count = k == 0 ? 1 : 1234567};
        memcpy(r->call, "pthread_cond_timedwait", sizeof "pthread_cond_timedwait");
        memcpy(r->thread_name, "control_loop_15", 16);
        emit(HH_REC_RT, r, sizeof *r);
        printf(
            "%s{\"time\":%llu,\"tid\":7003,\"stack\":2,\"site\":5,\"call\":"
            "\"pthread_cond_timedwait\",\"thread_name\":\"control_loop_15\",\"policy\":1,"
            "\"priority\":80,\"count\":%llu}",
            k == 0 ? "" : ",", (unsigned long long)r->time, (unsigned long long)r->count);
    }
    printf("],");

    hh_rec_leak *l = (hh_rec_leak *)buf;
    *l = (hh_rec_leak){.check = 1, .type = 0, .ptr = a + 0x8000, .size = 5000};
    emit(HH_REC_LEAK, l, sizeof *l);
    printf("\"leak\":{\"check\":1,\"ptr\":%llu,\"size\":5000},", (unsigned long long)l->ptr);

    hh_rec_leak_check *c = (hh_rec_leak_check *)buf;
    *c = (hh_rec_leak_check){.check = 1,
                             .trigger = HH_TRIGGER_SIGNAL,
                             .time = T(13000),
                             .live = 6,
                             .leaked = 1,
                             .leaked_bytes = 5000,
                             .reachable = 5,
                             .reachable_bytes = 4632,
                             .duration_ns = 777};
    emit(HH_REC_LEAK_CHECK, c, sizeof *c);
    printf(
        "\"leak_check\":{\"check\":1,\"trigger\":%u,\"time\":%llu,\"live\":6,\"leaked\":1,"
        "\"leaked_bytes\":5000,\"reachable\":5,\"reachable_bytes\":4632,\"duration_ns\":777},",
        c->trigger, (unsigned long long)c->time);

    hh_rec_exit *x = (hh_rec_exit *)buf;
    *x = (hh_rec_exit){.time = T(14000)};
    emit(HH_REC_EXIT, x, sizeof *x);
    hh_writer_close(g_w, HH_END_DETACH, 7, NULL);
    printf("\"end\":{\"reason\":%u,\"dropped\":7,\"events\":10}}\n", HH_END_DETACH);
    return 0;
}
