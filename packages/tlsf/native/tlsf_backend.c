/*
 * tlsf_backend.c — the heaphook backend: libheaphook_tlsf.so.
 *
 * Memory comes from the pool: a first area of INITIAL_MEMPOOL_SIZE bytes, grown by
 * ADDITIONAL_MEMPOOL_SIZE, 2x, 4x ... when a request cannot be served (tlsf_grow.c). The pool
 * is one TLSF heap, the shared heap (owner id 0), guarded by one mutex.
 *
 * Threads. Each thread gets a thread heap (owner ids 1..255): a TLSF heap of its own whose
 * memory is chunks borrowed from the shared heap (256 KiB, then doubling with the heap's size up
 * to 64 MiB; a smaller chunk when the pool has no large one left). A thread allocates and frees
 * its own blocks with no lock and no atomic read-modify-write. A block freed by another thread
 * is pushed on its owner's remote-free stack (one CAS); the owner takes the whole stack with
 * one exchange and frees at most DRAIN_FAST of those blocks per malloc that misses its cache or
 * is the DRAIN_EVERY-th hit (DRAIN_SLOW more before it borrows a new chunk), so no operation
 * runs an unbounded loop. Requests of LARGE_REQUEST
 * bytes or more, or aligned to LARGE_ALIGN or more, are served by the thread heap when one of
 * its free blocks fits (one more TLSF search, no lock), else by the shared heap under its mutex
 * (no chunk is borrowed for them). The owner of a block is read from its head (8 bits), so free
 * needs no lookup.
 *
 * Memory goes back to the system (MADV_DONTNEED) only when a heap has been nearly emptied
 * (free_release), never in a prefaulted or locked pool. realloc growth of a block of a page or
 * more asks for a quarter more room (untouched until used), and a shrink within a quarter keeps
 * the block as it is, so a buffer grown by appends moves O(log n) times.
 *
 * Worst cases (each TLSF call is O(1)):
 *   malloc: DRAIN_FAST + DRAIN_SLOW frees, CACHE_FLUSH_MAX frees of cached blocks, one chunk
 *           borrowed under the mutex, a TLSF search after each step; when the pool itself must
 *           grow, log2(request / ADDITIONAL) mappings.
 *   free:   one TLSF free, or one CAS push (retried only while other threads push).
 * A thread heap is released when its thread exits and adopted by the next new thread, with
 * its chunks; chunks are not returned to the shared heap.
 *
 * Checking mode (HEAPHOOK_TLSF_CHECK=1) turns thread heaps off: every call goes to the shared
 * heap under the mutex, and every free/realloc/malloc_usable_size validates its pointer first
 * (tlsf_validate), stopping the program with one line on a bad one.
 */
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "heaphook/backend.h"
#include "heaphook/config.h"
#include "heaphook/log.h"
#include "heaphook/os.h"
/* The check on every free, realloc and malloc_usable_size (see "Checks on every call" below);
 * -DTLSF_FREE_CHECK=0 builds the library without it, to measure what it costs. */
#ifndef TLSF_FREE_CHECK
#define TLSF_FREE_CHECK 1
#endif
/* Heads keyed by a per-process key (tlsf.c): what makes the check's tag test free. */
#define TLSF_HEAD_KEY TLSF_FREE_CHECK
/* The TLSF core is compiled into this file so that its O(1) paths inline into the hooks. */
#include "tlsf.c"
#include "tlsf_grow.h"

/*
 * Tunables.
 */
#define DEFAULT_POOL_SIZE ((size_t)100 * 1000 * 1000) /* the original's 100 MB */
#define THREAD_HEAPS_MAX TLSF_OWNER_MAX               /* ids 1..255 */
#define CHUNK_MIN ((size_t)256 << 10)
#define CHUNK_MAX ((size_t)64 << 20)
#define LARGE_REQUEST ((size_t)256 << 10)
#define LARGE_ALIGN ((size_t)64 << 10)
/* Blocks other threads freed are taken back DRAIN_FAST at a time: at every cache miss, and
 * every DRAIN_EVERY cache hits, so at most DRAIN_FAST / DRAIN_EVERY (2) per malloc at the
 * least, more than the one per malloc a thread whose blocks others free (a producer) gets
 * back: the backlog cannot grow. With 4 per miss only, a producer whose mallocs mostly hit the
 * cache fell behind its consumers: 137 MB resident where glibc holds 4 MB. */
#define DRAIN_FAST 16
#define DRAIN_EVERY 8
#define DRAIN_SLOW 64
#define CACHE_CLASSES 64         /* footprints 32 .. 1008 bytes, one class per 16 bytes */
#define CACHE_DEPTH_DEFAULT 4096 /* blocks per class: the byte budget below is the real bound */
#define CACHE_DEPTH_MAX 65000
#define CACHE_BYTES_DEFAULT ((size_t)512 << 10) /* bytes a thread's cache holds at most */
#define CACHE_BYTES_MAX ((size_t)64 << 20)
/* Blocks a malloc short of memory flushes from its cache before it borrows a chunk: the flush
 * is spread over such mallocs, so no call frees more than this many blocks into TLSF. */
#define CACHE_FLUSH_MAX 64
/* The first class a block can have (the smallest block is 32 bytes). Classes below it have
 * their count kept at CACHE_FULL, so that the leaf free path never caches a head whose size
 * says 0 or 16 (the check on every free relies on it). */
#define CACHE_CLASS_MIN (BLOCK_SIZE_MIN / 16)
#define CACHE_FULL 0xffff
#define CONTROL_BYTES 12288 /* >= tlsf_control_size(), checked at init */
#define RELEASE_FRACTION 8  /* a heap below 1/8 of its high-water mark gives pages back */
#define RELEASE_MIN ((size_t)64 << 10)    /* ... when they come to 64 KiB or more at once */
#define RELEASE_BURST ((size_t)256 << 20) /* ... up to 256 MiB at once (a phase's end) */
#define RELEASE_RATE ((size_t)32 << 20)   /* ... then 32 MiB per second (see free_release) */
#define AREA_MIN ((size_t)4096)           /* smallest INITIAL/ADDITIONAL_MEMPOOL_SIZE accepted */

#define AREAS_STATIC 64 /* areas listed in .bss; more move the list to a mapping */

#define LIKELY(x) __builtin_expect(!!(x), 1)

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

enum { HEAP_FREE = 0, HEAP_OWNED = 1, HEAP_DEAD = 2 };

/* The area a thread last freed into, for the check on every free (its owner only): from = the
 * area's start + FIRST_PAYLOAD, span = its end - from (0: none yet), fast = (span less the
 * last KiB) / 16: a payload p with rotr(p - from, 4) < fast is 16-byte aligned, inside the
 * area, and has at least a cached block's largest footprint mapped after it (one compare). */
typedef struct area_cache {
    uintptr_t from;
    uintptr_t span;
    uintptr_t fast;
} area_cache;

/* What a heap gave back and may give back (see free_release); its owner's only. */
typedef struct release_state {
    size_t peak;              /* high-water mark of used bytes */
    size_t tokens;            /* bytes that may be given back now */
    unsigned long long stamp; /* when tokens were last refilled (heaphook_os_coarse_ns) */
} release_state;

typedef struct thread_heap {
    tlsf_t *tlsf;
    void *pending; /* blocks taken from `remote`, freed a few at a time (owner only) */
    unsigned id;
    _Atomic int state;
    size_t chunk_bytes;       /* bytes borrowed from the shared heap */
    _Atomic bool trim_wanted; /* malloc_trim asked its owner to trim (see trim_request) */
    release_state release;    /* returning memory (owner only) */
    area_cache area;          /* the area this heap's thread last freed into (owner only) */
    /* The thread cache: freed blocks of footprint < 1 KiB kept whole (not coalesced), at most
     * cfg.cache_depth per footprint and cfg.cache_bytes in all, handed out again by the next
     * malloc of that footprint. Indexed by footprint / 16 (classes 0 and 1 stay empty: the
     * smallest block is 32 bytes). */
    void *cache_head[CACHE_CLASSES];
    uint16_t cache_count[CACHE_CLASSES];
    size_t cache_bytes;  /* the footprints of the blocks cached */
    unsigned drain_tick; /* cache hits left before the next drain (see DRAIN_EVERY) */
    /* Blocks freed by other threads: a lock-free LIFO linked through the blocks' first word.
     * On its own cache line: other threads write it, the owner only reads it when not NULL. */
    _Alignas(64) _Atomic(void *) remote;
    _Alignas(64) unsigned char control[];
} thread_heap;

static struct {
    size_t initial;
    size_t additional;
    bool prefault;
    bool mlock;
    bool check;
    bool thread_heaps;
    unsigned cache_depth;
    size_t cache_bytes;            /* HEAPHOOK_TLSF_CACHE_BYTES */
    bool release;                  /* frees may give pages back to the system */
    bool trim;                     /* malloc_trim gives pages back: not with PREFAULT or MLOCK */
    _Atomic size_t trim_threshold; /* HEAPHOOK_TLSF_TRIM_THRESHOLD, mallopt(M_TRIM_THRESHOLD) */
    int on_grow; /* ON_GROW_*: what a growth after start-up does (HEAPHOOK_TLSF_ON_GROW) */
    bool stats;  /* count bytes in use, their peak and the largest request (HEAPHOOK_TLSF_STATS) */
    bool tier4;  /* HEAPHOOK_TLSF_COMPAT=tier4: tier4/heaphook's defaults */
    bool huge_pages; /* areas advised MADV_HUGEPAGE (HEAPHOOK_TLSF_HUGE_PAGES) */
} cfg;

enum { ON_GROW_IGNORE = 0, ON_GROW_WARN = 1, ON_GROW_ABORT = 2 };

/* Marks a block in a thread cache (its second word), to catch a double free cheaply. */
static uintptr_t cache_key;

/* The shared mutex on cache lines of its own: taking it must not evict what every free reads
 * (cfg, cache_key, heap_count, heaps). */
static union {
    pthread_mutex_t m;
    unsigned char line[128];
} shared_lock_line __attribute__((aligned(64))) = {PTHREAD_MUTEX_INITIALIZER};
#define shared_lock (shared_lock_line.m)
static HEAPHOOK_LARGE_STORAGE _Alignas(64) unsigned char shared_control[CONTROL_BYTES];
static tlsf_growing shared;                      /* the pool: guarded by shared_lock */
static release_state shared_release;             /* returning memory: under shared_lock */
static thread_heap *heaps[THREAD_HEAPS_MAX + 1]; /* by owner id; [0] unused */
static _Atomic unsigned heap_count;              /* ids 1..heap_count exist */
static pthread_key_t heap_key;
static bool mlock_warned;

static __thread thread_heap *t_heap __attribute__((tls_model("initial-exec")));
/* The area this thread last freed into, when it has no heap. */
static __thread area_cache t_area __attribute__((tls_model("initial-exec"), unused));
/* Set when this thread must not (or cannot) get a heap: it uses the shared heap. */
static __thread bool t_no_heap __attribute__((tls_model("initial-exec")));

/*
 * The pool's areas.
 *
 * Every area mapped is listed, sorted by address, so that any thread can tell in O(log areas)
 * whether a pointer lies in memory of this heap (thread heaps' chunks are blocks of these
 * areas). Areas are only ever added, under shared_lock; readers take no lock: a sequence
 * count, odd while the list changes, tells them to read again. The list starts in .bss and
 * moves to a mapping twice its size when full; an old list is never unmapped (a reader may
 * still be reading it), which costs at most as much memory as the list itself.
 */
typedef struct area_range {
    uintptr_t lo, hi;
} area_range;

static area_range areas_static[AREAS_STATIC];
static struct {
    _Atomic unsigned seq;
    _Atomic(area_range *) list;
    _Atomic size_t count;
    size_t cap; /* under shared_lock */
} areas = {0, areas_static, 0, AREAS_STATIC};

static size_t page_round(size_t bytes) {
    const size_t page = heaphook_os_page_size();
    return (bytes + page - 1) & ~(page - 1);
}

/* Lists [lo, hi); shared_lock held (or init). Returns false when the list cannot grow. */
static bool areas_add(uintptr_t lo, uintptr_t hi) {
    area_range *list = atomic_load_explicit(&areas.list, memory_order_relaxed);
    const size_t n = atomic_load_explicit(&areas.count, memory_order_relaxed);
    area_range *grown = NULL;
    if (n == areas.cap) {
        grown = (area_range *)heaphook_os_map(page_round(2 * areas.cap * sizeof(area_range)));
        if (!grown) return false;
        memcpy(grown, list, n * sizeof(area_range));
    }
    size_t at = n;
    while (at > 0 && list[at - 1].lo > lo) at--;
    atomic_fetch_add_explicit(&areas.seq, 1, memory_order_relaxed); /* odd: changing */
    atomic_thread_fence(memory_order_release);
    if (grown) {
        atomic_store_explicit(&areas.list, grown, memory_order_relaxed);
        areas.cap *= 2;
        list = grown;
    }
    for (size_t i = n; i > at; i--) {
        __atomic_store_n(&list[i].lo, list[i - 1].lo, __ATOMIC_RELAXED);
        __atomic_store_n(&list[i].hi, list[i - 1].hi, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&list[at].lo, lo, __ATOMIC_RELAXED);
    __atomic_store_n(&list[at].hi, hi, __ATOMIC_RELAXED);
    atomic_store_explicit(&areas.count, n + 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&areas.seq, 1, memory_order_release); /* even: stable */
    return true;
}

/* The area holding p: true with [*lo, *hi), or false. Lock-free (see above). */
static bool areas_find(uintptr_t p, uintptr_t *lo, uintptr_t *hi) {
    for (;;) {
        const unsigned seq = atomic_load_explicit(&areas.seq, memory_order_acquire);
        if (seq & 1) {
            cpu_relax();
            continue;
        }
        const area_range *list = atomic_load_explicit(&areas.list, memory_order_relaxed);
        size_t a = 0, b = atomic_load_explicit(&areas.count, memory_order_relaxed);
        while (a < b) { /* the first area starting above p */
            const size_t m = a + (b - a) / 2;
            if (__atomic_load_n(&list[m].lo, __ATOMIC_RELAXED) <= p)
                a = m + 1;
            else
                b = m;
        }
        const uintptr_t l = a ? __atomic_load_n(&list[a - 1].lo, __ATOMIC_RELAXED) : 0;
        const uintptr_t h = a ? __atomic_load_n(&list[a - 1].hi, __ATOMIC_RELAXED) : 0;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&areas.seq, memory_order_relaxed) != seq) continue;
        *lo = l;
        *hi = h;
        return a && p < h;
    }
}

/* A growth the system refused: said once (the program then sees NULL and ENOMEM). */
static void grow_refused(size_t bytes, int error) {
    static _Atomic bool said;
    if (atomic_exchange_explicit(&said, true, memory_order_relaxed)) return;
    heaphook_log_warn(
        "tlsf: the pool cannot grow: mmap of an area of %zu bytes failed (errno %d) "
        "(ADDITIONAL_MEMPOOL_SIZE=%zu, doubled until the request fits); this malloc returns "
        "NULL (ENOMEM)",
        bytes, error, cfg.additional);
}

static void *area_map(void *ctx, size_t bytes) {
    (void)ctx;
    const size_t len = page_round(bytes);
    void *mem = heaphook_os_map(len);
    if (!mem) {
        if (shared.total || cfg.initial == 0) grow_refused(bytes, errno); /* not the first pool */
        return NULL;
    }
    if (!areas_add((uintptr_t)mem, (uintptr_t)mem + len)) {
        heaphook_os_unmap(mem, len);
        return NULL;
    }
    /* tier4 compatibility touches the first pool only, as tier4's memset of it did. */
    /* Before the first touch, so that prefaulting faults in huge pages: one TLB entry covers
     * 2 MiB of the pool instead of 4 KiB. Refused (a kernel without THP): 4 KiB pages. */
    if (cfg.huge_pages) {
        const int saved_errno = errno;
        (void)madvise(mem, len, MADV_HUGEPAGE);
        errno = saved_errno;
    }
    if (cfg.prefault || cfg.mlock || (cfg.tier4 && shared.total == 0 && cfg.initial != 0))
        heaphook_os_prefault(mem, len);
    if (cfg.mlock && heaphook_os_lock(mem, len) != 0 && !mlock_warned) {
        mlock_warned = true;
        heaphook_log_warn(
            "tlsf: HEAPHOOK_TLSF_MLOCK: mlock of %zu bytes failed (errno %d); raise the "
            "locked-memory limit (ulimit -l)",
            len, errno);
    }
    return mem;
}

static int area_probe(void *ctx, size_t bytes) {
    (void)ctx;
    const size_t len = page_round(bytes);
    void *mem = heaphook_os_map(len);
    if (!mem) {
        grow_refused(bytes, errno);
        return 0;
    }
    heaphook_os_unmap(mem, len);
    return 1;
}

/* A growth of this thread's call, reported (HEAPHOOK_TLSF_ON_GROW) when the shared lock is
 * given back: the stack is walked and the line written with no lock of ours held. */
static __thread struct {
    size_t added, total, count, areas;
} t_grew __attribute__((tls_model("initial-exec")));

static void area_grew(void *ctx, size_t added, size_t total, size_t count) {
    (void)ctx;
    /* tier4/heaphook said every growth on stderr: with its defaults, so does this (warn). */
    heaphook_log(cfg.tier4 ? HEAPHOOK_LOG_WARN : HEAPHOOK_LOG_INFO,
                 "tlsf: pool grew by %zu bytes to %zu bytes (growth %zu)", added, total, count);
    if (cfg.on_grow == ON_GROW_IGNORE) return;
    t_grew.added += added;
    t_grew.total = total;
    t_grew.count = count;
    t_grew.areas++;
}

static __attribute__((noinline, cold)) void grow_report(void);
static bool stats_wanted(void);

static inline void shared_lock_take(void) {
    pthread_mutex_lock(&shared_lock);
}
static inline void shared_lock_give(void) {
    pthread_mutex_unlock(&shared_lock);
    if (UNLIKELY(t_grew.areas)) grow_report();
}

/*
 * HEAPHOOK_TLSF_ON_GROW: a growth after start-up (any area added to the pool beyond the first,
 * INITIAL_MEMPOOL_SIZE) is named with the call's stack, once per call that grew the pool.
 * The stack comes from glibc's backtrace() (libgcc's unwinder over .eh_frame, so it needs no
 * frame pointers), warmed up at start-up (its first call loads libgcc_s, which allocates);
 * frames are named with dladdr (module + offset, and the symbol when the module exports it).
 * Frames inside this library are left out. No lock of ours is held here.
 */
#define GROW_FRAMES 24
static void grow_report(void) {
    const size_t added = t_grew.added, total = t_grew.total, count = t_grew.count;
    const size_t areas_added = t_grew.areas;
    t_grew.added = t_grew.total = t_grew.count = t_grew.areas = 0;
    void *frames[GROW_FRAMES];
    const int n = backtrace(frames, GROW_FRAMES);
    char line[900];
    size_t len = heaphook_formatf(
        line, sizeof line,
        "tlsf: the pool grew after start-up by %zu bytes (%zu area(s)) to %zu bytes (growth %zu, "
        "HEAPHOOK_TLSF_ON_GROW=%s); stack:",
        added, areas_added, total, count, cfg.on_grow == ON_GROW_ABORT ? "abort" : "warn");
    Dl_info self;
    const void *self_base = dladdr((void *)grow_report, &self) ? self.dli_fbase : NULL;
    for (int i = 0; i < n && len < sizeof line - 1; i++) {
        Dl_info info;
        /* A return address: look up the call instruction, just before it. */
        const uintptr_t pc = (uintptr_t)frames[i];
        if (!dladdr((void *)(pc - 1), &info) || !info.dli_fname) {
            len += heaphook_formatf(line + len, sizeof line - len, " 0x%lx", (unsigned long)pc);
            continue;
        }
        if (info.dli_fbase == self_base) continue;
        const char *module = strrchr(info.dli_fname, '/');
        module = module ? module + 1 : info.dli_fname;
        if (*module == '\0') module = "?";
        const unsigned long off = (unsigned long)(pc - (uintptr_t)info.dli_fbase);
        if (info.dli_sname)
            len += heaphook_formatf(line + len, sizeof line - len, " %s+0x%lx (%s+0x%lx)",
                                    info.dli_sname, (unsigned long)(pc - (uintptr_t)info.dli_saddr),
                                    module, off);
        else
            len += heaphook_formatf(line + len, sizeof line - len, " %s+0x%lx", module, off);
    }
    if (cfg.on_grow == ON_GROW_ABORT) heaphook_fatal("%s", line);
    heaphook_log_warn("%s", line);
}

/* The shared heap; shared_lock held. */
static inline void *shared_alloc_locked(size_t size, size_t align) {
    return tlsf_growing_alloc(&shared, size, align);
}

static void *shared_alloc(size_t size, size_t align) {
    shared_lock_take();
    void *p = shared_alloc_locked(size, align);
    shared_lock_give();
    return p;
}

/*
 * Checking mode.
 */
static void check_pointer_locked(const void *ptr, const char *call) {
    const void *where;
    const tlsf_error e = tlsf_validate(shared.tlsf, ptr, &where);
    if (LIKELY(e == TLSF_OK)) return;
    if (where != ptr)
        heaphook_fatal("tlsf: %s(%p): %s at %p", call, ptr, tlsf_error_name(e), where);
    heaphook_fatal("tlsf: %s(%p): %s at %p", call, ptr, tlsf_error_name(e), ptr);
}

/*
 * Checks on every call (TLSF_FREE_CHECK): free, realloc and malloc_usable_size check their
 * pointer before anything else, as glibc's "free(): invalid pointer" does, and stop the
 * program with one line naming the call. Is the pointer inside an area of the pool (the
 * thread's last area: one compare; else a binary search of the area list)? Is the word
 * before it a used block's head, its tag, size and successor's head consistent, the
 * predecessor's boundary tag sound when the head says it is free (tlsf_check_used)? A few
 * words read, no lock: blocks of any thread's heap pass. The checking mode
 * (HEAPHOOK_TLSF_CHECK=1) still walks further on an error to name it.
 */
static __attribute__((noinline, noreturn, cold)) void misuse(const void *ptr, const char *call,
                                                             tlsf_error e, const void *where) {
    if (cfg.check) {
        shared_lock_take();
        check_pointer_locked(ptr, call); /* the thorough mode's own words, when it finds it */
        shared_lock_give();
    }
    switch (e) {
        case TLSF_ERR_DOUBLE_FREE:
            heaphook_fatal("tlsf: %s(%p): double free (the block is already free)", call, ptr);
        case TLSF_ERR_INTERIOR:
            heaphook_fatal(
                "tlsf: %s(%p): invalid pointer (inside the heap, not the start of a block; "
                "or its header was overwritten)",
                call, ptr);
        case TLSF_ERR_NEXT_HEADER:
            heaphook_fatal(
                "tlsf: %s(%p): heap corruption after the block at %p: the next block's header "
                "(at %p) is damaged",
                call, ptr, ptr, where);
        case TLSF_ERR_PREV_HEADER:
            heaphook_fatal(
                "tlsf: %s(%p): heap corruption before the block at %p: the previous free "
                "block's header is damaged",
                call, ptr, ptr);
        default:
            heaphook_fatal("tlsf: %s(%p): invalid pointer (not a block of this heap)", call, ptr);
    }
}

/* The first payload of an area lies this far from its start (pool descriptor, block head). */
#define FIRST_PAYLOAD (sizeof(tlsf_pool) + BLOCK_START_OFFSET)

/* The fast check: ptr is a payload inside the remembered area [from - FIRST_PAYLOAD, from +
 * span), and its head and its successor's look as this heap writes them. */
static inline bool pointer_sane(const void *ptr, size_t head, uintptr_t from, uintptr_t span) {
    const uintptr_t p = (uintptr_t)ptr;
    return p - from < span && !(p & (ALIGN_SIZE - 1)) &&
           block_used_sane(block_from_ptr(ptr), head, from + span);
}

/* The largest footprint the thread cache keeps, plus one: a payload at least this far below its
 * area's end has a cached block's successor head inside the area. */
#define AREA_FAST_MARGIN ((uintptr_t)CACHE_CLASSES * 16)

static inline uintptr_t rotr4(uintptr_t x) {
    return (x >> 4) | (x << (sizeof(uintptr_t) * 8 - 4));
}

/* The pointer's area is not the one remembered in *a: look it up, remember it, check. */
static __attribute__((noinline)) void check_slow(const void *ptr, const char *call, area_cache *a) {
    uintptr_t lo, hi;
    const void *where = ptr;
    if (!areas_find((uintptr_t)ptr, &lo, &hi)) misuse(ptr, call, TLSF_ERR_FOREIGN, ptr);
    a->from = lo + FIRST_PAYLOAD;
    a->span = hi - lo - FIRST_PAYLOAD;
    a->fast = a->span > AREA_FAST_MARGIN ? (a->span - AREA_FAST_MARGIN) >> 4 : 0;
    const tlsf_error e = tlsf_check_used(ptr, lo, hi, &where);
    /* The predecessor may be changing under its owner (another thread, or the shared heap
     * under its lock): its boundary tag is checked where the block is merged (check_prev). */
    if (e != TLSF_OK && e != TLSF_ERR_PREV_HEADER) misuse(ptr, call, e, where);
}

/* Before a block is merged with its free predecessor (by the heap's owner, or under the
 * shared lock, so the predecessor is stable): the boundary tag it follows is sound. */
static inline void check_prev(const void *ptr) {
#if TLSF_FREE_CHECK
    const block_t *b = block_from_ptr(ptr);
    if (LIKELY(!(head_load(b) & HEAD_PREV_FREE))) return;
    /* The area's start: the thread's last area's when it holds ptr, else looked up. */
    const thread_heap *h = t_heap;
    const area_cache *a = h ? &h->area : &t_area;
    uintptr_t lo = a->from - FIRST_PAYLOAD, hi;
    if ((uintptr_t)ptr - a->from >= a->span && !areas_find((uintptr_t)ptr, &lo, &hi))
        misuse(ptr, "free", TLSF_ERR_FOREIGN, ptr);
    if (UNLIKELY(!block_prev_sane(b, lo))) misuse(ptr, "free", TLSF_ERR_PREV_HEADER, ptr);
#else
    (void)ptr;
#endif
}

/* The check of realloc, malloc_usable_size and of frees on threads without a heap. */
static inline void check_pointer(const void *ptr, const char *call) {
#if TLSF_FREE_CHECK
    thread_heap *h = t_heap;
    area_cache *a = h ? &h->area : &t_area;
    if (LIKELY(pointer_sane(ptr, head_load(block_from_ptr(ptr)), a->from, a->span))) return;
    check_slow(ptr, call, a);
#else
    (void)ptr;
    (void)call;
#endif
}

/*
 * Thread heaps.
 */
static void cache_flush(thread_heap *h, size_t max);
static size_t trim_thread_heap(thread_heap *h, size_t pad);

/* At its thread's exit: the cache is flushed whole (its blocks coalesce, other heaps' go back
 * to their owners, nothing waits for an adopter: a thread's exit is no real-time path), and
 * the heap is left for the next new thread. */
static void heap_release(void *arg) {
    thread_heap *h = (thread_heap *)arg;
    if (atomic_load_explicit(&h->trim_wanted, memory_order_relaxed))
        trim_thread_heap(h, 0); /* flushes the cache too */
    cache_flush(h, SIZE_MAX);
    t_heap = NULL;
    t_no_heap = true; /* what this thread still allocates while exiting goes to the shared heap */
    atomic_store_explicit(&h->state, HEAP_FREE, memory_order_release);
}

static thread_heap *heap_adopt(void) {
    t_no_heap = true; /* allocations made while adopting (pthread_setspecific) go shared */
    thread_heap *h = NULL;
    shared_lock_take();
    const unsigned count = atomic_load_explicit(&heap_count, memory_order_relaxed);
    for (unsigned id = 1; id <= count; id++) {
        if (atomic_load_explicit(&heaps[id]->state, memory_order_acquire) == HEAP_FREE) {
            h = heaps[id];
            break;
        }
    }
    if (!h && count < THREAD_HEAPS_MAX) {
        /* The heap's own structure is a block of the pool: prefaulted and locked with it. Its
         * last bytes, which may share a cache line with the next block of the pool, are the
         * control's list heads of the largest sizes, which a thread heap never uses (the
         * counters every call writes are at the control's start). */
        void *mem = shared_alloc_locked(sizeof(thread_heap) + tlsf_control_size(), 64);
        if (mem) {
            memset(mem, 0, sizeof(thread_heap));
            h = (thread_heap *)mem;
            for (unsigned cls = 0; cls < CACHE_CLASS_MIN; cls++) h->cache_count[cls] = CACHE_FULL;
            h->id = count + 1;
            h->tlsf = tlsf_create(h->control, h->id);
            heaps[h->id] = h;
            atomic_store_explicit(&heap_count, h->id, memory_order_release);
        }
    }
    if (h) atomic_store_explicit(&h->state, HEAP_OWNED, memory_order_relaxed);
    shared_lock_give();
    if (!h) return NULL; /* more than 255 threads at once: this one uses the shared heap */
    t_heap = h;
    pthread_setspecific(heap_key, h);
    t_no_heap = false;
    return h;
}

static void remote_push(thread_heap *h, void *ptr) {
    void *head = atomic_load_explicit(&h->remote, memory_order_relaxed);
    do {
        *(void **)ptr = head;
    } while (!atomic_compare_exchange_weak_explicit(&h->remote, &head, ptr, memory_order_release,
                                                    memory_order_relaxed));
}

/* The largest request the cache serves, and its class (footprint / 16) for size 1..that. */
#define CACHE_REQUEST_MAX (CACHE_CLASSES * 16 - 16 - BLOCK_OVERHEAD)
static inline unsigned cache_class(size_t size) {
    const unsigned cls = (unsigned)((size + BLOCK_OVERHEAD + ALIGN_SIZE - 1) >> 4);
    return cls < BLOCK_SIZE_MIN / 16 ? BLOCK_SIZE_MIN / 16 : cls;
}

/* Head bits of a block the leaf free path does not cache: free, aligned, footprint >= 1 KiB. */
#define CACHE_NOT_CACHED                        \
    (HEAD_FREE | HEAD_CLEAN | HEAD_ALIGN_MASK | \
     (HEAD_SIZE_MASK & ~(size_t)(CACHE_CLASSES * 16 - 1)))

_Static_assert(CACHE_DEPTH_MAX < CACHE_FULL, "a full class must stay full");

/* Frees at most max cached blocks, the largest classes first (the most bytes per free): h's
 * own into its TLSF heap, other heaps' blocks to their owners' remote stacks. */
static void cache_flush(thread_heap *h, size_t max) {
    for (unsigned cls = CACHE_CLASSES - 1; cls >= CACHE_CLASS_MIN && max > 0; cls--) {
        void **p;
        while (max > 0 && (p = (void **)h->cache_head[cls])) {
            h->cache_head[cls] = p[0];
            h->cache_count[cls]--;
            h->cache_bytes -= (size_t)cls << 4;
            max--;
            p[1] = NULL;
            const unsigned owner = tlsf_block_owner(p);
            if (owner == h->id) {
                check_prev(p);
                tlsf_free(h->tlsf, p);
            } else {
                remote_push(heaps[owner], p);
            }
        }
    }
}

static __attribute__((noinline, noreturn)) void double_free(void *ptr) {
    misuse(ptr, "free", TLSF_ERR_DOUBLE_FREE, ptr);
}

/* Keeps a freed block of footprint < 1 KiB in h's cache when the cache has room. The block may
 * belong to another thread heap (like glibc's tcache, the cache does not care who owns a block:
 * a thread that frees what others allocated reuses those blocks without a round trip); it goes
 * back to its owner when the cache is flushed. */
static inline bool cache_put(thread_heap *h, void *ptr, size_t head) {
    if (UNLIKELY(head & HEAD_FREE)) double_free(ptr);
    const size_t f = head & HEAD_SIZE_MASK;
    if (f >= CACHE_CLASSES * 16 || (head & HEAD_ALIGN_MASK)) return false;
    const unsigned cls = (unsigned)(f >> 4);
    void **p = (void **)ptr;
    if (UNLIKELY(p[1] == (void *)cache_key)) {
        for (void **c = (void **)h->cache_head[cls]; c; c = (void **)c[0])
            if (c == p) double_free(ptr);
    }
    if (h->cache_count[cls] >= cfg.cache_depth || h->cache_bytes + f > cfg.cache_bytes)
        return false;
    p[0] = h->cache_head[cls];
    p[1] = (void *)cache_key;
    h->cache_head[cls] = p;
    h->cache_count[cls]++;
    h->cache_bytes += f;
    return true;
}

/* Returning memory (the lazy pool only: not with PREFAULT, MLOCK or checking mode).
 * Each heap keeps the high-water mark of its used bytes, read at every free that reaches TLSF
 * (not the thread cache's). While the heap holds less than RELEASE_FRACTION of that mark (it
 * has been nearly emptied: the end of a phase, of a burst, of the program's work), each such
 * free gives back to the system the pages of the free block the freed block became part of
 * that may hold data (tlsf_free_span: its own and its unclean neighbours'; clean memory is not
 * given back twice), when they come to RELEASE_MIN bytes or more: one madvise(MADV_DONTNEED),
 * bounded by the size of what was freed since the block was last clean. A heap whose use stays
 * above that fraction (a loop that frees and allocates again, however large its blocks) never
 * releases, so its pages are not faulted in twice.
 *
 * A loop that empties its heap and fills it again at every round (a batch of blocks allocated,
 * then all freed) is nearly emptied at every round: it would give the same pages back and fault
 * them in again each time (335,000 page faults and 1.7x the time for 4 M batch frees of 16-128
 * bytes). So what a heap gives back is rate-limited, a bucket of bytes: RELEASE_BURST at once
 * (what a phase's end gives back), refilled at RELEASE_RATE per second. A span larger than the
 * tokens left is given back only when the bucket is full (nothing was given back for a while:
 * a real phase's end), and empties it. A span not given back stays unclean: a later free that
 * merges with it gives it back then. */
static bool release_budget(release_state *r) {
    const unsigned long long now = heaphook_os_coarse_ns();
    const unsigned long long us = (now - r->stamp) / 1000;
    r->stamp = now;
    const unsigned long long full_us = (unsigned long long)RELEASE_BURST / RELEASE_RATE * 1000000;
    if (us >= full_us)
        r->tokens = RELEASE_BURST;
    else {
        r->tokens += (size_t)(us * RELEASE_RATE / 1000000);
        if (r->tokens > RELEASE_BURST) r->tokens = RELEASE_BURST;
    }
    return r->tokens >= RELEASE_MIN;
}

static __attribute__((noinline)) void free_release(tlsf_t *t, release_state *r, void *ptr) {
    uintptr_t lo, hi;
    void *block = tlsf_free_span(t, ptr, heaphook_os_page_size(), &lo, &hi);
    const size_t bytes = hi - lo;
    if (bytes >= RELEASE_MIN) {
        if (bytes > r->tokens && r->tokens < RELEASE_BURST) return; /* stays unclean */
        heaphook_os_discard((void *)lo, bytes);
        r->tokens = bytes > r->tokens ? 0 : r->tokens - bytes;
    }
    /* Smaller remains (a few pages around a small block) are not worth a system call: they are
     * forgotten rather than given back with the next neighbour. */
    tlsf_mark_clean(block);
}

static void free_trimming(tlsf_t *t, void *ptr, size_t threshold);

/* tlsf_free; gives pages back when the heap has been nearly emptied (see above), or, with the
 * trim threshold set, when the free leaves a free block that large (free_trimming). */
static inline void free_block(tlsf_t *t, release_state *r, void *ptr, size_t head) {
    check_prev(ptr);
    const size_t threshold = atomic_load_explicit(&cfg.trim_threshold, memory_order_relaxed);
    if (UNLIKELY(threshold)) {
        free_trimming(t, ptr, threshold);
        return;
    }
    if (LIKELY(cfg.release)) {
        const size_t used = tlsf_used_bytes(t);
        if (used > r->peak) r->peak = used;
        if (UNLIKELY(used - (head & HEAD_SIZE_MASK) <= r->peak / RELEASE_FRACTION) &&
            release_budget(r))
            free_release(t, r, ptr);
        else
            tlsf_free(t, ptr);
    } else {
        tlsf_free(t, ptr);
    }
}

/* Frees a block of this thread's heap: into the cache when it has room, else to TLSF. */
static inline void heap_free_own(thread_heap *h, void *ptr) {
    const size_t head = head_load(block_from_ptr(ptr));
    if (!cache_put(h, ptr, head)) free_block(h->tlsf, &h->release, ptr, head);
}

/* Frees at most max blocks that other threads returned to h. */
static inline bool heap_drain(thread_heap *h, int max) {
    void *p = h->pending;
    if (LIKELY(!p)) {
        if (LIKELY(!atomic_load_explicit(&h->remote, memory_order_relaxed))) return false;
        p = atomic_exchange_explicit(&h->remote, NULL, memory_order_acquire);
    }
    for (int i = 0; p && i < max; i++) {
        void *next = *(void **)p;
        heap_free_own(h, p); /* into the cache when it has room */
        p = next;
    }
    h->pending = p;
    return true;
}

static inline void *heap_try(thread_heap *h, size_t size, size_t align) {
    return align > TLSF_ALIGN ? tlsf_memalign(h->tlsf, align, size) : tlsf_malloc(h->tlsf, size);
}

/* Borrows a chunk from the shared heap for a request (size, align) of h. */
static bool heap_add_chunk(thread_heap *h, size_t size, size_t align) {
    const size_t need = tlsf_pool_need(size, align);
    if (!need) return false;
    size_t want = h->chunk_bytes < CHUNK_MIN ? CHUNK_MIN : h->chunk_bytes;
    if (want > CHUNK_MAX) want = CHUNK_MAX;
    if (want < need) want = need;
    const size_t least = need < CHUNK_MIN ? CHUNK_MIN : need;
    shared_lock_take();
    /* The preferred size if the pool has it, else the least that serves, else grow. */
    void *chunk = tlsf_malloc(shared.tlsf, want);
    if (!chunk && want > least) chunk = tlsf_malloc(shared.tlsf, least);
    if (!chunk) chunk = shared_alloc_locked(least, 1);
    shared_lock_give();
    if (!chunk) return false;
    const size_t bytes = tlsf_block_size(chunk);
    if (tlsf_add_pool(h->tlsf, chunk, bytes) != 0) {
        shared_lock_take();
        tlsf_free(shared.tlsf, chunk);
        shared_lock_give();
        return false;
    }
    h->chunk_bytes += bytes;
    return true;
}

/* The thread heap has no block for the request: blocks other threads gave back, then part of the
 * thread cache flushed (CACHE_FLUSH_MAX blocks, the largest first; before a chunk is borrowed,
 * so that cached blocks coalesce before more of the pool is taken: a thread heap keeps what it
 * borrows), then a chunk of the pool. */
static void *heap_alloc_slow(thread_heap *h, size_t size, size_t align) {
    void *p;
    if (UNLIKELY(atomic_load_explicit(&h->trim_wanted, memory_order_relaxed)))
        trim_thread_heap(h, 0);
    if (heap_drain(h, DRAIN_SLOW) && (p = heap_try(h, size, align))) return p;
    if (h->cache_bytes) {
        cache_flush(h, CACHE_FLUSH_MAX);
        if ((p = heap_try(h, size, align))) return p;
    }
    if (heap_add_chunk(h, size, align) && (p = heap_try(h, size, align))) return p;
    return shared_alloc(size, align);
}

/*
 * Giving memory back on request: malloc_trim(pad) and HEAPHOOK_TLSF_TRIM_THRESHOLD.
 *
 * A trim gives back the pages of every free block of a heap that may hold data (tlsf_trim:
 * one madvise(MADV_DONTNEED) per such block, O(free blocks) of the heap), keeping the first
 * `pad` bytes of them. malloc_trim trims the calling thread's heap (its remote frees drained
 * and its cache flushed first, so that those blocks coalesce), the shared heap (under its
 * mutex: the pool's areas, added by growth or not, and what thread heaps have not borrowed),
 * and every heap left by an exited thread (taken as an adopter would take it). A heap owned by
 * another live thread is that thread's alone (no lock guards it): it is asked to trim itself,
 * which it does at its next malloc that misses its cache or at its exit. Areas are not unmapped:
 * their pages are given back, their addresses stay, since any thread may be reading the area
 * list with no lock to check a pointer.
 *
 * The threshold (glibc's M_TRIM_THRESHOLD, which trims the top of the heap when a free leaves
 * it larger than that): a free that leaves a free block of the threshold or more, or a whole
 * chunk or area free, gives back the pages of it that may hold data (tlsf_free_span), one
 * madvise; a smaller free block stays as it is until it merges into one that large. It
 * replaces the nearly-emptied rule above.
 *
 * Never with a prefaulted or locked pool (HEAPHOOK_TLSF_PREFAULT, HEAPHOOK_TLSF_MLOCK): that
 * memory is kept resident on purpose, for the real-time paths, so their worst case never
 * includes a trim (a threshold is refused there).
 */
static void trim_discard(void *addr, size_t bytes, void *user) {
    (void)heaphook_os_discard(addr, bytes);
    *(size_t *)user += bytes;
}

/* Every free block, clean ones too: free_release marks small remains clean without giving them
 * back. */
static size_t trim_heap(tlsf_t *t, size_t pad) {
    size_t given = 0;
    tlsf_trim(t, heaphook_os_page_size(), pad, true, trim_discard, &given);
    return given;
}

/* A heap's owner (or whoever holds it, see malloc_trim) trims it whole: its remote frees
 * drained and its cache flushed first, so those blocks coalesce and are given back too. */
static size_t trim_thread_heap(thread_heap *h, size_t pad) {
    atomic_store_explicit(&h->trim_wanted, false, memory_order_relaxed);
    heap_drain(h, INT_MAX); /* every block other threads gave back so far */
    cache_flush(h, SIZE_MAX);
    return trim_heap(h->tlsf, pad);
}

static __attribute__((noinline)) void free_trimming(tlsf_t *t, void *ptr, size_t threshold) {
    uintptr_t lo, hi;
    void *block = tlsf_free_span(t, ptr, heaphook_os_page_size(), &lo, &hi);
    /* Smaller: stays unclean, given back once it is part of a larger free block (or of a whole
     * free chunk, which a thread heap's chunks smaller than the threshold can only become). */
    if (tlsf_block_size(block) < threshold && !tlsf_block_is_whole_pool(block)) return;
    if (hi > lo) heaphook_os_discard((void *)lo, hi - lo);
    tlsf_mark_clean(block);
}

static int tlsf_backend_trim(size_t pad) {
    if (!cfg.trim) return 0; /* the pool stays resident: prefaulted or locked */
    size_t given = 0;
    thread_heap *own = t_heap;
    if (own) given += trim_thread_heap(own, pad);
    shared_lock_take();
    given += trim_heap(shared.tlsf, pad);
    const unsigned count = atomic_load_explicit(&heap_count, memory_order_relaxed);
    for (unsigned id = 1; id <= count; id++) {
        thread_heap *h = heaps[id];
        if (h == own) continue;
        int state = HEAP_FREE;
        /* A heap left by an exited thread: held as an adopter holds it (adoption takes the
         * shared lock, held here), trimmed, left again. */
        if (atomic_compare_exchange_strong_explicit(&h->state, &state, HEAP_OWNED,
                                                    memory_order_acquire, memory_order_relaxed)) {
            given += trim_thread_heap(h, pad);
            atomic_store_explicit(&h->state, HEAP_FREE, memory_order_release);
        } else if (state == HEAP_OWNED) {
            atomic_store_explicit(&h->trim_wanted, true, memory_order_relaxed);
        }
    }
    shared_lock_give();
    return given > 0;
}

/*
 * The backend's entry points.
 */
static void *alloc_slow(size_t size, size_t align);
static void *heap_alloc(thread_heap *h, size_t size, size_t align);

/* Takes p, the head of class cls of h's cache, off it (its marker cleared). */
static inline void *cache_take(thread_heap *h, unsigned cls, void **p) {
    h->cache_head[cls] = p[0];
    h->cache_count[cls]--;
    h->cache_bytes -= (size_t)cls << 4;
    p[1] = NULL;
    return p;
}

/* The common case, a cache hit, is a leaf: no call, no register saved. */
static void *tlsf_backend_alloc(size_t size, size_t align) {
    thread_heap *h = t_heap;
    if (LIKELY(align == 1 && size <= CACHE_REQUEST_MAX && h != NULL)) {
        const unsigned cls = cache_class(size);
        void **p = (void **)h->cache_head[cls];
        if (LIKELY(p != NULL && --h->drain_tick != 0)) return cache_take(h, cls, p);
    }
    return heap_alloc(h, size, align);
}

/* A cache miss, a request the cache does not serve, or the drain's turn (DRAIN_EVERY). */
static __attribute__((noinline)) void *heap_alloc(thread_heap *h, size_t size, size_t align) {
    if (LIKELY(h != NULL)) {
        h->drain_tick = DRAIN_EVERY;
        heap_drain(h, DRAIN_FAST);
        void **p = NULL;
        if (align == 1 && size <= CACHE_REQUEST_MAX) {
            const unsigned cls = cache_class(size);
            if ((p = (void **)h->cache_head[cls]) != NULL) return cache_take(h, cls, p);
        }
        p = heap_try(h, size, align);
        if (LIKELY(p != NULL)) return p;
        if (LIKELY(size < LARGE_REQUEST && align < LARGE_ALIGN))
            return heap_alloc_slow(h, size, align);
        /* A large request the thread heap's free memory cannot serve: the shared heap (no
         * chunk is borrowed for it). */
    }
    return alloc_slow(size, align);
}

static void *alloc_slow(size_t size, size_t align) {
    if (cfg.thread_heaps && !t_heap && !t_no_heap && heap_adopt())
        return tlsf_backend_alloc(size, align);
    return shared_alloc(size, align);
}

static void dealloc_slow(void *ptr);
static void heap_dealloc(thread_heap *h, void *ptr);
static void heap_dealloc_checked(thread_heap *h, void *ptr);

/* The common case, a push on the cache, is a leaf: a block of footprint < 1 KiB, not aligned,
 * not free (nor clean), not marked as cached, of a valid thread heap (this one's or another's),
 * with room in its class. Everything else (including the double-free checks) goes to
 * heap_dealloc.
 *
 * The check on every free (see "Checks on every call") is folded into the same tests: one
 * compare puts the pointer, 16-byte aligned, in h's last area at least a KiB before its end;
 * the owner id is read with the heads' key taken off (one xor), so that a wrong tag makes it
 * larger than any heap's (the owner test fails); CACHE_NOT_CACHED rejects a free or clean
 * head and bounds the size below 1 KiB (so the successor's head lies inside the area), and the
 * classes below the smallest block (0 and 1) are kept full, so a size of 0 or 16 is not cached
 * either. Then the successor's head: the same top 12 bits, its tag and owner (one xor and one
 * shift). Whatever fails goes to heap_dealloc_checked, which checks in full (the successor's
 * flags too) and names the misuse; a checked free that the cache cannot take goes to
 * heap_dealloc. */
static void tlsf_backend_dealloc(void *ptr) {
    thread_heap *h = t_heap;
    if (LIKELY(h != NULL)) {
        block_t *b = block_from_ptr(ptr);
        const size_t head = head_load(b);
        void **p = (void **)ptr;
#if TLSF_FREE_CHECK
        if (UNLIKELY(rotr4((uintptr_t)ptr - h->area.from) >= h->area.fast)) goto checked;
        /* The owner id read with the key taken off (tlsf.c): larger than any heap's id (the
         * owner test below fails) unless the tag matches. */
        const unsigned owner = (unsigned)((head ^ tlsf_head_key) >> HEAD_OWNER_SHIFT);
        if (LIKELY(!(head & CACHE_NOT_CACHED) &&
                   owner - 1 < atomic_load_explicit(&heap_count, memory_order_relaxed))) {
            /* CACHE_NOT_CACHED passed: the size is below 1 KiB, the successor's head inside
             * the area. Its tag and owner: the very same top 12 bits as ours (its flags are
             * left to the full check: they add 2 bits to the 12 a damaged head must match by
             * chance). */
            const size_t size = head & (CACHE_CLASSES * 16 - ALIGN_SIZE);
            const size_t nhead = head_load(block_at(b, size));
            if (UNLIKELY((nhead ^ head) >> HEAD_OWNER_SHIFT)) goto checked;
            const unsigned cls = (unsigned)(size >> 4);
            if (LIKELY(h->cache_count[cls] < cfg.cache_depth &&
                       h->cache_bytes + size <= cfg.cache_bytes && p[1] != (void *)cache_key)) {
                p[0] = h->cache_head[cls];
                p[1] = (void *)cache_key;
                h->cache_head[cls] = p;
                h->cache_count[cls]++;
                h->cache_bytes += size;
                return;
            }
            /* Checked but not cached (its class is full, or it may be cached already: the
             * cache's own double-free test follows); a size of 0 or 16 (classes 0 and 1, kept
             * full) is no block. */
            if (LIKELY(cls >= CACHE_CLASS_MIN)) {
                heap_dealloc(h, ptr);
                return;
            }
        }
    checked:
        heap_dealloc_checked(h, ptr);
        return;
#else
        const size_t size = head & HEAD_SIZE_MASK;
        const unsigned cls = (unsigned)(size >> 4);
        const unsigned owner = (unsigned)((head & HEAD_OWNER_MASK) >> HEAD_OWNER_SHIFT);
        if (LIKELY(!(head & CACHE_NOT_CACHED) &&
                   owner - 1 < atomic_load_explicit(&heap_count, memory_order_relaxed) &&
                   h->cache_count[cls] < cfg.cache_depth &&
                   h->cache_bytes + size <= cfg.cache_bytes && p[1] != (void *)cache_key)) {
            p[0] = h->cache_head[cls];
            p[1] = (void *)cache_key;
            h->cache_head[cls] = p;
            h->cache_count[cls]++;
            h->cache_bytes += size;
            return;
        }
#endif
    }
    heap_dealloc(h, ptr);
}

/* A free the leaf path did not cache: the full check (which names any misuse), then the free. */
static __attribute__((noinline, unused)) void heap_dealloc_checked(thread_heap *h, void *ptr) {
    if (UNLIKELY(!pointer_sane(ptr, head_load(block_from_ptr(ptr)), h->area.from, h->area.span)))
        check_slow(ptr, "free", &h->area);
    heap_dealloc(h, ptr);
}

static __attribute__((noinline)) void heap_dealloc(thread_heap *h, void *ptr) {
    if (UNLIKELY(h == NULL)) check_pointer(ptr, "free");
    if (LIKELY(h != NULL)) {
        const size_t head = head_load(block_from_ptr(ptr));
        const unsigned owner =
            (unsigned)(head_owner_bits(block_from_ptr(ptr), head) >> HEAD_OWNER_SHIFT);
        if (LIKELY(owner == h->id)) {
            if (!cache_put(h, ptr, head)) free_block(h->tlsf, &h->release, ptr, head);
            return;
        }
        /* Another thread heap's block (a valid id): into this thread's cache if it fits. */
        if (owner != 0 && owner <= atomic_load_explicit(&heap_count, memory_order_relaxed) &&
            cache_put(h, ptr, head))
            return;
    }
    dealloc_slow(ptr);
}

static void dealloc_slow(void *ptr) {
    if (cfg.check) {
        shared_lock_take();
        check_pointer_locked(ptr, "free");
        tlsf_free(shared.tlsf, ptr);
        shared_lock_give();
        return;
    }
    const unsigned owner = tlsf_block_owner(ptr);
    if (owner == 0) {
        shared_lock_take();
        free_block(shared.tlsf, &shared_release, ptr, head_load(block_from_ptr(ptr)));
        shared_lock_give();
        return;
    }
    thread_heap *o =
        owner <= atomic_load_explicit(&heap_count, memory_order_acquire) ? heaps[owner] : NULL;
    if (UNLIKELY(!o)) misuse(ptr, "free", TLSF_ERR_FOREIGN, ptr);
    remote_push(o, ptr);
}

static size_t tlsf_backend_block_size(void *ptr) {
    check_pointer(ptr, "malloc_usable_size");
    if (UNLIKELY(cfg.check)) {
        shared_lock_take();
        check_pointer_locked(ptr, "malloc_usable_size");
        shared_lock_give();
    }
    return tlsf_block_size(ptr);
}

static void *tlsf_backend_realloc(void *ptr, size_t size) {
    check_pointer(ptr, "realloc");
    if (UNLIKELY(cfg.check)) {
        shared_lock_take();
        check_pointer_locked(ptr, "realloc");
        const size_t old = tlsf_block_size(ptr);
        void *q = tlsf_resize(shared.tlsf, ptr, size);
        if (!q) {
            const size_t align = tlsf_block_align(ptr);
            q = shared_alloc_locked(size, align > TLSF_ALIGN ? align : 1);
            if (q) {
                memcpy(q, ptr, old < size ? old : size);
                tlsf_free(shared.tlsf, ptr);
            }
        }
        shared_lock_give();
        return q;
    }
    const size_t old = tlsf_block_size(ptr);
    /* The realloc policy (tlsf.h; the addon's replay follows it too): a block within a quarter
     * above the size asked stays; growth to a page or more asks for a quarter more room. */
    if (tlsf_realloc_keeps(old, size)) return ptr;
    if (!cfg.thread_heaps) {
        /* One heap: the policy exactly as the addon replays it (heaphook recommend). */
        shared_lock_take();
        void *q = tlsf_growing_realloc(&shared, ptr, size, 1);
        shared_lock_give();
        return q;
    }
    const size_t roomy = tlsf_realloc_room(old, size);
    thread_heap *h = t_heap;
    const unsigned owner = tlsf_block_owner(ptr);
    if (h && owner == h->id) {
        if (tlsf_resize(h->tlsf, ptr, roomy)) return ptr;
        if (roomy != size && tlsf_resize(h->tlsf, ptr, size)) return ptr;
    } else if (owner == 0) {
        shared_lock_take();
        void *q = tlsf_resize(shared.tlsf, ptr, roomy);
        if (!q && roomy != size) q = tlsf_resize(shared.tlsf, ptr, size);
        shared_lock_give();
        if (q) return q;
    } else if (size <= old) {
        return ptr; /* another thread's block: shrinking it would touch that thread's heap */
    }
    const size_t align = tlsf_block_align(ptr);
    void *q = tlsf_backend_alloc(roomy, align > TLSF_ALIGN ? align : 1);
    if (!q && roomy != size) q = tlsf_backend_alloc(size, align > TLSF_ALIGN ? align : 1);
    if (!q) return NULL;
    memcpy(q, ptr, old < size ? old : size);
    tlsf_backend_dealloc(ptr);
    return q;
}

/*
 * HEAPHOOK_TLSF_STATS=1: the entry points below wrap those above (the table is chosen before
 * init, so without the variable nothing is counted and nothing costs). Bytes in use are the
 * usable sizes of the blocks the program holds (malloc_usable_size); one atomic add per call,
 * and a compare-and-swap when a new peak or a new largest request is reached.
 */
static _Atomic size_t stat_in_use, stat_peak, stat_largest;

static inline void stat_raise(_Atomic size_t *mark, size_t value) {
    size_t seen = atomic_load_explicit(mark, memory_order_relaxed);
    while (value > seen && !atomic_compare_exchange_weak_explicit(
                               mark, &seen, value, memory_order_relaxed, memory_order_relaxed)) {
    }
}

static void *stats_alloc(size_t size, size_t align) {
    void *p = tlsf_backend_alloc(size, align);
    stat_raise(&stat_largest, size);
    if (p) {
        const size_t now =
            atomic_fetch_add_explicit(&stat_in_use, tlsf_block_size(p), memory_order_relaxed) +
            tlsf_block_size(p);
        stat_raise(&stat_peak, now);
    }
    return p;
}

static void stats_dealloc(void *ptr) {
    check_pointer(ptr, "free"); /* before its head is read for the size */
    atomic_fetch_sub_explicit(&stat_in_use, tlsf_block_size(ptr), memory_order_relaxed);
    tlsf_backend_dealloc(ptr);
}

static void *stats_realloc(void *ptr, size_t size) {
    check_pointer(ptr, "realloc");
    const size_t old = tlsf_block_size(ptr);
    void *q = tlsf_backend_realloc(ptr, size);
    stat_raise(&stat_largest, size);
    if (q) {
        const size_t now = atomic_fetch_add_explicit(&stat_in_use, tlsf_block_size(q) - old,
                                                     memory_order_relaxed) +
                           (tlsf_block_size(q) - old);
        stat_raise(&stat_peak, now);
    }
    return q;
}

/*
 * Fork: the shared lock is the only lock. A thread heap that belonged to another thread may
 * have been half-way through an operation at the fork: the child never touches it again
 * (its blocks freed in the child are pushed on its remote stack and stay there).
 */
static void tlsf_backend_fork_prepare(void) {
    shared_lock_take();
}
static void tlsf_backend_fork_parent(void) {
    shared_lock_give();
}
static void tlsf_backend_fork_child(void) {
    pthread_mutex_init(&shared_lock, NULL);
    const unsigned count = atomic_load_explicit(&heap_count, memory_order_relaxed);
    for (unsigned id = 1; id <= count; id++) {
        if (heaps[id] != t_heap &&
            atomic_load_explicit(&heaps[id]->state, memory_order_relaxed) == HEAP_OWNED)
            atomic_store_explicit(&heaps[id]->state, HEAP_DEAD, memory_order_relaxed);
    }
}

/*
 * Statistics.
 */
typedef struct tlsf_totals {
    heaphook_stats s;
    size_t areas;
    size_t thread_heaps;
    size_t chunk_bytes;
} tlsf_totals;

static void collect(tlsf_totals *out) {
    memset(out, 0, sizeof(*out));
    tlsf_stats g;
    shared_lock_take();
    tlsf_get_stats(shared.tlsf, &g);
    out->s.pool_bytes = shared.total;
    out->s.growth_count = shared.growth_count;
    shared_lock_give();
    out->areas = g.pool_count;
    size_t used = g.used_bytes, used_blocks = g.used_blocks;
    size_t free = g.free_bytes, free_blocks = g.free_blocks;
    const unsigned count = atomic_load_explicit(&heap_count, memory_order_acquire);
    for (unsigned id = 1; id <= count; id++) {
        tlsf_stats h;
        /* Another thread's counters, read while it works: approximate. */
        tlsf_get_counters(heaps[id]->tlsf, &h);
        used = used - (h.pool_bytes + h.pool_count * TLSF_BLOCK_OVERHEAD) + h.used_bytes;
        used_blocks = used_blocks - h.pool_count + h.used_blocks;
        free += h.free_bytes;
        free_blocks += h.free_blocks;
        /* Cached blocks are free for the program, used for TLSF. */
        size_t cached_blocks = 0;
        for (unsigned cls = CACHE_CLASS_MIN; cls < CACHE_CLASSES; cls++)
            cached_blocks += heaps[id]->cache_count[cls];
        size_t cached_bytes = 0;
        for (unsigned cls = CACHE_CLASS_MIN; cls < CACHE_CLASSES; cls++)
            cached_bytes += (size_t)heaps[id]->cache_count[cls] * cls * 16;
        used -= cached_bytes;
        free += cached_bytes;
        used_blocks -= cached_blocks;
        free_blocks += cached_blocks;
        out->chunk_bytes += h.pool_bytes;
        if (atomic_load_explicit(&heaps[id]->state, memory_order_relaxed) == HEAP_OWNED)
            out->thread_heaps++;
    }
    out->s.used_bytes = used;
    out->s.used_blocks = used_blocks;
    out->s.free_bytes = free;
    out->s.free_blocks = free_blocks;
    out->s.largest_free_block = g.largest_free;
    out->s.peak_used_bytes = atomic_load_explicit(&stat_peak, memory_order_relaxed);
    out->s.largest_request = atomic_load_explicit(&stat_largest, memory_order_relaxed);
}

static int tlsf_backend_get_stats(heaphook_stats *out) {
    tlsf_totals t;
    collect(&t);
    *out = t.s;
    return 0;
}

static void print_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void print_line(int fd, const char *fmt, ...) {
    char line[256];
    va_list args;
    va_start(args, fmt);
    size_t len = heaphook_format(line, sizeof line - 1, fmt, args);
    va_end(args);
    line[len++] = '\n';
    heaphook_write_all(fd, line, len);
}

static void tlsf_backend_print_stats(int fd) {
    tlsf_totals t;
    collect(&t);
    print_line(fd, "heaphook tlsf: pool %zu bytes in %zu area(s), grew %zu time(s)", t.s.pool_bytes,
               t.areas, t.s.growth_count);
    print_line(fd, "  in use:       %zu bytes in %zu blocks", t.s.used_bytes, t.s.used_blocks);
    print_line(fd, "  free:         %zu bytes in %zu blocks, largest %zu", t.s.free_bytes,
               t.s.free_blocks, t.s.largest_free_block);
    print_line(fd, "  thread heaps: %zu active, %u created, %zu bytes borrowed", t.thread_heaps,
               atomic_load(&heap_count), t.chunk_bytes);
    print_line(fd,
               "  options:      INITIAL_MEMPOOL_SIZE=%zu ADDITIONAL_MEMPOOL_SIZE=%zu "
               "prefault=%d mlock=%d check=%d thread_heaps=%d",
               cfg.initial, cfg.additional, cfg.prefault, cfg.mlock, cfg.check, cfg.thread_heaps);
    if (cfg.stats)
        print_line(fd, "  counted:      peak in use %zu bytes, largest request %zu bytes",
                   t.s.peak_used_bytes, t.s.largest_request);
}

/*
 * Initialisation.
 */

/* A pool size no mapping can ever have stops the program before main (exit 78): above
 * TLSF_AREA_MAX (32 TiB, the largest area TLSF manages; the address space of x86-64 and arm64
 * is 128-256 TiB), or above the address-space limit (RLIMIT_AS, ulimit -v). */
static void area_size_possible(const char *name, size_t bytes) {
    char expected[112];
    struct rlimit as;
    if (bytes > TLSF_AREA_MAX) {
        heaphook_formatf(expected, sizeof expected,
                         "a size of at most %zu bytes (32TiB, the largest area TLSF manages)",
                         (size_t)TLSF_AREA_MAX);
    } else if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
               bytes > as.rlim_cur) {
        heaphook_formatf(expected, sizeof expected,
                         "a size below the address-space limit (ulimit -v) of %zu bytes",
                         (size_t)as.rlim_cur);
    } else {
        return;
    }
    heaphook_config_fail(name, heaphook_env_get(name, NULL), expected, "100M");
}
static int tlsf_backend_init(void) {
    cfg.initial = heaphook_env_size("INITIAL_MEMPOOL_SIZE", NULL, DEFAULT_POOL_SIZE);
    cfg.additional = heaphook_env_size("ADDITIONAL_MEMPOOL_SIZE", NULL, DEFAULT_POOL_SIZE);
    /* A pool needs room for its bookkeeping and one block: below a page is a mistake. */
    if (cfg.initial != 0 && cfg.initial < AREA_MIN)
        heaphook_config_fail("INITIAL_MEMPOOL_SIZE", heaphook_env_get("INITIAL_MEMPOOL_SIZE", NULL),
                             "0 or a size of at least 4096 bytes", "100M");
    if (cfg.additional < AREA_MIN)
        heaphook_config_fail("ADDITIONAL_MEMPOOL_SIZE",
                             heaphook_env_get("ADDITIONAL_MEMPOOL_SIZE", NULL),
                             "a size of at least 4096 bytes", "100M");
    area_size_possible("INITIAL_MEMPOOL_SIZE", cfg.initial);
    area_size_possible("ADDITIONAL_MEMPOOL_SIZE", cfg.additional);
    /* HEAPHOOK_TLSF_COMPAT=tier4: tier4/heaphook's libpreloaded_tlsf.so where it differs by
     * choice: one heap under one mutex (no thread heaps, so no thread cache), the first pool
     * touched at start-up (tier4 memsets it; additions are not touched), no pages given back,
     * every growth said at warn level. The variables below still override these defaults. */
    static const char *const compat_names[] = {"none", "tier4"};
    cfg.tier4 = heaphook_env_choice("HEAPHOOK_TLSF_COMPAT", NULL, compat_names, 2, 0) == 1;
    cfg.prefault = heaphook_env_bool("HEAPHOOK_TLSF_PREFAULT", NULL, false);
    cfg.mlock = heaphook_env_bool("HEAPHOOK_TLSF_MLOCK", NULL, false);
    cfg.check = heaphook_env_bool("HEAPHOOK_TLSF_CHECK", NULL, false);
    cfg.thread_heaps =
        heaphook_env_bool("HEAPHOOK_TLSF_THREAD_HEAPS", NULL, !cfg.tier4) && !cfg.check;
    cfg.cache_depth = (unsigned)heaphook_env_long("HEAPHOOK_TLSF_CACHE", NULL, CACHE_DEPTH_DEFAULT,
                                                  0, CACHE_DEPTH_MAX);
    cfg.cache_bytes = heaphook_env_size("HEAPHOOK_TLSF_CACHE_BYTES", NULL, CACHE_BYTES_DEFAULT);
    if (cfg.cache_bytes > CACHE_BYTES_MAX)
        heaphook_config_fail("HEAPHOOK_TLSF_CACHE_BYTES",
                             heaphook_env_get("HEAPHOOK_TLSF_CACHE_BYTES", NULL),
                             "a size of at most 64M", "512K");
    cfg.trim = !cfg.prefault && !cfg.mlock;
    const size_t trim_threshold = heaphook_env_size("HEAPHOOK_TLSF_TRIM_THRESHOLD", NULL, 0);
    if (trim_threshold && !cfg.trim)
        heaphook_config_fail("HEAPHOOK_TLSF_TRIM_THRESHOLD",
                             heaphook_env_get("HEAPHOOK_TLSF_TRIM_THRESHOLD", NULL),
                             "0 (off) with HEAPHOOK_TLSF_PREFAULT or HEAPHOOK_TLSF_MLOCK, which "
                             "keep the pool resident",
                             "0");
    atomic_store_explicit(&cfg.trim_threshold, trim_threshold, memory_order_relaxed);
    cfg.release = heaphook_env_bool("HEAPHOOK_TLSF_RELEASE", NULL, !cfg.tier4) && !cfg.prefault &&
                  !cfg.mlock && !cfg.check;
    /* HEAPHOOK_TLSF_ON_GROW and HEAPHOOK_TLSF_STATS: see grow_report and stats_alloc. */
    static const char *const on_grow_names[] = {"ignore", "warn", "abort"};
    cfg.on_grow = heaphook_env_choice("HEAPHOOK_TLSF_ON_GROW", NULL, on_grow_names, 3, 0);
    cfg.stats = stats_wanted();
    /* A pool touched at start-up costs its size in RSS anyway: huge pages cost nothing more
     * there and keep the pool's TLB misses (a page walk per random block on a large heap) out
     * of the calls. A lazy pool would fault in 2 MiB where it touches 4 KiB: off by default. */
    cfg.huge_pages = heaphook_env_bool("HEAPHOOK_TLSF_HUGE_PAGES", NULL, cfg.prefault || cfg.mlock);
    cache_key = ((uintptr_t)&cache_key * 0x9E3779B97F4A7C15ull) | 1;
#if TLSF_HEAD_KEY
    /* The heads' key (tlsf.c), nibbles t, m, t from the top: t is 8..14 and m any (drawn from
     * the kernel's random bytes for this process, AT_RANDOM), so that the top 12 bits of a
     * head (the key XOR the owner id) are never those of what programs usually store or
     * overrun a block with: a top nibble below 8 (zero, small numbers, user-space pointers,
     * ASCII text) or 15 (small negative numbers); a repeated byte only for owner ids that are
     * multiples of 16. Set before any heap exists, never changed (a forked child keeps it). */
    const unsigned char *random = (const unsigned char *)getauxval(AT_RANDOM);
    uint64_t bits = (uintptr_t)&cache_key * 0xD6E8FEB86659FD93ull;
    if (random) memcpy(&bits, random + 8, sizeof bits);
    const size_t top = 8 + (size_t)(bits % 7), middle = (size_t)(bits >> 8) & 0xf;
    tlsf_head_key = ((top << 8) | (middle << 4) | top) << HEAD_OWNER_SHIFT;
#endif

    if (tlsf_control_size() > sizeof shared_control) {
        heaphook_log_error("tlsf: control structure larger than its static buffer");
        return -1;
    }
    static const tlsf_grow_ops ops = {area_map, area_probe, area_grew, NULL};
    /* Still all zero: .bss, and init runs once per process. */
    tlsf_t *t = tlsf_create_in_zeroed(shared_control, 0);
    if (tlsf_growing_init(&shared, t, cfg.initial, cfg.additional, &ops) != 0) {
        char expected[96];
        heaphook_formatf(expected, sizeof expected,
                         "a size this system can map now (mmap of %zu bytes failed, errno %d)",
                         cfg.initial, errno);
        heaphook_config_fail("INITIAL_MEMPOOL_SIZE", heaphook_env_get("INITIAL_MEMPOOL_SIZE", NULL),
                             expected, "100M");
    }
    if (cfg.thread_heaps && pthread_key_create(&heap_key, heap_release) != 0)
        cfg.thread_heaps = false;
    heaphook_log_debug(
        "tlsf: pool of %zu bytes, additions of %zu; prefault=%d mlock=%d check=%d "
        "thread_heaps=%d compat=%s on_grow=%s stats=%d",
        cfg.initial, cfg.additional, cfg.prefault, cfg.mlock, cfg.check, cfg.thread_heaps,
        cfg.tier4 ? "tier4" : "none", on_grow_names[cfg.on_grow], cfg.stats);
    return 0;
}

/* After the core's constructor (101: the backend is ready): the unwinder's first call loads
 * libgcc_s, which allocates; done here, where no lock of ours is held, so that a growth
 * report later allocates nothing. */
__attribute__((constructor(102))) static void tlsf_backend_warm_up(void) {
    if (cfg.on_grow == ON_GROW_IGNORE) return;
    void *frames[4];
    (void)backtrace(frames, 4);
}

/* HEAPHOOK_TLSF_STATS=1: one block of lines on the report fd at exit (the fd the core opened at
 * start-up: a program may have closed stderr by then). */
__attribute__((destructor)) static void tlsf_backend_exit_stats(void) {
    if (!cfg.stats) return;
    tlsf_totals t;
    collect(&t);
    const int fd = heaphook_report_fd();
    print_line(fd,
               "heaphook tlsf[%d] stats at exit: pool %zu bytes in %zu area(s), grew %zu time(s)",
               (int)getpid(), t.s.pool_bytes, t.areas, t.s.growth_count);
    print_line(fd, "  peak in use:     %zu bytes", t.s.peak_used_bytes);
    print_line(fd, "  largest request: %zu bytes", t.s.largest_request);
    print_line(fd, "  in use at exit:  %zu bytes",
               atomic_load_explicit(&stat_in_use, memory_order_relaxed));
}

/* mallopt: M_TRIM_THRESHOLD sets the trim threshold (as HEAPHOOK_TLSF_TRIM_THRESHOLD does; 0
 * or less turns it off), refused (0) with a prefaulted or locked pool; other parameters have no
 * meaning for TLSF and are accepted and ignored, as the core does for a backend without one. */
static int tlsf_backend_mallopt(int param, int value) {
    if (param != M_TRIM_THRESHOLD) return 1;
    if (value > 0 && !cfg.trim) return 0;
    atomic_store_explicit(&cfg.trim_threshold, value > 0 ? (size_t)value : 0, memory_order_relaxed);
    return 1;
}

static heaphook_backend tlsf_backend = {
    .name = "tlsf",
    .init = tlsf_backend_init,
    .alloc = tlsf_backend_alloc,
    .dealloc = tlsf_backend_dealloc,
    .get_block_size = tlsf_backend_block_size,
    .realloc = tlsf_backend_realloc,
    .fork_prepare = tlsf_backend_fork_prepare,
    .fork_parent = tlsf_backend_fork_parent,
    .fork_child = tlsf_backend_fork_child,
    .get_stats = tlsf_backend_get_stats,
    .print_stats = tlsf_backend_print_stats,
    .mallopt = tlsf_backend_mallopt,
    .trim = tlsf_backend_trim,
    /* A free's only system calls are heaphook_os_discard's (which keeps errno) and the shared
     * mutex's futex (glibc's lock does not set errno); a misuse ends the program. */
    .dealloc_keeps_errno = 1,
};

/* HEAPHOOK_TLSF_STATS, read before init (the reader allocates nothing): the core copies the
 * table once, before init, so the table itself decides whether calls are counted. */
static bool stats_wanted(void) {
    return heaphook_env_bool("HEAPHOOK_TLSF_STATS", NULL, false);
}

const heaphook_backend *heaphook_backend_get(void) {
    if (stats_wanted()) {
        tlsf_backend.alloc = stats_alloc;
        tlsf_backend.dealloc = stats_dealloc;
        tlsf_backend.realloc = stats_realloc;
    }
    return &tlsf_backend;
}
