/*
 * heaplog.h — the single source of the heaplog format (FORMAT.md describes the bytes) and of
 * the collector handshake. Every constant of the format is defined here and nowhere else: the
 * encoder (track/writer.c), the report's pass (analyze/decode.c), the tracer and the collector
 * include this file, and the TypeScript decoder imports src/decode/format.generated.ts, which
 * scripts/gen-format.mjs writes from this file at build time (test/integration/format.test.ts
 * checks both against the C compiler and FORMAT.md).
 *
 * The generator reads only two forms, so keep every definition in one of them:
 *   #define HH_NAME <value>          an integer expression (literals, earlier HH_ names,
 *                                    + - * / << >> | & ~ and parentheses), a "string" or a 'c'
 *   enum [hh_name] { HH_NAME = <value>, ... };   every member with an explicit value
 * A comment right above a definition, or after it on its line, is its contract and is copied
 * to the TypeScript. A named enum whose members are 0, 1, 2, ... also gives the TypeScript the
 * list of their names (enum hh_op -> OP_NAMES: 'malloc', 'calloc', ...). Anything else (the
 * handshake struct, static asserts) is C only.
 */
#ifndef HH_HEAPLOG_H
#define HH_HEAPLOG_H

#include <stdint.h>

/* ---- File header (16 bytes) ---------------------------------------------------------------- */

/* The first 8 bytes of every log. */
#define HH_LOG_MAGIC "HHEAPLOG"
/* The version the reference writer writes (byte 8 of the file header). Version 4 moved the
 * addresses of blocks that end into a stream of their own (HH_STREAM_OLD), split the varints of
 * num, addr and old across two streams each (the _MORE streams) and deepened the recent frees
 * (HH_PF_DEEP_RECENT); a version 3 reader would find neither, so it refuses the file by its
 * version. */
#define HH_FORMAT_VERSION 4
/* The oldest version a reader still reads (version 2 added VM_MAPPED, VM_UNMAPPED, flag bit 6;
 * version 3 RT_VIOLATION and HH_PF_DEEP_CLASSES, which made the size classes' lists of recent
 * frees 128 deep; version 4 ten streams and HH_PF_DEEP_RECENT). */
#define HH_FORMAT_VERSION_MIN 1
/* Bytes of the file header: the magic, the version, 7 reserved bytes of 0. */
#define HH_FILE_HEADER_SIZE 16

/* ---- Blocks ---------------------------------------------------------------------------------- */

/* Bytes of a block header: the length word, then the CRC-32 of the stored payload. */
#define HH_BLOCK_HEADER_SIZE 8
/* Length word, bit 31: the payload is raw DEFLATE (RFC 1951), on its own. */
#define HH_BLOCK_DEFLATED 0x80000000u
/* Length word, bit 30: the payload is the file's zstd stream up to a flush, after a varint
 * giving the raw payload's length. */
#define HH_BLOCK_ZSTD 0x40000000u
/* Length word, bits 0-29: the stored payload's size in bytes. */
#define HH_BLOCK_LENGTH 0x3fffffffu

/* How a writer stores its blocks (HEAPHOOK_COMPRESS): codec ids, not bytes of the file. A writer
 * may go from zstd to deflate or none, never back. */
enum hh_codec { HH_CODEC_NONE = 0, HH_CODEC_DEFLATE = 1, HH_CODEC_ZSTD = 2 };

/* The streams a block's records are stored in, one per kind of field, in the payload's order. */
enum hh_stream {
    HH_STREAM_TAG = 0,       /* the tag byte of every record */
    HH_STREAM_TIME = 1,      /* the time field of every event */
    HH_STREAM_STACK = 2,     /* the thread index and stack id fields of events */
    HH_STREAM_NUM = 3,       /* size, count, align, duration and weight fields of events */
    HH_STREAM_ADDR = 4,      /* the addresses of blocks that begin (new; old too in six streams) */
    HH_STREAM_DECL = 5,      /* every field of the declarations and of VM_MAPPED / VM_UNMAPPED */
    HH_STREAM_OLD = 6,       /* the addresses of blocks that end (old), from version 4 */
    HH_STREAM_NUM_MORE = 7,  /* the bytes after the first of each varint of num, from version 4 */
    HH_STREAM_ADDR_MORE = 8, /* the same for addr */
    HH_STREAM_OLD_MORE = 9,  /* the same for old */
};
/* The number of streams, the payload's first varint. Frees and new blocks are coded so
 * differently (FORMAT.md, "Addresses") that one stream of both compressed worse than two: a
 * free's reference is mostly a small delta of allocation order, a new block's an index into a
 * size class's list, and zstd's literal statistics serve each better alone. For the same reason
 * the varints of num, addr and old keep only their first byte there and the others in a _MORE
 * stream: a first byte and a high byte of the same field follow different statistics. */
#define HH_STREAM_COUNT 10
/* The number of streams of a block of version 1 to 3, whose old addresses are in
 * HH_STREAM_ADDR with the new ones, in event order; a reader also accepts it in version 4. */
#define HH_STREAM_COUNT_SHARED_ADDR 6

/* ---- Size limits (FORMAT.md, "Size limits"): a block outside them is damage ---------------- */

/* The most bytes a block's payload holds once decompressed: the reference writer's payload
 * buffer, ten streams of 192 KiB (its HH_STREAM_CAP) and 64 bytes for the stream table. */
#define HH_MAX_BLOCK_PAYLOAD (HH_STREAM_COUNT * 192 * 1024 + 64)
/* The most bytes a block stores: a payload that did not compress, plus 16 KiB of codec overhead
 * and the zstd length varint (the writer's compressed buffer). */
#define HH_MAX_BLOCK_STORED (HH_MAX_BLOCK_PAYLOAD + 16 * 1024)
/* The largest window a zstd frame of a log may declare. The writer's level 1 uses 512 KiB; this
 * leaves room for other libzstd versions while keeping a decompressor's history buffer small. */
#define HH_MAX_ZSTD_WINDOW (8 * 1024 * 1024)
/* The largest thread index a THREAD record may declare. Readers keep tables by index, so a
 * corrupt index of millions would cost them hundreds of MB; the reference writer numbers at
 * most 16,383 threads per log. */
#define HH_MAX_THREAD_INDEX 65535
/* The longest strings and byte fields a record may carry: the tracer's buffers (the collector
 * refuses a record that claims more, FORMAT.md "Size limits"). The PROCESS record's exe (the
 * target of /proc/self/exe, PATH_MAX) and cmdline, a MODULE record's path and build id. */
#define HH_MAX_EXE_BYTES 4096
#define HH_MAX_CMDLINE_BYTES 8192
#define HH_MAX_PATH_BYTES 4096
#define HH_MAX_BUILD_ID_BYTES 64
/* The longest varint (LEB128 of a 64-bit value). */
#define HH_MAX_VARINT_BYTES 10
/* The largest value of the time, stack and addr streams and of the addresses they code (2^53 - 1:
 * a double holds it exactly); a larger one is damage. The num stream may hold more (a failed
 * malloc(SIZE_MAX) logs its size). */
#define HH_MAX_EXACT 9007199254740991

/* ---- Records: the tag byte ------------------------------------------------------------------- */

/* The first byte of every record. 0x01-0x07 are declarations (LEAK and LEAK_CHECK the results of
 * leak checks), 0x08 and 0x09 memory events; a tag with bit 7 set is an allocation-family event
 * (HH_TAG_EVENT | operation | HH_EVT_* bits); 0x0a a real-time violation (version 3). Any other
 * tag is damage. */
enum hh_tag {
    HH_TAG_PROCESS = 0x01,     /* first record of every log */
    HH_TAG_MODULE = 0x02,      /* a loaded ELF object */
    HH_TAG_THREAD = 0x03,      /* declares a thread index */
    HH_TAG_NODE = 0x04,        /* a node of the stack trie */
    HH_TAG_END = 0x05,         /* the log is complete */
    HH_TAG_LEAK = 0x06,        /* a block a leak check found unreachable */
    HH_TAG_LEAK_CHECK = 0x07,  /* the end of a leak check */
    HH_TAG_VM_MAPPED = 0x08,   /* memory the program mapped */
    HH_TAG_VM_UNMAPPED = 0x09, /* memory the program unmapped */
    HH_TAG_EVENT = 0x80,       /* bit 7: an allocation-family event */

    HH_TAG_RT_VIOLATION = 0x0a, /* a real-time thread's forbidden call (rtcheck), decl stream */
};

/* Event tag bits 0-3: the operation (enum hh_op). */
#define HH_EVT_OP_MASK 0x0f
/* Event tag bit 4: a thread index follows (else the previous event's thread). */
#define HH_EVT_THREAD 0x10
/* Event tag bit 5: a stack id follows (else this thread's previous stack in the block). */
#define HH_EVT_STACK 0x20
/* Event tag bit 6, split: realloc moved the block; the new one begins at the thread's next
 * realloc_done. */
#define HH_EVT_SPLIT 0x40

/* The operation of an event: the allocation-family function called. Also the op of the tracer's
 * ring records. */
enum hh_op {
    HH_OP_MALLOC = 0,         /* size, new */
    HH_OP_CALLOC = 1,         /* count, size, new */
    HH_OP_REALLOC = 2,        /* size, old, new */
    HH_OP_REALLOCARRAY = 3,   /* count, size, old, new */
    HH_OP_FREE = 4,           /* old */
    HH_OP_POSIX_MEMALIGN = 5, /* align, size, new */
    HH_OP_MEMALIGN = 6,       /* align, size, new */
    HH_OP_ALIGNED_ALLOC = 7,  /* align, size, new */
    HH_OP_VALLOC = 8,         /* size, new */
    HH_OP_PVALLOC = 9,        /* size, new */
    HH_OP_REALLOC_DONE = 10,  /* no fields: the new block of a split realloc begins */
};
/* The number of operations. */
#define HH_OP_COUNT (HH_OP_REALLOC_DONE + 1)

/* The PROCESS record's flags (also the handshake's, which carries HH_PF_FORK_CHILD). */
#define HH_PF_STACKS 1u       /* stacks recorded */
#define HH_PF_TIMING 2u       /* durations recorded (HEAPHOOK_TIMING): events carry a duration */
#define HH_PF_SAMPLING 4u     /* sampling (HEAPHOOK_SAMPLE_BYTES): events but free carry a weight */
#define HH_PF_DROP 8u         /* lossy mode (HEAPHOOK_ON_FULL=drop) */
#define HH_PF_FREE_STACKS 16u /* stacks of frees recorded */
#define HH_PF_FORK_CHILD 32u  /* the process is a fork child of a traced parent */
#define HH_PF_VM 64u          /* memory events recorded (ucm-hooks, HEAPHOOK_TRACE_VM) */
#define HH_PF_ATTACHED 128u   /* tracing began in a running process (heaphook_heaptrack_attach*) */
#define HH_PF_DEEP_CLASSES 256u /* class lists hold HH_CLASS_DEPTH frees, not HH_CLASS_DEPTH_V2 */
#define HH_PF_DEEP_RECENT 512u  /* the recent frees are HH_RECENT, not HH_RECENT_V3 */

/* The END record's reason. */
enum hh_end_reason {
    HH_END_EXIT = 0,      /* the process ran its exit path (library destructor) */
    HH_END_LOST = 1,      /* it ended otherwise (crash, _exit, exec); all it wrote is in the log */
    HH_END_COLLECTOR = 2, /* the collector stopped first (interrupted) */
    HH_END_DETACH = 3,    /* heaphook_heaptrack_detach: the process goes on untraced */
    HH_END_WRITE_ERROR = 4, /* a write failed (a full disk): the log ends at its last whole block */
    HH_END_PROTOCOL = 5,    /* the process broke the collector's protocol: the log ends there */
};

/* The LEAK_CHECK record's trigger: what started the check. */
enum hh_leak_trigger {
    HH_TRIGGER_EXIT = 0,   /* the process exiting (HEAPHOOK_LEAK_CHECK) */
    HH_TRIGGER_SIGNAL = 1, /* HEAPHOOK_LEAK_SIGNAL */
    HH_TRIGGER_API = 2,    /* heaphook_leak_check, heaphook_leak_check_precise */
};

/* ---- Addresses (FORMAT.md, "Addresses"): the state encoder and decoders keep alike ----------- */

/* The list of recent frees holds the addresses freed last (a power of two: a ring): HH_RECENT of
 * them in a log whose PROCESS flags have HH_PF_DEEP_RECENT (every version 4 log), else
 * HH_RECENT_V3. 16,384 rather than 64: glibc hands out chunks freed hundreds or thousands of
 * frees before from its small and unsorted bins, for a request of another size class (a larger
 * chunk, split) or above HH_CLASS_MAX_BYTES, and each was an explicit address of ~3 bytes (gcc's
 * cc1: 0.31 M of its 3.8 M new blocks, mostly freed 512 to 4,096 frees before). */
#define HH_RECENT 16384
#define HH_RECENT_V3 64
/* The size class of a request of b bytes follows glibc's chunk sizes: (b + HH_CHUNK_HEADER +
 * HH_CHUNK_ALIGN - 1) / HH_CHUNK_ALIGN when b <= HH_CLASS_MAX_BYTES, else none; aligned calls
 * have none. Classes below HH_CLASSES (1..63; 0 is unused) keep a list of frees; class 64
 * (requests of 1001 to 1008 bytes) has none. */
#define HH_CLASSES 64
/* Each size class lists the addresses of that class freed last (a power of two): HH_CLASS_DEPTH
 * of them in a log whose PROCESS flags have HH_PF_DEEP_CLASSES (every log since version 3), else
 * HH_CLASS_DEPTH_V2. 128 rather than 16: a program that frees hundreds of small blocks and then
 * allocates them again (gcc's cc1) gets its addresses back from glibc's bins in an order the
 * short list had lost, and each then cost an explicit address of ~3 bytes. 256 took cc1 further
 * (2.59 MB against 2.96 MB) but made node's log 7 % larger: deep hits cost 2-byte indices where
 * a bump or recent code cost one. */
#define HH_CLASS_DEPTH 128
#define HH_CLASS_DEPTH_V2 16
/* The largest request that has a size class. */
#define HH_CLASS_MAX_BYTES 1008
/* "No size class": larger requests and aligned calls. */
#define HH_NO_CLASS 0xff
/* glibc's chunk header (its size field) and alignment, which the size class and the bump
 * prediction follow: the block after the last new one is at last + max(HH_CHUNK_MIN,
 * (request + HH_CHUNK_HEADER + HH_CHUNK_ALIGN - 1) & ~(HH_CHUNK_ALIGN - 1)). */
#define HH_CHUNK_HEADER 8
#define HH_CHUNK_ALIGN 16 /* glibc's chunk alignment */
#define HH_CHUNK_MIN 32   /* glibc's smallest chunk */
/* Not the format: the decoder (analyze/address.h) keeps the live blocks of
 * the last HH_ORDINAL_RING ordinals in a direct-mapped ring (frees name recent blocks mostly),
 * older live ones in a table (a power of two). */
#define HH_ORDINAL_RING (1 << 16)

/* ---- The collector handshake (heaphook record) ----------------------------------------------- */

/* A traced process connects to the collector's Unix socket (HEAPHOOK_COLLECTOR) and sends an
 * hh_hello; the collector answers one status byte with the ring buffer's memfd (SCM_RIGHTS). From
 * then on the process sends one-byte messages and the collector reads the ring. */

/* 'HHC1' read as a little-endian 32-bit word. */
#define HH_HELLO_MAGIC 0x31434848u
/* The handshake's version (the collector does not check it yet). */
#define HH_HELLO_VERSION 1
/* The collector's answer: the ring is attached. Anything else, or no memfd: no ring. */
#define HH_HELLO_READY 'R'
/* Message: records are waiting in the ring (one per batch). */
#define HH_MSG_WAKE 'w'
/* Message: the process is about to fork; the collector waits for the child's handshake. */
#define HH_MSG_FORK 'F'
/* Message: the process runs its exit path (its log ends with HH_END_EXIT). */
#define HH_MSG_EXIT 'X'
/* Message: the process detached (heaphook_heaptrack_detach): its log ends with HH_END_DETACH. */
#define HH_MSG_DETACH 'D'

typedef struct hh_hello {
    uint32_t magic; /* HH_HELLO_MAGIC */
    uint32_t version;
    uint32_t pid, ppid;
    uint32_t flags; /* HH_PF_FORK_CHILD or 0 */
    uint32_t pad;
    uint64_t capacity; /* ring bytes asked for: a power of two */
} hh_hello;

_Static_assert(sizeof HH_LOG_MAGIC - 1 == 8, "the magic is bytes 0-7, the version byte 8");
_Static_assert(sizeof(hh_hello) == 32, "the handshake is 32 bytes on every platform");
_Static_assert(HH_MAX_BLOCK_PAYLOAD <= HH_BLOCK_LENGTH, "a block's size fits its length bits");
_Static_assert((HH_RECENT & (HH_RECENT - 1)) == 0, "the recent frees are a ring");
_Static_assert((HH_CLASS_DEPTH & (HH_CLASS_DEPTH - 1)) == 0, "class lists are rings");
_Static_assert(HH_CLASS_DEPTH <= 256 && HH_CLASS_DEPTH_V2 <= HH_CLASS_DEPTH,
               "a ring's head is a byte, and a shallower list is the front of the same ring");

#endif /* HH_HEAPLOG_H */
