/*
 * writer.c — the log encoder (FORMAT.md). Records are varint/zigzag encoded with deltas and
 * gathered into blocks of at most HH_BLOCK_TARGET bytes; each block is written with its length
 * and CRC-32 so a reader can tell a damaged or truncated log from a good one and decode
 * everything before the damage. Delta state restarts at every block.
 */
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"

#define HH_BLOCK_TARGET (128u * 1024u)
#define HH_BLOCK_CAP (HH_BLOCK_TARGET + 64u * 1024u)
#define HH_THREADS_CAP 16384u /* distinct thread ids per log (a power of two) */
#define HH_FORMAT_VERSION 1u

/* Log tags (FORMAT.md). */
enum {
    HH_TAG_PROCESS = 0x01,
    HH_TAG_MODULE = 0x02,
    HH_TAG_THREAD = 0x03,
    HH_TAG_NODE = 0x04,
    HH_TAG_END = 0x05,
    HH_TAG_EVENT = 0x80,
    HH_EVT_THREAD = 0x10,
    HH_EVT_STACK = 0x20,
    HH_EVT_SPLIT = 0x40,
};

typedef struct hh_thread_slot {
    uint32_t tid;   /* 0 = empty */
    uint32_t index; /* 1-based index in the log */
    uint32_t stack; /* stack of the thread's previous event in this block */
    uint32_t block; /* block number of that stack */
} hh_thread_slot;

struct hh_writer {
    int fd;
    uint32_t flags; /* process flags, from the PROCESS record */
    uint64_t start; /* monotonic ns of the process start */
    bool have_process;
    bool saw_exit;
    uint64_t events;
    uint32_t block_no;
    /* delta state, reset per block */
    uint64_t prev_time;
    uint64_t prev_addr;
    uint64_t prev_pc;
    uint32_t prev_thread; /* index */
    uint32_t threads_used;
    uint32_t len;
    uint8_t buf[HH_BLOCK_CAP];
    hh_thread_slot threads[HH_THREADS_CAP];
};

static uint32_t hh_crc_table[256];
static _Atomic int hh_crc_ready;

static void hh_crc_init(void) {
    if (atomic_load(&hh_crc_ready)) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        hh_crc_table[i] = c;
    }
    atomic_store(&hh_crc_ready, 1);
}

static uint32_t hh_crc32(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = hh_crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static void hh_write_fully(int fd, const void *data, size_t len) {
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

/* ---- encoding ---------------------------------------------------------------------------- */

static void hh_put_u8(hh_writer *w, uint8_t v) {
    w->buf[w->len++] = v;
}

static void hh_put_var(hh_writer *w, uint64_t v) {
    while (v >= 0x80) {
        w->buf[w->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->buf[w->len++] = (uint8_t)v;
}

static void hh_put_svar(hh_writer *w, int64_t v) {
    hh_put_var(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void hh_put_bytes(hh_writer *w, const void *p, uint32_t n) {
    hh_put_var(w, n);
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void hh_block_reset(hh_writer *w) {
    w->len = 0;
    w->prev_time = w->start;
    w->prev_addr = 0;
    w->prev_pc = 0;
    w->prev_thread = 0;
    w->block_no++;
}

void hh_writer_flush(hh_writer *w) {
    if (w->len == 0) return;
    uint8_t head[8];
    uint32_t len = w->len, crc = hh_crc32(w->buf, w->len);
    memcpy(head, &len, 4); /* little endian: x86-64 and aarch64 */
    memcpy(head + 4, &crc, 4);
    hh_write_fully(w->fd, head, 8);
    hh_write_fully(w->fd, w->buf, w->len);
    hh_block_reset(w);
}

/* Makes room for a record of at most need bytes. */
static void hh_room(hh_writer *w, uint32_t need) {
    if (w->len + need > HH_BLOCK_CAP || w->len >= HH_BLOCK_TARGET) hh_writer_flush(w);
}

static hh_thread_slot *hh_thread(hh_writer *w, uint32_t tid) {
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
            hh_put_u8(w, HH_TAG_THREAD);
            hh_put_var(w, s->index);
            hh_put_var(w, tid);
            return s;
        }
    }
    return &w->threads[0]; /* table full: merged into one thread */
}

static void hh_encode_process(hh_writer *w, const hh_rec_process *p) {
    const char *strings = (const char *)(p + 1);
    uint32_t exe_len = p->exe_len, cmd_len = p->cmdline_len;
    hh_room(w, 128 + exe_len + cmd_len);
    w->flags = p->flags;
    w->start = p->mono_start;
    w->have_process = true;
    w->prev_time = w->start;
    hh_put_u8(w, HH_TAG_PROCESS);
    hh_put_var(w, p->pid);
    hh_put_var(w, p->ppid);
    hh_put_var(w, p->mono_start);
    hh_put_var(w, p->real_start);
    hh_put_var(w, p->flags);
    hh_put_var(w, p->stack_depth);
    hh_put_var(w, p->sample_bytes);
    hh_put_bytes(w, HH_TRACE_VERSION, sizeof HH_TRACE_VERSION - 1);
    hh_put_bytes(w, strings, exe_len);
    hh_put_bytes(w, strings + exe_len, cmd_len);
}

static void hh_encode_module(hh_writer *w, const hh_rec_module *m) {
    const uint8_t *bytes = (const uint8_t *)(m + 1);
    hh_room(w, 64 + m->build_id_len + m->path_len);
    hh_put_u8(w, HH_TAG_MODULE);
    hh_put_var(w, m->base);
    hh_put_var(w, m->lo);
    hh_put_var(w, m->hi);
    hh_put_bytes(w, bytes, m->build_id_len);
    hh_put_bytes(w, bytes + m->build_id_len, m->path_len);
}

static void hh_encode_node(hh_writer *w, const hh_rec_node *n) {
    hh_room(w, 32);
    hh_put_u8(w, HH_TAG_NODE);
    hh_put_var(w, n->id);
    hh_put_var(w, n->parent);
    hh_put_svar(w, (int64_t)(n->pc - w->prev_pc));
    w->prev_pc = n->pc;
}

static void hh_put_addr(hh_writer *w, uint64_t addr, uint64_t *prev) {
    hh_put_svar(w, (int64_t)(addr - *prev));
    *prev = addr;
}

static void hh_encode_event(hh_writer *w, const hh_rec_event *e) {
    hh_room(w, 128);
    hh_thread_slot *t = hh_thread(w, e->tid);
    uint8_t tag = HH_TAG_EVENT | (e->op & 0x0f);
    if (t->index != w->prev_thread) tag |= HH_EVT_THREAD;
    uint32_t prev_stack = t->block == w->block_no ? t->stack : 0;
    bool carries_stack = e->op != HH_OP_REALLOC_DONE;
    if (carries_stack && e->stack != prev_stack) tag |= HH_EVT_STACK;
    if (e->flags & HH_EV_SPLIT) tag |= HH_EVT_SPLIT;
    hh_put_u8(w, tag);
    hh_put_svar(w, (int64_t)(e->time - w->prev_time));
    w->prev_time = e->time;
    if (tag & HH_EVT_THREAD) {
        hh_put_var(w, t->index);
        w->prev_thread = t->index;
    }
    if (tag & HH_EVT_STACK) hh_put_var(w, e->stack);
    if (carries_stack) {
        t->stack = e->stack;
        t->block = w->block_no;
    }
    switch (e->op) {
        case HH_OP_MALLOC:
        case HH_OP_VALLOC:
        case HH_OP_PVALLOC:
            hh_put_addr(w, e->addr, &w->prev_addr);
            hh_put_var(w, e->size);
            break;
        case HH_OP_CALLOC:
            hh_put_addr(w, e->addr, &w->prev_addr);
            hh_put_var(w, e->count);
            hh_put_var(w, e->size);
            break;
        case HH_OP_REALLOC:
        case HH_OP_REALLOCARRAY: {
            hh_put_addr(w, e->old, &w->prev_addr);
            hh_put_addr(w, e->addr, &w->prev_addr);
            if (e->op == HH_OP_REALLOCARRAY) hh_put_var(w, e->count);
            hh_put_var(w, e->size);
            break;
        }
        case HH_OP_FREE:
            hh_put_addr(w, e->addr, &w->prev_addr);
            break;
        case HH_OP_POSIX_MEMALIGN:
        case HH_OP_MEMALIGN:
        case HH_OP_ALIGNED_ALLOC:
            hh_put_addr(w, e->addr, &w->prev_addr);
            hh_put_var(w, e->align);
            hh_put_var(w, e->size);
            break;
        default:
            break;
    }
    if (e->op != HH_OP_REALLOC_DONE) {
        if (w->flags & HH_PF_TIMING) hh_put_var(w, e->duration);
        if ((w->flags & HH_PF_SAMPLING) && e->op != HH_OP_FREE) hh_put_var(w, e->weight);
        w->events++;
    }
}

void hh_writer_record(void *arg, unsigned type, const void *record, uint32_t len) {
    hh_writer *w = arg;
    (void)len;
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
        default:
            break;
    }
}

hh_writer *hh_writer_open(const char *dir, int pid, char *path_out, size_t path_cap) {
    hh_crc_init();
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
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) return NULL;
    }
    if (fd < 0) return NULL;
    /* Keep the log's fd away from the low numbers programs expect to get from open(). */
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 200);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    hh_writer *w =
        mmap(NULL, sizeof(hh_writer), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    w->fd = fd;
    hh_block_reset(w);
    static const uint8_t header[16] = {'H', 'H', 'E', 'A', 'P', 'L', 'O', 'G', HH_FORMAT_VERSION,
                                       0,   0,   0,   0,   0,   0,   0};
    hh_write_fully(fd, header, sizeof header);
    if (path_out != NULL && path_cap > 0) {
        size_t n = strlen(path);
        if (n >= path_cap) n = path_cap - 1;
        memcpy(path_out, path, n);
        path_out[n] = '\0';
    }
    return w;
}

void hh_writer_close(hh_writer *w, unsigned reason, uint64_t dropped) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    hh_room(w, 64);
    hh_put_u8(w, HH_TAG_END);
    hh_put_var(w, reason);
    hh_put_var(w, dropped);
    hh_put_var(w, now > w->start ? now - w->start : 0);
    hh_put_var(w, w->events);
    hh_writer_flush(w);
    close(w->fd);
    munmap(w, sizeof *w);
}

void hh_writer_abandon(hh_writer *w) {
    close(w->fd);
    munmap(w, sizeof *w);
}

uint64_t hh_writer_events(const hh_writer *w) {
    return w->events;
}
bool hh_writer_saw_exit(const hh_writer *w) {
    return w->saw_exit;
}
