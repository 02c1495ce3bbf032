/*
 * field_roundtrip.c — every field of the table of event fields (native/format/fields.h), and a
 * synthetic one added through it (synthetic_field.h), written by the tracer's encoder
 * (native/track/writer.c) and read back by the report's decoder (native/analyze/), both
 * compiled with the synthetic field: encode -> decode -> the same values.
 *
 *   hh_test_field_roundtrip <log path>
 *   hh_test_field_roundtrip <log path> deep
 *   hh_test_field_roundtrip <log path> recent
 *
 * Writes a stored (uncompressed) log of 2,000 events of every operation on two threads, with
 * durations, weights and free stacks, then reads its blocks and runs the decoder over them. For
 * every event, every field the table says it carries must come back as written. Prints
 * "<events> events, <fields> fields, <synthetic> synthetic values" and exits 0, or prints each
 * difference and exits 1.
 *
 * With `deep`: the size classes' lists of recent frees, 128 deep since format version 3. On one
 * thread, DEEP_BLOCKS blocks of 24 bytes (one size class), all freed in allocation order, then
 * allocated again at the addresses (i * DEEP_STRIDE) % DEEP_BLOCKS: the first ones are beyond the
 * list's depth (explicit addresses), the others at indices up to 127 of the list, and the list
 * shrinks as they leave it. Three rounds, so the references cross block boundaries too.
 *
 * With `recent`: the list of recent frees, 16,384 deep since format version 4. RECENT_BLOCKS
 * blocks of 24 bytes allocated and freed in allocation order, then allocated again as 40-byte
 * blocks (another size class, whose list is empty) at (i * DEEP_STRIDE) % RECENT_BLOCKS: the
 * blocks freed in the last HH_RECENT frees can be coded from the list, the first
 * RECENT_BLOCKS - HH_RECENT only explicitly. Also prints how the new blocks' addresses were
 * coded: "<n> recent (<m> deeper than 64), <k> explicit".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/scan.h"
#include "format/fields.h"
#include "format/heaplog.h"
#include "trace.h"
#include "writer.h"

#define EVENTS 2000
#define DEEP_BLOCKS 300
#define DEEP_STRIDE 7 /* coprime with DEEP_BLOCKS: every block once */
#define DEEP_ROUNDS 3
#define RECENT_BLOCKS 17000
#define TABLE_CAP (3 * RECENT_BLOCKS) /* events the tables hold: the largest mode's */
_Static_assert(DEEP_ROUNDS * 3 * DEEP_BLOCKS <= TABLE_CAP, "the deep rounds fit the event tables");
_Static_assert(RECENT_BLOCKS > HH_RECENT, "some blocks are out of the recent list's reach");
#define PROCESS_FLAGS (HH_PF_STACKS | HH_PF_TIMING | HH_PF_SAMPLING | HH_PF_FREE_STACKS)

static hh_field_values g_written[TABLE_CAP];
static uint8_t g_written_op[TABLE_CAP];
static size_t g_written_n, g_decoded_n, g_fields, g_synthetic, g_wrong;

/* The writer's source of the synthetic field: a value of every length, from the event. */
void synthetic_source(const struct hh_rec_event *e, hh_field_values *f) {
    uint64_t k = g_written_n;
    f->synthetic = (k * 0x9e3779b97f4a7c15ull) >> (k % 53); /* up to 2^53 and beyond */
    if (f->synthetic > HH_MAX_EXACT) f->synthetic >>= 11;
    g_written_op[g_written_n] = ((const hh_rec_event *)e)->op;
    g_written[g_written_n++] = *f;
}

/* The decoder's fields of an event against the values the writer encoded. */
void synthetic_tap(int op, const hh_field_decoded *f) {
    size_t k = g_decoded_n++;
    if (k >= g_written_n || g_written_op[k] != op) {
        printf("event %zu: op %d decoded, %d written\n", k, op,
               k < g_written_n ? g_written_op[k] : -1);
        g_wrong++;
        return;
    }
    const hh_field_values *w = &g_written[k];
#define COMPARE(name, coding, ops, flag)                                                \
    if (HH_FIELD_CARRIED(op, PROCESS_FLAGS, ops, flag)) {                               \
        g_fields++;                                                                     \
        if ((double)w->name != (double)f->name) {                                       \
            printf("event %zu (op %d): %s written %llu, decoded %.17g\n", k, op, #name, \
                   (unsigned long long)w->name, (double)f->name);                       \
            g_wrong++;                                                                  \
        }                                                                               \
    }
    HH_EVENT_FIELDS(COMPARE)
#undef COMPARE
    if (HH_FIELD_CARRIED(op, PROCESS_FLAGS, HH_OPS_CALLS, 0)) g_synthetic++;
}

static hh_writer *g_w;
static uint64_t g_pos;
/* The new blocks' address codes (FORMAT.md, "Addresses"), counted in the addr stream. */
static size_t g_recent_codes, g_recent_deep, g_explicit_codes;

static void emit(unsigned type, void *record, uint32_t len) {
    len = (uint32_t)hh_round8(len);
    *(uint64_t *)record = (uint64_t)len | ((uint64_t)type << 24) | ((g_pos / 8) << 32);
    hh_writer_record(g_w, g_pos, type, record, len);
    g_pos += len;
}

static void event(uint8_t op, uint64_t time, uint32_t tid, uint64_t addr, uint64_t size,
                  uint64_t old, uint64_t count, uint64_t align, int split) {
    uint64_t buf[16] = {0};
    hh_rec_event *e = (hh_rec_event *)buf;
    hh_rec_event_extra *x = (hh_rec_event_extra *)(e + 1);
    *e = (hh_rec_event){.time = time,
                        .tid = tid,
                        .stack = 1 + (uint32_t)(time % 3),
                        .addr = addr,
                        .size = size,
                        .op = op,
                        .flags = HH_EV_EXTRA | (split ? HH_EV_SPLIT : 0)};
    *x = (hh_rec_event_extra){old, count, align, size * count / 2 + 1, time % 977 + 3};
    emit(HH_REC_EVENT, e, sizeof *e + sizeof *x);
}

static uint64_t varint(const uint8_t *b, size_t *p) {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        uint8_t byte = b[(*p)++];
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (byte < 0x80) return v;
    }
}

/* Reads the stored log's blocks and runs the decoder over each. */
static int decode(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return perror(path), 1;
    static uint8_t file[1 << 22];
    size_t n = fread(file, 1, sizeof file, f);
    fclose(f);
    hh_scan *s = hh_scan_new(64, 1e6);
    if (s == NULL) return 1;
    hh_scan_set_flags(s, PROCESS_FLAGS | HH_PF_DEEP_CLASSES | HH_PF_DEEP_RECENT,
                      1); /* as the writer writes them */
    hh_scan_set_thread(s, 1, 7001);
    hh_scan_set_thread(s, 2, 7002);
    for (size_t at = HH_FILE_HEADER_SIZE; at + HH_BLOCK_HEADER_SIZE <= n;) {
        uint32_t length;
        memcpy(&length, file + at, 4);
        if (length & (HH_BLOCK_DEFLATED | HH_BLOCK_ZSTD)) return puts("not a stored block"), 1;
        const uint8_t *payload = file + at + HH_BLOCK_HEADER_SIZE;
        at += HH_BLOCK_HEADER_SIZE + (length & HH_BLOCK_LENGTH);
        size_t p = 0;
        if (varint(payload, &p) != HH_STREAM_COUNT) return puts("bad stream table"), 1;
        size_t pos[HH_STREAM_COUNT], end[HH_STREAM_COUNT], lengths[HH_STREAM_COUNT];
        for (int i = 0; i < HH_STREAM_COUNT; i++) lengths[i] = varint(payload, &p);
        for (int i = 0; i < HH_STREAM_COUNT; i++) {
            pos[i] = p;
            p += lengths[i];
            end[i] = p;
        }
        for (size_t q = pos[HH_STREAM_ADDR], m = pos[HH_STREAM_ADDR_MORE];
             q < end[HH_STREAM_ADDR];) {
            uint64_t v = payload[q++]; /* a split varint: the bytes after the first in addr_more */
            if (v >= 0x80) v = (v & 0x7f) | varint(payload, &m) << 7;
            if (v & 1) g_explicit_codes++;
            if (v % 4 == 2 && v > 2) {
                g_recent_codes++;
                g_recent_deep += (v - 2) / 4 - 1 >= HH_RECENT_V3;
            }
        }
        hh_scan_start_block(s, HH_STREAM_COUNT);
        for (;;) {
            int status = hh_scan_run(s, payload, pos, end);
            if (status == HH_SCAN_BLOCK_END) break;
            if (status != HH_SCAN_RECORD) return printf("decoder: %s\n", hh_scan_error(s)), 1;
            pos[HH_STREAM_TAG]++; /* a declaration: its fields (decl stream) are not needed here */
        }
    }
    hh_scan_free(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2 &&
        !(argc == 3 && (strcmp(argv[2], "deep") == 0 || strcmp(argv[2], "recent") == 0)))
        return 64;
    const bool deep = argc == 3 && argv[2][0] == 'd', recent = argc == 3 && argv[2][0] == 'r';
    hh_writer_prepare(HH_CODEC_NONE);
    g_w = hh_writer_open_file(argv[1], NULL, 0);
    if (g_w == NULL) return perror(argv[1]), 1;
    static const char exe[] = "/usr/bin/fields";
    uint64_t buf[64] = {0};
    hh_rec_process *pr = (hh_rec_process *)buf;
    *pr = (hh_rec_process){.pid = 4242,
                           .ppid = 1,
                           .mono_start = 1000,
                           .real_start = 1,
                           .flags = PROCESS_FLAGS,
                           .stack_depth = 48,
                           .sample_bytes = 64,
                           .time_unit = 1,
                           .compress = HH_CODEC_NONE,
                           .exe_len = sizeof exe - 1};
    memcpy(pr + 1, exe, sizeof exe - 1);
    emit(HH_REC_PROCESS, pr, sizeof *pr + sizeof exe - 1);
    for (uint32_t id = 1; id <= 3; id++) {
        hh_rec_node *node = (hh_rec_node *)buf;
        *node = (hh_rec_node){.id = id, .parent = id - 1, .pc = 0x401000 + id * 16};
        emit(HH_REC_NODE, node, sizeof *node);
    }
    /* Rounds of every operation: each allocates, reallocs and frees blocks of its own. */
    const uint64_t base = 0x5555000010a0ull;
    uint64_t t = 2000;
    for (int r = 0; deep && r < DEEP_ROUNDS; r++) {
        const uint64_t a = base + (uint64_t)r * 0x100000;
        for (uint64_t i = 0; i < DEEP_BLOCKS; i++)
            event(HH_OP_MALLOC, t += 10, 7001, a + i * 0x20, 24, 0, 0, 0, 0);
        for (uint64_t i = 0; i < DEEP_BLOCKS; i++)
            event(HH_OP_FREE, t += 10, 7001, a + i * 0x20, 0, 0, 0, 0, 0);
        for (uint64_t i = 0; i < DEEP_BLOCKS; i++)
            event(HH_OP_MALLOC, t += 10, 7001, a + (i * DEEP_STRIDE) % DEEP_BLOCKS * 0x20, 24, 0, 0,
                  0, 0);
    }
    for (uint64_t i = 0; recent && i < RECENT_BLOCKS; i++)
        event(HH_OP_MALLOC, t += 10, 7001, base + i * 0x20, 24, 0, 0, 0, 0);
    for (uint64_t i = 0; recent && i < RECENT_BLOCKS; i++)
        event(HH_OP_FREE, t += 10, 7001, base + i * 0x20, 0, 0, 0, 0, 0);
    for (uint64_t i = 0; recent && i < RECENT_BLOCKS; i++)
        event(HH_OP_MALLOC, t += 10, 7001, base + (i * DEEP_STRIDE) % RECENT_BLOCKS * 0x20, 40, 0,
              0, 0, 0);
    for (int r = 0; !deep && !recent && g_written_n + 12 <= EVENTS; r++) {
        uint64_t a = base + (uint64_t)r * 0x10000;
        uint32_t tid = 7001 + (uint32_t)(r & 1);
        uint64_t sz = 1 + ((uint64_t)r * 37) % 5000;
        event(HH_OP_MALLOC, t += 10, tid, a, sz, 0, 0, 0, 0);
        event(HH_OP_CALLOC, t += 10, tid, a + 0x1000, 24, 0, 1 + (uint64_t)r % 9, 0, 0);
        event(HH_OP_REALLOC, t += 10, tid, a + 0x2000, sz * 2, a, 0, 0, 1);
        event(HH_OP_REALLOC_DONE, t += 10, tid, 0, 0, 0, 0, 0, 0);
        event(HH_OP_REALLOCARRAY, t += 10, tid, a + 0x3000, 16, a + 0x1000, 5, 0, 0);
        event(HH_OP_POSIX_MEMALIGN, t += 10, tid, a + 0x4000, sz, 0, 0, 64, 0);
        event(HH_OP_MEMALIGN, t += 10, tid, a + 0x5000, 200, 0, 0, 128, 0);
        event(HH_OP_ALIGNED_ALLOC, t += 10, tid, a + 0x6000, 256, 0, 0, 256, 0);
        event(HH_OP_VALLOC, t += 10, tid, a + 0x7000, 300, 0, 0, 0, 0);
        event(HH_OP_PVALLOC, t += 10, tid, a + 0x9000, 5000, 0, 0, 0, 0);
        event(HH_OP_FREE, t += 10, tid, a + 0x4000, 0, 0, 0, 0, 0);
        event(HH_OP_REALLOC, t += 10, tid, 0, sz, a + 0x2000, 0, 0, 0); /* failed: keeps it */
    }
    hh_writer_close(g_w, HH_END_EXIT, 0, NULL);
    if (decode(argv[1]) != 0) return 1;
    if (g_decoded_n != g_written_n) {
        printf("%zu events written, %zu decoded\n", g_written_n, g_decoded_n);
        g_wrong++;
    }
    printf("%zu events, %zu fields, %zu synthetic values\n", g_decoded_n, g_fields, g_synthetic);
    if (recent)
        printf("%zu recent (%zu deeper than %d), %zu explicit\n", g_recent_codes, g_recent_deep,
               HH_RECENT_V3, g_explicit_codes);
    return g_wrong == 0 ? 0 : 1;
}
