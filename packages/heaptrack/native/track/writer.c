/*
 * writer.c — the log encoder (FORMAT.md). Records are varint/zigzag encoded with deltas and
 * gathered into blocks of at most HH_BLOCK_TARGET bytes; each block is written with its length
 * and CRC-32 so a reader can tell a damaged or truncated log from a good one and decode
 * everything before the damage. Delta state restarts at every block.
 *
 * A write that fails (a full disk, EIO, the file size limit) ends the log there: the part of
 * the block that reached the file is cut off again, so the file holds whole blocks only, and
 * nothing more is written but, at close, an END record with reason HH_END_WRITE_ERROR and the
 * count of the events in those blocks (when even that does not fit, the log ends without END).
 */
#include "writer.h"

#include "format/fields.h"
#include "writer_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "format/heaplog.h"
#include "trace.h"

static uint64_t hh_clock_ns(void);
static __attribute__((noinline, cold)) void hh_calibrate(hh_writer *w);

/* CRC-32 of a block (IEEE 802.3): zlib's, which is table-driven by words (and folded with
 * carry-less multiplication where the CPU has it), several times faster than a byte loop. */
static uint32_t hh_crc32(const uint8_t *p, size_t n) {
    return (uint32_t)crc32(0L, p, (uInt)n);
}

/* Returns 0, or the errno of the write that failed (a short write is retried first). */
static int hh_write_fully(int fd, const void *data, size_t len) {
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A write failed: the file is cut back to its whole blocks (what a partial write added is
 * dropped, which also gives a full disk that room back) and nothing more is written. */
static void hh_write_failed(hh_writer *w, int error) {
    if (w->error == 0) w->error = error;
    int saved = errno;
    if (ftruncate(w->fd, (off_t)w->size) == 0) lseek(w->fd, (off_t)w->size, SEEK_SET);
    errno = saved;
}

/* ---- encoding ---------------------------------------------------------------------------- */

static void hh_put_u8(hh_writer *w, int s, uint8_t v) {
    w->sbuf[s][w->slen[s]++] = v;
    w->len++;
}

static void hh_put_var(hh_writer *w, int s, uint64_t v) {
    uint8_t *b = w->sbuf[s];
    uint32_t n = w->slen[s], start = n;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    w->slen[s] = n;
    w->len += n - start;
}

/* A varint of a split stream (num, addr, old: heaplog.h): its first byte in stream s, the
 * others, if any, in stream more. */
static inline void hh_put_split(hh_writer *w, int s, int more, uint64_t v) {
    if (v < 0x80) {
        hh_put_u8(w, s, (uint8_t)v);
        return;
    }
    hh_put_u8(w, s, (uint8_t)(v | 0x80));
    hh_put_var(w, more, v >> 7);
}
#define HH_PUT_NUM_VAR(v) hh_put_split(w, HH_STREAM_NUM, HH_STREAM_NUM_MORE, v)
#define HH_PUT_ADDR_VAR(v) hh_put_split(w, HH_STREAM_ADDR, HH_STREAM_ADDR_MORE, v)
#define HH_PUT_OLD_VAR(v) hh_put_split(w, HH_STREAM_OLD, HH_STREAM_OLD_MORE, v)

/* A signed value in zigzag form (FORMAT.md, "svarint"). */
static inline uint64_t hh_zigzag(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static void hh_put_svar(hh_writer *w, int s, int64_t v) {
    hh_put_var(w, s, hh_zigzag(v));
}

static void hh_put_bytes(hh_writer *w, int s, const void *p, uint32_t n) {
    hh_put_var(w, s, n);
    memcpy(w->sbuf[s] + w->slen[s], p, n);
    w->slen[s] += n;
    w->len += n;
}

/* The payload of a block: the number of streams, their lengths, then the streams. */
static uint32_t hh_assemble(hh_writer *w) {
    uint32_t n = 0;
    w->buf[n++] = HH_STREAM_COUNT;
    for (int s = 0; s < HH_STREAM_COUNT; s++) {
        uint64_t v = w->slen[s];
        while (v >= 0x80) {
            w->buf[n++] = (uint8_t)(v | 0x80);
            v >>= 7;
        }
        w->buf[n++] = (uint8_t)v;
    }
    for (int s = 0; s < HH_STREAM_COUNT; s++) {
        memcpy(w->buf + n, w->sbuf[s], w->slen[s]);
        n += w->slen[s];
    }
    return n;
}

static void hh_block_reset(hh_writer *w) {
    w->len = 0;
    memset(w->slen, 0, sizeof w->slen);
    w->prev_time = 0;
    w->prev_addr = 0;
    w->prev_pc = 0;
    w->prev_node = 0;
    w->prev_thread = 0;
    w->block_no++;
}

static uint64_t hh_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define HH_FLUSH_NS 500000000ull
#define HH_CALIBRATE_NS 1000000000ull /* the TSC's final calibration, after the process start */

void hh_writer_tick(hh_writer *w) {
    if (w->tsc && w->calibrated == 1 && hh_clock_ns() - w->start >= HH_CALIBRATE_NS)
        hh_calibrate(w);
    if (w->len == 0) return;
    uint64_t now = hh_mono_ns();
    if (now - w->last_flush >= HH_FLUSH_NS) hh_writer_flush(w);
}

int hh_writer_due_ms(const hh_writer *w) {
    uint64_t due = UINT64_MAX;
    if (w->tsc && w->calibrated == 1) due = w->start + HH_CALIBRATE_NS; /* hh_clock_ns's clock */
    uint64_t wait = UINT64_MAX;
    if (due != UINT64_MAX) {
        uint64_t now = hh_clock_ns();
        wait = due > now ? due - now : 0;
    }
    if (w->len != 0) {
        uint64_t now = hh_mono_ns(), flush = w->last_flush + HH_FLUSH_NS;
        uint64_t left = flush > now ? flush - now : 0;
        if (left < wait) wait = left;
    }
    if (wait == UINT64_MAX) return -1;
    uint64_t ms = (wait + 999999) / 1000000; /* rounded up: the tick then finds it due */
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Writes one block: its length word (len, with the codec's flag), CRC and stored bytes. */
static void hh_write_block(hh_writer *w, const uint8_t *payload, uint32_t len, uint32_t stored) {
    uint8_t head[8];
    uint32_t crc = hh_crc32(payload, stored);
    memcpy(head, &len, 4); /* little endian: x86-64 and aarch64 */
    memcpy(head + 4, &crc, 4);
    int error = hh_write_fully(w->fd, head, 8);
    if (error == 0) error = hh_write_fully(w->fd, payload, stored);
    if (error != 0) {
        hh_write_failed(w, error);
        return;
    }
    w->size += 8 + (uint64_t)stored;
    w->written = w->events;
}

void hh_writer_flush(hh_writer *w) {
    w->last_flush = hh_mono_ns();
    if (w->len == 0) return;
    if (w->error != 0) { /* the log ended at a failed write: the block is dropped */
        hh_block_reset(w);
        return;
    }
    uint32_t raw = hh_assemble(w);
    const uint8_t *payload = w->buf;
    uint32_t len = raw, stored = raw;
    if (w->compress == HH_CODEC_ZSTD && !hh_zstd_ready()) w->compress = HH_CODEC_DEFLATE;
    uint32_t z = 0;
    if (w->compress == HH_CODEC_ZSTD) {
        /* always stored compressed: the stream's history must hold every block */
        z = hh_zstd_block(w, raw);
        if (z > 0) {
            len = z | HH_BLOCK_ZSTD;
        } else {
            w->compress = HH_CODEC_DEFLATE;
        }
    }
    if (w->compress == HH_CODEC_DEFLATE) {
        z = hh_deflate(w, raw);
        if (z > 0) len = z | HH_BLOCK_DEFLATED;
    }
    if (z > 0) {
        payload = w->zbuf;
        stored = z;
    }
    hh_write_block(w, payload, len, stored);
    hh_block_reset(w);
}

/* Makes room for a record of at most need bytes. No stream holds more than w->len bytes, so
 * len + need within a stream's capacity leaves room in every stream. */
static void hh_room(hh_writer *w, uint32_t need) {
    if (w->len >= HH_BLOCK_TARGET || w->len + need > HH_STREAM_CAP) hh_writer_flush(w);
}

static hh_thread_slot *hh_thread_lookup(hh_writer *w, uint32_t tid);

/* The slot of a thread (declared in the log on first use); most records are by the thread
 * of the record before. */
static hh_thread_slot *hh_thread(hh_writer *w, uint32_t tid) {
    hh_thread_slot *last = w->last_thread;
    if (HH_LIKELY(last != NULL && last->tid == tid)) return last;
    return w->last_thread = hh_thread_lookup(w, tid);
}

static hh_thread_slot *hh_thread_lookup(hh_writer *w, uint32_t tid) {
    uint32_t mask = HH_THREADS_CAP - 1;
    uint32_t i = (tid * 2654435761u) & mask;
    for (uint32_t n = 0; n < HH_THREADS_CAP; n++, i = (i + 1) & mask) {
        hh_thread_slot *s = &w->threads[i];
        if (s->tid == tid) return s;
        if (s->tid == 0) {
            if (w->threads_used + 1 >= HH_THREADS_CAP) break;
            s->tid = tid;
            s->index = ++w->threads_used;
            s->block = 0;
            hh_put_u8(w, HH_STREAM_TAG, HH_TAG_THREAD);
            hh_put_var(w, HH_STREAM_DECL, s->index);
            hh_put_var(w, HH_STREAM_DECL, tid);
            return s;
        }
    }
    return &w->threads[0]; /* table full: merged into one thread */
}

#if defined(__x86_64__)
#include <x86intrin.h>
static uint64_t hh_tsc_now(void) {
    return __rdtsc();
}
#else
static uint64_t hh_tsc_now(void) {
    return 0;
}
#endif

static uint64_t hh_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Measures ns per TSC tick against CLOCK_MONOTONIC since the process started: over at least
 * 20 ms (waiting here, in the writer, if the process is younger), then once more after 1 s. */
static void hh_calibrate(hh_writer *w) {
    uint64_t before = hh_tsc_now(), mono = hh_clock_ns(), after = hh_tsc_now();
    uint64_t elapsed = mono - w->start;
    if (w->calibrated == 0 && elapsed < 20000000u) {
        struct timespec ts = {0, (long)(20000000u - elapsed)};
        nanosleep(&ts, NULL);
        before = hh_tsc_now();
        mono = hh_clock_ns();
        after = hh_tsc_now();
        elapsed = mono - w->start;
    }
    uint64_t ticks = before + (after - before) / 2 - w->tsc_start;
    if (ticks == 0) return;
    w->ns_per_tick = (double)elapsed / (double)ticks;
    w->calibrated = elapsed >= 1000000000u ? 2 : 1;
}

/* ns since the process started for an event time (or a duration, with is_duration). Inlined,
 * the calibration out of line: every event converts its time, and as a call this was 4 % of
 * the writer thread's instructions on a churn loop. */
static inline uint64_t hh_event_ns(hh_writer *w, uint64_t raw, bool is_duration) {
    if (!w->tsc) return is_duration ? raw : (raw > w->start ? raw - w->start : 0);
    if (w->calibrated == 0) hh_calibrate(w);
    /* a calibration from a hostile PROCESS record may give any factor: ns stay within the
     * format's exact range (and a double's conversion within its type) */
    double ns = is_duration ? (double)raw * w->ns_per_tick
                            : (double)(int64_t)(raw - w->tsc_start) * w->ns_per_tick;
    if (!(ns < (double)HH_MAX_EXACT)) return HH_MAX_EXACT;
    return ns > 0 ? (uint64_t)ns : 0;
}

static void hh_encode_process(hh_writer *w, const hh_rec_process *p) {
    const char *strings = (const char *)(p + 1);
    uint32_t exe_len = p->exe_len, cmd_len = p->cmdline_len;
    hh_room(w, 128 + exe_len + cmd_len);
    /* This writer's class lists are HH_CLASS_DEPTH deep (the process never sets the flag:
     * hh_writer_check refuses it as unknown). */
    w->flags = p->flags | HH_PF_DEEP_CLASSES | HH_PF_DEEP_RECENT;
    w->start = p->mono_start;
    w->tsc = p->clock == 1;
    w->tsc_start = p->tsc_start;
    w->calibrated = 0;
    w->unit = p->time_unit ? p->time_unit : 1;
    w->compress = p->compress <= HH_CODEC_ZSTD ? (int)p->compress : HH_CODEC_DEFLATE;
    w->have_process = true;
    w->prev_time = 0;
    hh_put_u8(w, HH_STREAM_TAG, HH_TAG_PROCESS);
    hh_put_var(w, HH_STREAM_DECL, w->pid != 0 ? w->pid : p->pid);
    hh_put_var(w, HH_STREAM_DECL, p->ppid);
    hh_put_var(w, HH_STREAM_DECL, p->mono_start);
    hh_put_var(w, HH_STREAM_DECL, p->real_start);
    hh_put_var(w, HH_STREAM_DECL, w->flags);
    hh_put_var(w, HH_STREAM_DECL, p->stack_depth);
    hh_put_var(w, HH_STREAM_DECL, p->sample_bytes);
    hh_put_var(w, HH_STREAM_DECL, w->unit);
    hh_put_bytes(w, HH_STREAM_DECL, HH_TRACE_VERSION, sizeof HH_TRACE_VERSION - 1);
    hh_put_bytes(w, HH_STREAM_DECL, strings, exe_len);
    hh_put_bytes(w, HH_STREAM_DECL, strings + exe_len, cmd_len);
}

static void hh_encode_module(hh_writer *w, const hh_rec_module *m) {
    const uint8_t *bytes = (const uint8_t *)(m + 1);
    hh_room(w, 64 + m->build_id_len + m->path_len);
    hh_put_u8(w, HH_STREAM_TAG, HH_TAG_MODULE);
    hh_put_var(w, HH_STREAM_DECL, m->base);
    hh_put_var(w, HH_STREAM_DECL, m->lo);
    hh_put_var(w, HH_STREAM_DECL, m->hi);
    hh_put_bytes(w, HH_STREAM_DECL, bytes, m->build_id_len);
    hh_put_bytes(w, HH_STREAM_DECL, bytes + m->build_id_len, m->path_len);
}

static void hh_encode_node(hh_writer *w, const hh_rec_node *n) {
    hh_room(w, 32);
    hh_put_u8(w, HH_STREAM_TAG, HH_TAG_NODE);
    /* ids mostly follow one another, and a new node's parent is mostly the node before */
    hh_put_svar(w, HH_STREAM_DECL, (int64_t)n->id - (int64_t)w->prev_node - 1);
    hh_put_var(w, HH_STREAM_DECL, n->id - n->parent);
    hh_put_svar(w, HH_STREAM_DECL, (int64_t)(n->pc - w->prev_pc));
    w->prev_pc = n->pc;
    w->prev_node = n->id;
}

/* ---- addresses ---------------------------------------------------------------------------
 * A freed block is named by its allocation ordinal, relative to the block named last (frees
 * often follow allocation order) when the log has it live; a new block by its place in the list of
 * recently freed addresses (allocators hand those out again) when it is there. Otherwise by a delta
 * to the previous address. The low bit of the varint tells which (FORMAT.md, "Addresses"). */

static inline uint64_t hh_live_hash(uint64_t ptr, uint64_t cap) {
    return ((ptr >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - __builtin_ctzll(cap));
}

static hh_live *hh_live_find(hh_writer *w, uint64_t ptr) {
    if (w->live == NULL) return NULL;
    uint64_t mask = w->live_cap - 1;
    for (uint64_t i = hh_live_hash(ptr, w->live_cap);; i = (i + 1) & mask) {
        if (w->live[i].ptr == ptr) return &w->live[i];
        if (w->live[i].ptr == 0) return NULL;
    }
}

static void hh_live_grow(hh_writer *w) {
    uint64_t cap = w->live_cap ? w->live_cap * 2 : 65536;
    hh_live *t = hh_sys_mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t == MAP_FAILED) return;
    for (uint64_t k = 0; k < w->live_cap; k++) {
        if (w->live[k].ptr == 0) continue;
        uint64_t i = hh_live_hash(w->live[k].ptr, cap);
        while (t[i].ptr != 0) i = (i + 1) & (cap - 1);
        t[i] = w->live[k];
    }
    if (w->live != NULL) hh_sys_munmap(w->live, w->live_cap * sizeof *t);
    w->live = t;
    w->live_cap = cap;
}

static void hh_live_insert(hh_writer *w, uint64_t ptr, unsigned cls) {
    w->ordinal++;
    hh_live *slot = hh_live_find(w, ptr);
    if (slot != NULL) {
        slot->ordinal = w->ordinal;
        slot->cls = cls;
        return;
    }
    if ((w->live_n + 1) * 2 > w->live_cap) hh_live_grow(w);
    if ((w->live_n + 1) * 2 > w->live_cap) return; /* out of memory: stays explicit */
    uint64_t mask = w->live_cap - 1, i = hh_live_hash(ptr, w->live_cap);
    while (w->live[i].ptr != 0) i = (i + 1) & mask;
    w->live[i].ptr = ptr;
    w->live[i].ordinal = w->ordinal;
    w->live[i].cls = cls;
    w->live_n++;
}

/* Linear probing deletion without tombstones: shift the following entries back. */
static void hh_live_erase(hh_writer *w, hh_live *slot) {
    uint64_t mask = w->live_cap - 1, i = (uint64_t)(slot - w->live);
    w->live_n--;
    for (uint64_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (w->live[j].ptr == 0) break;
        uint64_t home = hh_live_hash(w->live[j].ptr, w->live_cap);
        /* can the entry at j move to the hole at i? (is home cyclically outside (i, j]) */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            w->live[i] = w->live[j];
            i = j;
        }
    }
    w->live[i].ptr = 0;
}

/* The size class of a request, as glibc's chunk sizes go (heaplog.h); HH_NO_CLASS above
 * HH_CLASS_MAX_BYTES. */
static unsigned hh_class_of(uint64_t bytes) {
    return bytes <= HH_CLASS_MAX_BYTES
               ? (unsigned)((bytes + HH_CHUNK_HEADER + (HH_CHUNK_ALIGN - 1)) / HH_CHUNK_ALIGN)
               : HH_NO_CLASS;
}

#define HH_CLASS_MASK (HH_CLASS_DEPTH - 1)

/* Entry k of class cls's list (0 = freed last). */
static inline uint64_t *hh_class_entry(hh_writer *w, unsigned cls, unsigned k) {
    return &w->classes[cls][(w->class_head[cls] + k) & HH_CLASS_MASK];
}

/* The first entry k of class cls's list that holds ptr, or -1: the first, because the decoder
 * takes the first too (analyze/address.h). The list is a ring: entries 0.. lie from the head to
 * the array's end, the rest from its start, so it is searched as two plain arrays (computing
 * each entry's index took nearly twice the instructions: 6 % of the writer thread's on a churn
 * loop, 4 % now). */
static int hh_class_find(const hh_writer *w, unsigned cls, uint64_t ptr) {
    const uint64_t *list = w->classes[cls];
    const unsigned head = w->class_head[cls];
    for (unsigned i = head; i < HH_CLASS_DEPTH; i++)
        if (list[i] == ptr) return (int)(i - head);
    for (unsigned i = 0; i < head; i++)
        if (list[i] == ptr) return (int)(HH_CLASS_DEPTH - head + i);
    return -1;
}

/* ptr becomes entry 0 of its class; the last entry drops off. */
static void hh_class_push(hh_writer *w, unsigned cls, uint64_t ptr) {
    w->class_head[cls] = (uint8_t)((w->class_head[cls] - 1) & HH_CLASS_MASK);
    w->classes[cls][w->class_head[cls]] = ptr;
}

/* Entry k leaves its class's list: the entries before it move up one, the last becomes 0. */
static void hh_class_remove(hh_writer *w, unsigned cls, unsigned k) {
    for (unsigned i = k; i > 0; i--) *hh_class_entry(w, cls, i) = *hh_class_entry(w, cls, i - 1);
    *hh_class_entry(w, cls, 0) = 0;
    w->class_head[cls] = (uint8_t)((w->class_head[cls] + 1) & HH_CLASS_MASK);
}

/* The slot of ptr in the index of the recent frees (Fibonacci hashing of the chunk number). */
static inline uint32_t hh_recent_slot(uint64_t ptr) {
    return (uint32_t)(((ptr >> 4) * 0x9e3779b97f4a7c15ull) >>
                      (64 - __builtin_ctz(HH_RECENT_INDEX)));
}

/* The entry k of the list of recent frees that holds ptr, or -1 (not freed in the last HH_RECENT
 * frees, or its index slot taken by a later address). */
static inline int hh_recent_find(const hh_writer *w, uint64_t ptr) {
    uint32_t at = w->recent_index[hh_recent_slot(ptr)];
    if (at == 0) return -1;
    uint32_t k = w->recent_head - at; /* pushed at recent_head - 1 - k */
    return k < HH_RECENT && w->recent[(at - 1) & (HH_RECENT - 1)] == ptr ? (int)k : -1;
}

static void hh_recent_push(hh_writer *w, uint64_t ptr, unsigned cls) {
    w->recent[w->recent_head & (HH_RECENT - 1)] = ptr;
    w->recent_index[hh_recent_slot(ptr)] = ++w->recent_head;
    if (cls < HH_CLASSES) hh_class_push(w, cls, ptr);
}

/* An address as a delta to the previous one (odd code): the code, for the stream of a block
 * that ends (old) or begins (addr). */
static uint64_t hh_explicit_code(const hh_writer *w, uint64_t ptr) {
    return (hh_zigzag((int64_t)(ptr - w->prev_addr)) << 1) | 1;
}

/* A block that ends here (free, realloc's old block); remove says whether it really ends. */
static void hh_put_ref(hh_writer *w, uint64_t ptr, bool remove) {
    hh_live *slot = ptr != 0 ? hh_live_find(w, ptr) : NULL;
    unsigned cls = HH_NO_CLASS;
    if (slot != NULL) {
        HH_PUT_OLD_VAR(hh_zigzag((int64_t)slot->ordinal - (int64_t)w->prev_ref - 1) << 1);
        w->prev_ref = slot->ordinal;
        cls = slot->cls;
        if (remove) hh_live_erase(w, slot);
    } else {
        HH_PUT_OLD_VAR(hh_explicit_code(w, ptr));
    }
    if (ptr != 0 && remove) hh_recent_push(w, ptr, cls);
    w->prev_addr = ptr;
}

/* The address right after the last new block, as glibc carves fresh chunks from the top of
 * its heap: chunk = max(32, (bytes + 8 + 15) & ~15) (heaplog.h, HH_CHUNK_*). */
static uint64_t hh_bump_guess(const hh_writer *w) {
    uint64_t chunk =
        (w->bump_bytes + HH_CHUNK_HEADER + (HH_CHUNK_ALIGN - 1)) & ~(uint64_t)(HH_CHUNK_ALIGN - 1);
    return w->bump_addr + (chunk < HH_CHUNK_MIN ? HH_CHUNK_MIN : chunk);
}

/* A block that begins here; class_bytes picks its size class (UINT64_MAX: none), request is
 * the bytes asked for. Codes (FORMAT.md, "Addresses"): low bits 00 = index in its size
 * class's list of recent frees; 10 = 0: right after the last new block, k + 1: index k in the
 * list of recent frees; 1 = delta to the previous address. */
static void hh_put_new(hh_writer *w, uint64_t ptr, uint64_t class_bytes, uint64_t request) {
    unsigned cls = hh_class_of(class_bytes);
    int k = ptr != 0 && cls < HH_CLASSES ? hh_class_find(w, cls, ptr) : -1;
    if (k >= 0) {
        HH_PUT_ADDR_VAR((uint64_t)k << 2);
        hh_class_remove(w, cls, (unsigned)k); /* handed out again: no longer a free block */
    } else if (ptr != 0 && w->bump_addr != 0 && ptr == hh_bump_guess(w)) {
        HH_PUT_ADDR_VAR(2);
    } else {
        if (ptr != 0) k = hh_recent_find(w, ptr);
        if (k >= 0) {
            HH_PUT_ADDR_VAR(((uint64_t)(k + 1) << 2) | 2);
        } else {
            HH_PUT_ADDR_VAR(hh_explicit_code(w, ptr));
        }
    }
    if (ptr != 0) {
        hh_live_insert(w, ptr, cls);
        w->bump_addr = ptr;
        w->bump_bytes = request;
    }
    w->prev_addr = ptr;
}

/* The fields of an event after its common part, in the order and under the conditions
 * format/fields.h declares, from the ring record (e and its extra part x). A realloc whose new
 * block is 0 for bytes > 0 failed and leaves its old block live. Always inlined with op a
 * constant (hh_encode_event), so each operation's copy keeps only the fields it carries. */
static inline __attribute__((always_inline)) void hh_encode_fields(hh_writer *w, const unsigned op,
                                                                   const hh_rec_event *e,
                                                                   const hh_rec_event_extra *x) {
    const bool ends = (HH_OPS_ENDING >> op) & 1u, begins = (HH_OPS_BEGINNING >> op) & 1u;
    /* The fields the record gives, by the table's names; a free's block is the one it ends. */
    hh_field_values f = {
        .count = x->count,
        .align = x->align,
        .size = e->size,
        .old = ends && !begins ? e->addr : x->old,
        .ptr = e->addr,
        .duration = (w->flags & HH_PF_TIMING) ? hh_event_ns(w, x->duration, true) : 0,
        .weight = x->weight,
    };
#ifdef HH_WRITER_FIELDS_SOURCE
    HH_WRITER_FIELDS_SOURCE(e, &f);
#endif
    const uint64_t bytes = hh_event_bytes(e);
    const bool failed = begins && f.ptr == 0 && bytes != 0;
    const uint64_t class_bytes = ((HH_OPS_ALIGNED >> op) & 1u) ? UINT64_MAX : bytes;
    const uint64_t request = ((HH_OPS_ALIGNED >> op) & 1u) ? f.size : bytes;
#define HH_PUT_NUM(value) HH_PUT_NUM_VAR(value)
#define HH_PUT_ALIGN(value) HH_PUT_NUM_VAR(value)
#define HH_PUT_OLD(value) hh_put_ref(w, value, !failed)
#define HH_PUT_NEW(value) hh_put_new(w, value, class_bytes, request)
#define HH_PUT_FIELD(name, coding, ops, flag) \
    if (HH_FIELD_CARRIED(op, w->flags, ops, flag)) HH_PUT_##coding(f.name);
    HH_EVENT_FIELDS(HH_PUT_FIELD)
#undef HH_PUT_FIELD
#undef HH_PUT_NEW
#undef HH_PUT_OLD
#undef HH_PUT_ALIGN
#undef HH_PUT_NUM
}

static const hh_rec_event_extra hh_no_extra;

static void hh_encode_event(hh_writer *w, const hh_rec_event *e) {
    const hh_rec_event_extra *x =
        (e->flags & HH_EV_EXTRA) ? (const hh_rec_event_extra *)(e + 1) : &hh_no_extra;
    hh_room(w, 128);
    hh_thread_slot *t = hh_thread(w, e->tid);
    uint8_t tag = HH_TAG_EVENT | (e->op & HH_EVT_OP_MASK);
    if (t->index != w->prev_thread) tag |= HH_EVT_THREAD;
    uint32_t prev_stack = t->block == w->block_no ? t->stack : 0;
    /* frees carry a stack only with HEAPHOOK_FREE_STACKS; realloc_done never */
    bool carries_stack =
        e->op != HH_OP_REALLOC_DONE && (e->op != HH_OP_FREE || (w->flags & HH_PF_FREE_STACKS));
    if (carries_stack && e->stack != prev_stack) tag |= HH_EVT_STACK;
    if (e->flags & HH_EV_SPLIT) tag |= HH_EVT_SPLIT;
    hh_put_u8(w, HH_STREAM_TAG, tag);
    uint64_t ticks = hh_event_ns(w, e->time, false) / w->unit;
    hh_put_svar(w, HH_STREAM_TIME, (int64_t)(ticks - w->prev_time));
    w->prev_time = ticks;
    if (tag & HH_EVT_THREAD) {
        hh_put_var(w, HH_STREAM_STACK, t->index);
        w->prev_thread = t->index;
    }
    if (tag & HH_EVT_STACK) hh_put_var(w, HH_STREAM_STACK, e->stack);
    if (carries_stack) {
        t->stack = e->stack;
        t->block = w->block_no;
    }
    if (e->op != HH_OP_REALLOC_DONE) w->events++;
    /* One copy of the table's code per operation, op a constant in each. */
    switch (e->op) {
#define HH_ENCODE_OP(op)               \
    case op:                           \
        hh_encode_fields(w, op, e, x); \
        break;
        HH_ENCODE_OP(HH_OP_MALLOC)
        HH_ENCODE_OP(HH_OP_CALLOC)
        HH_ENCODE_OP(HH_OP_REALLOC)
        HH_ENCODE_OP(HH_OP_REALLOCARRAY)
        HH_ENCODE_OP(HH_OP_FREE)
        HH_ENCODE_OP(HH_OP_POSIX_MEMALIGN)
        HH_ENCODE_OP(HH_OP_MEMALIGN)
        HH_ENCODE_OP(HH_OP_ALIGNED_ALLOC)
        HH_ENCODE_OP(HH_OP_VALLOC)
        HH_ENCODE_OP(HH_OP_PVALLOC)
        HH_ENCODE_OP(HH_OP_REALLOC_DONE)
#undef HH_ENCODE_OP
        default:
            break;
    }
}

/* Leak checks (leaks/mark.c): declarations, in the decl stream. */
static void hh_encode_leak(hh_writer *w, const hh_rec_leak *r) {
    hh_room(w, 64);
    hh_put_u8(w, HH_STREAM_TAG, HH_TAG_LEAK);
    hh_put_var(w, HH_STREAM_DECL, r->check);
    hh_put_var(w, HH_STREAM_DECL, r->ptr);
    hh_put_var(w, HH_STREAM_DECL, r->size);
}

static void hh_encode_leak_check(hh_writer *w, const hh_rec_leak_check *r) {
    hh_room(w, 128);
    hh_put_u8(w, HH_STREAM_TAG, HH_TAG_LEAK_CHECK);
    hh_put_var(w, HH_STREAM_DECL, r->check);
    hh_put_var(w, HH_STREAM_DECL, hh_event_ns(w, r->time, false));
    hh_put_var(w, HH_STREAM_DECL, r->trigger);
    hh_put_var(w, HH_STREAM_DECL, r->live);
    hh_put_var(w, HH_STREAM_DECL, r->leaked);
    hh_put_var(w, HH_STREAM_DECL, r->leaked_bytes);
    hh_put_var(w, HH_STREAM_DECL, r->reachable);
    hh_put_var(w, HH_STREAM_DECL, r->reachable_bytes);
    hh_put_var(w, HH_STREAM_DECL, r->duration_ns);
}

/* Mapped-memory events (vm.c): rare, so stored whole in the decl stream. */
static void hh_encode_vm(hh_writer *w, const hh_rec_vm *r) {
    hh_room(w, 96);
    hh_thread_slot *t = hh_thread(w, r->tid);
    hh_put_u8(w, HH_STREAM_TAG, r->mapped ? HH_TAG_VM_MAPPED : HH_TAG_VM_UNMAPPED);
    hh_put_var(w, HH_STREAM_DECL, hh_event_ns(w, r->time, false) / w->unit);
    hh_put_var(w, HH_STREAM_DECL, t->index);
    hh_put_var(w, HH_STREAM_DECL, r->stack);
    hh_put_var(w, HH_STREAM_DECL, r->addr);
    hh_put_var(w, HH_STREAM_DECL, r->size);
}

/* A NUL-padded name of a ring record, as a string of the log. */
static hh_field_str hh_padded(const char *p, size_t cap) {
    hh_field_str str = {p, (uint32_t)strnlen(p, cap)};
    return str;
}

/* Real-time violations (rt.c): rare, so stored whole in the decl stream, fields as
 * format/fields.h's HH_RT_VIOLATION_FIELDS lists them. */
static void hh_encode_rt_violation(hh_writer *w, const hh_rec_rt *r) {
    hh_room(w, 160);
    hh_thread_slot *t = hh_thread(w, r->tid);
    hh_put_u8(w, HH_STREAM_TAG, HH_TAG_RT_VIOLATION);
    hh_rt_violation_values v = {
        .time = hh_event_ns(w, r->time, false) / w->unit,
        .thread = t->index,
        .stack = r->stack,
        .site = r->site,
        .call = hh_padded(r->call, sizeof r->call),
        .thread_name = hh_padded(r->thread_name, sizeof r->thread_name),
        .policy = r->policy,
        .priority = r->priority,
        .count = r->count,
    };
#define HH_PUT_RT_VAR(value) hh_put_var(w, HH_STREAM_DECL, value)
#define HH_PUT_RT_STR(value) hh_put_bytes(w, HH_STREAM_DECL, (value).bytes, (value).len)
#define HH_PUT_RT_FIELD(name, coding) HH_PUT_RT_##coding(v.name);
    HH_RT_VIOLATION_FIELDS(HH_PUT_RT_FIELD)
#undef HH_PUT_RT_FIELD
#undef HH_PUT_RT_STR
#undef HH_PUT_RT_VAR
}

/* The live table's slot of an address the record names, brought into the cache before
 * hh_put_new / hh_put_ref look it up: in a program that frees blocks out of order the lookup
 * misses nearly every time (the table is bigger than what the ring's stream leaves in cache). */
static inline void hh_live_prefetch(const hh_writer *w, uint64_t ptr) {
    if (ptr != 0 && w->live != NULL) hh_prefetch(&w->live[hh_live_hash(ptr, w->live_cap)]);
}

void hh_writer_prefetch(void *arg, unsigned type, const void *record) {
    const hh_writer *w = arg;
    if (type != HH_REC_EVENT) return;
    const hh_rec_event *e = record;
    hh_live_prefetch(w, e->addr);
    hh_live_prefetch(w, hh_event_old_block(e));
}

void hh_writer_record(void *arg, uint64_t pos, unsigned type, const void *record, uint32_t len) {
    hh_writer *w = arg;
    (void)pos, (void)len;
    /* A log begins at its PROCESS record. What comes before it in a reused ring (an attach after
     * a detach) is a straggler of the previous log: a thread that passed the state check in a
     * hook before the detach and reserved after the new attach reopened the ring. It is not
     * this log's, and it could not be encoded anyway (the time unit comes with PROCESS): it is
     * counted as dropped. */
    if (HH_UNLIKELY(!w->have_process) && type != HH_REC_PROCESS) {
        w->stragglers++;
        return;
    }
    switch (type) {
        case HH_REC_PROCESS:
            hh_encode_process(w, record);
            break;
        case HH_REC_MODULE:
            hh_encode_module(w, record);
            break;
        case HH_REC_NODE:
            hh_encode_node(w, record);
            break;
        case HH_REC_EVENT:
            hh_encode_event(w, record);
            break;
        case HH_REC_EXIT:
            w->saw_exit = true;
            break;
        case HH_REC_LEAK:
            hh_encode_leak(w, record);
            break;
        case HH_REC_LEAK_CHECK:
            hh_encode_leak_check(w, record);
            break;
        case HH_REC_VM:
            hh_encode_vm(w, record);
            break;
        case HH_REC_RT:
            hh_encode_rt_violation(w, record);
            break;
        default:
            break;
    }
}

void hh_writer_set_pid(hh_writer *w, uint32_t pid) {
    w->pid = pid;
}

static hh_writer *hh_writer_on_fd(int fd, const char *path, char *path_out, size_t path_cap);

hh_writer *hh_writer_open(const char *dir, int pid, char *path_out, size_t path_cap) {
    char path[4096];
    int fd = -1;
    for (int n = 0; n < 1000 && fd < 0; n++) {
        /* Formatted by hand: no stdio here. */
        char num[32];
        size_t pos = 0;
        path[0] = '\0';
        size_t dl = strlen(dir);
        if (dl + 64 >= sizeof path) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        memcpy(path, dir, dl);
        pos = dl;
        const char *prefix = "/heaplog.";
        memcpy(path + pos, prefix, 9);
        pos += 9;
        int k = 0;
        unsigned v = (unsigned)pid;
        do {
            num[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (k) path[pos++] = num[--k];
        if (n > 0) {
            path[pos++] = '.';
            v = (unsigned)n;
            do {
                num[k++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            while (k) path[pos++] = num[--k];
        }
        memcpy(path + pos, ".log", 5);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) return NULL;
    }
    if (fd < 0) return NULL;
    return hh_writer_on_fd(fd, path, path_out, path_cap);
}

hh_writer *hh_writer_open_file(const char *path, char *path_out, size_t path_cap) {
    /* A new file only: an existing one (or a link planted at the path) is never written. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return NULL;
    return hh_writer_on_fd(fd, path, path_out, path_cap);
}

/* A writer on the log file fd (named path): the file header written. */
static hh_writer *hh_writer_on_fd(int fd, const char *path, char *path_out, size_t path_cap) {
    /* Keep the log's fd away from the low numbers programs expect to get from open(). */
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 200);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    hh_writer *w = hh_sys_mmap(NULL, sizeof(hh_writer), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    w->fd = fd;
    hh_block_reset(w);
    uint8_t header[HH_FILE_HEADER_SIZE] = {0}; /* the magic, the version, reserved bytes */
    memcpy(header, HH_LOG_MAGIC, sizeof HH_LOG_MAGIC - 1);
    header[sizeof HH_LOG_MAGIC - 1] = HH_FORMAT_VERSION;
    int error = hh_write_fully(fd, header, sizeof header);
    if (error != 0) { /* not even the header fits (a full disk): no log rather than a stub */
        unlink(path);
        hh_writer_abandon(w);
        errno = error;
        return NULL;
    }
    w->size = sizeof header;
    if (path_out != NULL && path_cap > 0) {
        size_t n = strlen(path);
        if (n >= path_cap) n = path_cap - 1;
        memcpy(path_out, path, n);
        path_out[n] = '\0';
    }
    return w;
}

uint64_t hh_writer_close(hh_writer *w, unsigned reason, uint64_t dropped, int *error) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    bool failed = w->error != 0;
    if (failed) {
        /* The log ended at a failed write: the END alone, in a block of its own, stored (a
         * zstd block would need the history of the blocks that were not written). */
        hh_block_reset(w);
        reason = HH_END_WRITE_ERROR;
    } else {
        hh_room(w, 64);
    }
    hh_put_u8(w, HH_STREAM_TAG, HH_TAG_END);
    hh_put_var(w, HH_STREAM_DECL, reason);
    hh_put_var(w, HH_STREAM_DECL, dropped + w->stragglers);
    /* unit is 0 when the process never sent its PROCESS record (it failed to start) */
    hh_put_var(w, HH_STREAM_DECL, w->unit != 0 && now > w->start ? (now - w->start) / w->unit : 0);
    uint64_t events = failed ? w->written : w->events; /* in the log */
    hh_put_var(w, HH_STREAM_DECL, events);
    if (failed) {
        uint32_t raw = hh_assemble(w);
        hh_write_block(w, w->buf, raw, raw); /* cut off again when even this fails */
    } else {
        hh_writer_flush(w);
        if (w->error != 0) events = w->written; /* the last block did not fit */
    }
    if (error != NULL) *error = w->error;
    close(w->fd);
    if (w->z_ready) deflateEnd(&w->z);
    if (w->zarena != NULL) hh_sys_munmap(w->zarena, HH_ZARENA_SIZE);
    if (w->live != NULL) hh_sys_munmap(w->live, w->live_cap * sizeof *w->live);
    hh_sys_munmap(w, sizeof *w);
    return events;
}

void hh_writer_abandon(hh_writer *w) {
    close(w->fd);
    if (w->z_ready) deflateEnd(&w->z);
    if (w->zarena != NULL) hh_sys_munmap(w->zarena, HH_ZARENA_SIZE);
    if (w->live != NULL) hh_sys_munmap(w->live, w->live_cap * sizeof *w->live);
    hh_sys_munmap(w, sizeof *w);
}

uint64_t hh_writer_events(const hh_writer *w) {
    return w->events;
}
uint64_t hh_writer_written(const hh_writer *w) {
    return w->written;
}
int hh_writer_error(const hh_writer *w) {
    return w->error;
}
bool hh_writer_saw_exit(const hh_writer *w) {
    return w->saw_exit;
}
