/*
 * writer_internal.h — what the log encoder's files share (writer.c encodes and writes blocks,
 * writer_codec.c compresses them, writer_check.c checks a record from another process): the
 * block's buffers and the encoder's state.
 */
#ifndef HH_WRITER_INTERNAL_H
#define HH_WRITER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <zlib.h>

#include "format/heaplog.h"
#include "trace.h"
#include "writer.h"

/* A block's records are stored column by column, one stream per kind of field (enum hh_stream),
 * so that the compressor sees like next to like (FORMAT.md, "Blocks"). A block is written once
 * it holds HH_BLOCK_TARGET bytes, or when a stream could not take the next record. */
#define HH_BLOCK_TARGET (128u * 1024u)
#define HH_STREAM_CAP (HH_BLOCK_TARGET + 64u * 1024u)
/* The payload buffer: the streams and their table. Its size is the format's limit. */
#define HH_BLOCK_CAP (HH_STREAM_COUNT * HH_STREAM_CAP + 64u)
/* Slots of the index of the recent frees: twice the ring, so that few addresses collide. */
#define HH_RECENT_INDEX (2u * HH_RECENT)
_Static_assert(HH_BLOCK_CAP == HH_MAX_BLOCK_PAYLOAD, "the format's limit is this writer's buffer");
#define HH_THREADS_CAP 16384u /* distinct thread ids per log (a power of two) */
_Static_assert(HH_THREADS_CAP - 1 <= HH_MAX_THREAD_INDEX, "thread indices stay in the format");
#define HH_DEFLATE_LEVEL 6
#define HH_ZSTD_LEVEL 1

typedef struct hh_live {
    uint64_t ptr; /* 0 = empty */
    uint64_t ordinal : 56;
    uint64_t cls : 8;
} hh_live;

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
    uint32_t unit;  /* ns per time tick */
    int compress;   /* HH_CODEC_* */
    bool z_ready;
    void *zstd;      /* ZSTD_CCtx */
    uint8_t *zarena; /* zlib's memory (hh_zalloc) */
    size_t zused;
    uint64_t last_flush; /* monotonic ns */
    /* TSC clock: ns = start + (tsc - tsc_start) * ns_per_tick, calibrated here */
    bool tsc;
    int calibrated; /* 0 no, 1 over >= 20 ms, 2 over >= 1 s (final) */
    uint64_t tsc_start;
    double ns_per_tick;
    z_stream z;
    bool have_process;
    uint64_t stragglers; /* records before the PROCESS record, not this log's (hh_writer_record) */
    bool saw_exit;
    uint32_t pid;          /* the PROCESS record's pid, when not 0 (hh_writer_set_pid) */
    const char *violation; /* the record hh_writer_record_checked refused (NULL: none) */
    uint64_t events;
    uint64_t size;    /* bytes of the file that are whole: the header and whole blocks */
    uint64_t written; /* events in those blocks */
    int error;        /* errno of the first write that failed (0: none); nothing is written since */
    uint32_t block_no;
    /* delta state, reset per block */
    uint64_t prev_time;
    uint64_t prev_addr;
    uint64_t prev_pc;
    uint32_t prev_node;
    uint32_t prev_thread; /* index */
    uint32_t threads_used;
    /* Live blocks by address -> allocation ordinal (persist across blocks). */
    hh_live *live;
    uint64_t live_cap, live_n, ordinal;
    uint64_t recent[HH_RECENT]; /* addresses freed last: entry k is recent[(head - 1 - k) % N] */
    uint32_t recent_head;
    /* Where an address was pushed last: 1 + its recent_head then, in a direct-mapped table by
     * the address's hash (0: none; a collision forgets the older address, which then costs an
     * explicit delta, never a wrong code: the entry is checked against the ring). */
    uint32_t recent_index[HH_RECENT_INDEX];
    /* Freed last per size class, each a ring: entry k of class c (0 = freed last) is
     * classes[c][(class_head[c] + k) % HH_CLASS_DEPTH]; 0 = none. */
    uint64_t classes[HH_CLASSES][HH_CLASS_DEPTH];
    uint8_t class_head[HH_CLASSES];
    hh_thread_slot *last_thread;    /* the slot of the previous record's thread */
    uint64_t bump_addr, bump_bytes; /* the last new block: the next may follow it directly */
    uint64_t prev_ref;              /* ordinal of the block named by the last reference */
    uint32_t len;                   /* bytes in all streams */
    uint32_t slen[HH_STREAM_COUNT];
    uint8_t sbuf[HH_STREAM_COUNT][HH_STREAM_CAP];
    uint8_t buf[HH_BLOCK_CAP]; /* the block payload, assembled at flush */
    uint8_t zbuf[HH_MAX_BLOCK_STORED];
    hh_thread_slot threads[HH_THREADS_CAP];
};

/* zlib's memory comes from a mapping of the writer's own, never from malloc: the writer runs
 * inside the traced process (the drain thread). Freed all at once with the writer. */
#define HH_ZARENA_SIZE (16u * 1024u * 1024u) /* reserved, touched as used */

/* writer_codec.c: the block payload's first len bytes of w->buf compressed into w->zbuf;
 * returns the compressed length, or 0 when it did not pay (the block is stored). */
__attribute__((visibility("hidden"))) bool hh_zstd_ready(void);
__attribute__((visibility("hidden"))) uint32_t hh_zstd_block(hh_writer *w, uint32_t len);
__attribute__((visibility("hidden"))) uint32_t hh_deflate(hh_writer *w, uint32_t len);

#endif
