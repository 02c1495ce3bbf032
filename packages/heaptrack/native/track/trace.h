/*
 * trace.h — what the tracer's files share: the records that travel through the ring buffer
 * from the traced process to the log writer (the in-process drain thread or the collector),
 * and small helpers; the operation codes and flags they carry are the log format's (heaplog.h). The
 * folders are described in native/README.md.
 */
#ifndef HH_TRACE_H
#define HH_TRACE_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "format/heaplog.h" /* the operation codes (enum hh_op), codecs and process flags */
#include "heaphook/os.h"

#define HH_EXPORT __attribute__((visibility("default")))
#define HH_LIKELY(x) __builtin_expect(!!(x), 1)
#define HH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HH_TLS __attribute__((tls_model("initial-exec"))) __thread

#define HH_TRACE_VERSION "0.1.0"

/* The tracer's own mappings (ring, tables, writer) go straight to the kernel, not through the
 * mmap symbol: with ucm-hooks loaded, mmap is hooked, and the tracer's memory is not the
 * program's (vm.c records the program's mappings). The core's unobserved calls (heaphook/os.h),
 * under the names the tracer's files use. */
#define hh_sys_mmap heaphook_os_unobserved_mmap
#define hh_sys_munmap heaphook_os_unobserved_munmap

/* The tracer's locks (the stack trie, the drain, the leak table's shards and cursor): short
 * critical sections, taken inside malloc, in fork handlers and on the drain thread, so no
 * futex and nothing that allocates. Spins a little, then gives the CPU away. */
static inline void hh_spin_lock(_Atomic int *lock) {
    for (int n = 0; atomic_exchange_explicit(lock, 1, memory_order_acquire) != 0; n++) {
        if (n > 64) sched_yield();
    }
}

static inline void hh_spin_unlock(_Atomic int *lock) {
    atomic_store_explicit(lock, 0, memory_order_release);
}

/* Brings the cache line at p in before it is used. An asm statement, not __builtin_prefetch:
 * GCC 12 takes a function whose only effect is __builtin_prefetch for a pure one and drops the
 * calls to it (the writer's prefetcher compiled to a bare `ret`). A prefetch never faults, so p
 * may be a stale or wrong address. */
static inline void hh_prefetch(const void *p) {
#if defined(__x86_64__)
    __asm__ volatile("prefetcht0 (%0)" ::"r"(p));
#else
    __builtin_prefetch(p, 1, 3); /* may be dropped as above: only a lost hint */
#endif
}

/* Ring record types (the type byte of a record header; 0 means "reserved, not yet written"). */
enum hh_rec_type {
    HH_REC_RESERVED = 0,
    HH_REC_PROCESS = 1,
    HH_REC_MODULE = 2,
    HH_REC_NODE = 3,
    HH_REC_EVENT = 4,
    HH_REC_EXIT = 5,
    HH_REC_LEAK = 6,       /* a block a leak check found unreachable (leaks/mark.c) */
    HH_REC_LEAK_CHECK = 7, /* the end of a leak check: its totals */
    HH_REC_VM = 8,         /* memory mapped or unmapped (vm.c) */
    HH_REC_RT = 9,         /* a real-time violation rtcheck's guard reported (rt.c) */
};

/* Flags of an event record. */
#define HH_EV_SPLIT 1u /* realloc moved the block: the new one counts from the REALLOC_DONE */
#define HH_EV_EXTRA 2u /* an hh_rec_event_extra follows the record */

/* Every record begins with a 64-bit header word: bits 0-23 length in bytes (a multiple of 8,
 * header included), 24-31 type, 32-63 the low 32 bits of (ring position / 8). */
/* An allocation-family call. The common part (48 bytes) is all that malloc and free need;
 * calls that need more (realloc's old block, calloc's count, an alignment, a sampling weight,
 * a duration) carry an hh_rec_event_extra right after it and set HH_EV_EXTRA. Small records
 * halve what the ring moves through the cache for the common calls. */
typedef struct hh_rec_event {
    uint64_t hdr;
    uint64_t time; /* CLOCK_MONOTONIC ns, or TSC ticks */
    uint32_t tid;
    uint32_t stack; /* interned stack node, 0 = none */
    uint64_t addr;  /* the block returned, or the block freed */
    uint64_t size;  /* bytes asked for (element size for calloc/reallocarray) */
    uint8_t op;
    uint8_t flags; /* HH_EV_* */
    uint16_t pad0;
    uint32_t pad1;
} hh_rec_event;

typedef struct hh_rec_event_extra {
    uint64_t old;      /* realloc: the block passed in */
    uint64_t count;    /* calloc/reallocarray: number of elements */
    uint64_t align;    /* the aligned calls */
    uint64_t weight;   /* sampling: bytes this record stands for (0 = not sampled) */
    uint64_t duration; /* HEAPHOOK_TIMING: time spent in the underlying allocator */
} hh_rec_event_extra;

_Static_assert(sizeof(hh_rec_event) == 48, "the common event record is 6 words");
_Static_assert(sizeof(hh_rec_event_extra) % 8 == 0, "ring records are whole words");

/* The block a realloc or reallocarray record was passed (0 for the other records). */
static inline uint64_t hh_event_old_block(const hh_rec_event *e) {
    bool moved_from = e->op == HH_OP_REALLOC || e->op == HH_OP_REALLOCARRAY;
    return moved_from && (e->flags & HH_EV_EXTRA) ? ((const hh_rec_event_extra *)(e + 1))->old : 0;
}

/* The bytes a record's call asked for: count * size for calloc and reallocarray, saturated (an
 * overflowing request is a large one, never a zero-sized one; the decoder computes the same
 * product in floating point), size for the others. */
static inline uint64_t hh_event_bytes(const hh_rec_event *e) {
    bool counted = e->op == HH_OP_CALLOC || e->op == HH_OP_REALLOCARRAY;
    if (!counted || !(e->flags & HH_EV_EXTRA)) return e->size;
    uint64_t bytes;
    return __builtin_mul_overflow(((const hh_rec_event_extra *)(e + 1))->count, e->size, &bytes)
               ? UINT64_MAX
               : bytes;
}

typedef struct hh_rec_node {
    uint64_t hdr;
    uint32_t id;
    uint32_t parent;
    uint64_t pc;
} hh_rec_node;

typedef struct hh_rec_module {
    uint64_t hdr;
    uint64_t base;
    uint64_t lo, hi; /* relative to base */
    uint32_t build_id_len;
    uint32_t path_len;
    /* build id bytes, then path bytes */
} hh_rec_module;

typedef struct hh_rec_process {
    uint64_t hdr;
    uint32_t pid, ppid;
    uint64_t mono_start, real_start;
    uint64_t tsc_start; /* the time stamp counter at mono_start (clock == 1) */
    uint32_t clock;     /* event times and durations are: 0 ns, 1 TSC ticks */
    uint32_t pad;
    uint32_t flags;
    uint32_t stack_depth;
    uint64_t sample_bytes;
    uint32_t time_unit; /* ns per tick of event times in the log (HEAPHOOK_TIME_RESOLUTION) */
    uint32_t compress;  /* codec of the log's blocks: HH_CODEC_* */
    uint32_t exe_len, cmdline_len;
    /* exe bytes, then cmdline bytes (arguments separated by NUL) */
} hh_rec_process;

typedef struct hh_rec_exit {
    uint64_t hdr;
    uint64_t time;
} hh_rec_exit;

typedef struct hh_rec_leak {
    uint64_t hdr;
    uint32_t check; /* 1, 2, ... per process */
    uint32_t type;  /* precise API type id, 0 = untyped */
    uint64_t ptr;
    uint64_t size;
} hh_rec_leak;

typedef struct hh_rec_leak_check {
    uint64_t hdr;
    uint32_t check;
    uint32_t trigger; /* 0 exit, 1 HEAPHOOK_LEAK_SIGNAL, 2 API */
    uint64_t time;    /* hh_now() when it began */
    uint64_t live, leaked, leaked_bytes, reachable, reachable_bytes;
    uint64_t duration_ns; /* the world stopped */
} hh_rec_leak_check;

/* Memory the program mapped or unmapped (ucm-hooks' VM_MAPPED / VM_UNMAPPED). */
typedef struct hh_rec_vm {
    uint64_t hdr;
    uint64_t time; /* as hh_rec_event.time */
    uint32_t tid;
    uint32_t stack;  /* interned stack node of the mapping call, 0 = none */
    uint32_t mapped; /* 1 VM_MAPPED, 0 VM_UNMAPPED */
    uint32_t pad;
    uint64_t addr;
    uint64_t size;
} hh_rec_vm;

/* A call a real-time thread must not make, as rtcheck's guard reported it (rt.c): written at a
 * call site's first violation with its stack, and again at exit with the final count. */
#define HH_RT_NAME_BYTES 32   /* the call's name, NUL-padded (rtcheck's longest: 22) */
#define HH_RT_THREAD_BYTES 16 /* the thread's name (comm), NUL-padded */
typedef struct hh_rec_rt {
    uint64_t hdr;
    uint64_t time; /* as hh_rec_event.time */
    uint32_t tid;
    uint32_t stack; /* interned stack node of the violating call, 0 = none */
    uint32_t site;  /* the guard's number of the (call, call site, thread): 1, 2, ... */
    uint32_t policy;
    uint32_t priority;
    uint32_t pad;
    uint64_t count;
    char call[HH_RT_NAME_BYTES];
    char thread_name[HH_RT_THREAD_BYTES];
} hh_rec_rt;

static inline uint32_t hh_rec_len(uint64_t hdr) {
    return (uint32_t)(hdr & 0xffffff);
}
static inline unsigned hh_rec_type_of(uint64_t hdr) {
    return (unsigned)((hdr >> 24) & 0xff);
}
static inline size_t hh_round8(size_t n) {
    return (n + 7) & ~(size_t)7;
}

#endif /* HH_TRACE_H */
