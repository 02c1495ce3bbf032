/*
 * backend_internal.h — what the files of the TLSF backend (libheaphook_tlsf.so) share: the
 * tunables, the thread heap and configuration types, the globals (each defined in the file of
 * its concern), the shared lock, the inline parts of the check on every call, and the functions
 * one file calls in another. Hidden: nothing here is exported from the library.
 *
 *   tlsf_backend.c   the overview, configuration and initialisation, fork, the backend table
 *   backend_pool.c   the pool: its areas, their growth and its report, the shared heap
 *   backend_check.c  checking mode and the misuse messages of the check on every call
 *   backend_heaps.c  thread heaps, their cache and remote frees; malloc, free, realloc
 *   backend_trim.c   memory given back: a nearly emptied heap, malloc_trim, the threshold
 *   backend_stats.c  HEAPHOOK_TLSF_STATS and the statistics calls
 * The TLSF core (tlsf.c, tlsf_block.h) and the growth policy (tlsf_grow.c) are compiled beside
 * them; link-time optimisation inlines the core's O(1) paths into the backend's fast paths.
 */
#ifndef TLSF_BACKEND_INTERNAL_H
#define TLSF_BACKEND_INTERNAL_H

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <malloc.h>
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
#include "tlsf.h"
#include "tlsf_block.h"
#include "tlsf_grow.h"

/* The check on every free, realloc and malloc_usable_size (backend_internal.h and
 * backend_check.c); the CMake option TLSF_FREE_CHECK=OFF builds the library without it, to
 * measure what it costs. Heads are then keyed by a per-process key (tlsf_block.h,
 * TLSF_HEAD_KEY): what makes the check's tag test free. Both come from the target's
 * definitions, the same for every file of the library. */
#ifndef TLSF_FREE_CHECK
#error "TLSF_FREE_CHECK is defined by the heaphook_tlsf target (CMakeLists.txt)"
#endif
#if TLSF_HEAD_KEY != TLSF_FREE_CHECK
#error "TLSF_HEAD_KEY must equal TLSF_FREE_CHECK"
#endif

#pragma GCC visibility push(hidden)

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
/* Blocks a thread frees into another thread's heap are pushed on its remote stack together, at
 * most REMOTE_BATCH_MAX of them or REMOTE_BATCH_BYTES (whichever comes first), with one CAS:
 * a consumer's CAS per free and the producer's exchange fought over one cache line. What a
 * thread holds back for another heap is thus below REMOTE_BATCH_BYTES plus one block, until its
 * next free to another heap, its next cache miss, malloc_trim or its exit. */
#define REMOTE_BATCH_MAX 32
#define REMOTE_BATCH_BYTES ((size_t)64 << 10)
#define CACHE_CLASSES 128        /* footprints 32 .. 2032 bytes, one class per 16 bytes */
#define CACHE_DEPTH_DEFAULT 4096 /* blocks per class: the byte budget below is the real bound */
#define CACHE_DEPTH_MAX 65000
#define CACHE_BYTES_DEFAULT ((size_t)512 << 10) /* bytes a thread's cache holds at most */
#define CACHE_BYTES_MAX ((size_t)64 << 20)
/* Blocks a malloc short of memory flushes from its cache before it borrows a chunk: the flush
 * is spread over such mallocs, so no call frees more than this many blocks into TLSF. */
#define CACHE_FLUSH_MAX 64
/* A malloc whose class of the cache is empty takes one TLSF block for up to CACHE_REFILL_MAX
 * blocks of its footprint (CACHE_REFILL_BYTES at most, and what the cache has room for), splits
 * it and caches all but the one it returns: one TLSF search and split for several blocks, as
 * a free list of mimalloc's page is filled at once. */
#define CACHE_REFILL_MAX 8
#define CACHE_REFILL_BYTES ((size_t)4096)
/* A free whose class is full takes at most this many of the blocks freed last into its class
 * along to TLSF, when they lie next to it and to each other (one TLSF free for all of them). */
#define CACHE_SPILL_MAX 32
/* ... and looks at this many classes at most to find blocks to give back. */
#define CACHE_SPILL_SCAN 16
/* The first class a block can have (the smallest block is 32 bytes). Classes below it have
 * no room, ever, so that the leaf free path never caches a head whose size says 0 or 16 (the
 * check on every free relies on it). */
#define CACHE_CLASS_MIN (BLOCK_SIZE_MIN / 16)
#define CONTROL_BYTES 12288 /* >= tlsf_control_size(), checked at init */
#define RELEASE_FRACTION 8  /* a heap below 1/8 of its high-water mark gives pages back */
#define RELEASE_MIN ((size_t)64 << 10)    /* ... when they come to 64 KiB or more at once */
#define RELEASE_BURST ((size_t)256 << 20) /* ... up to 256 MiB at once (a phase's end) */
#define RELEASE_RATE ((size_t)32 << 20)   /* ... then 32 MiB per second (see free_release) */
/* Free blocks a phase's end looks at, the largest first, to give back those freed before it: a
 * bound on that free's work (tlsf_stress's largest free: 2,156 instructions with 16, 3,671 with
 * 32, 660 without the sweep). A heap's chunks are 256 KiB, then a quarter of its size each, so
 * its 16 largest hold about 90 % of a heap over 15 MiB: tlsf_probe release left 3.7 of 64 MiB
 * resident (1.8 with 32; 12.8 with 8, which met other free blocks first). */
#define RELEASE_SWEEP_VISITS 16
#define AREA_MIN ((size_t)4096) /* smallest INITIAL/ADDITIONAL_MEMPOOL_SIZE accepted */

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
    /* The thread cache: freed blocks of footprint < 2 KiB kept whole (not coalesced), at most
     * cfg.cache_depth per footprint and cfg.cache_bytes in all, handed out again by the next
     * malloc of that footprint. Indexed by footprint / 16 (classes 0 and 1 stay empty: the
     * smallest block is 32 bytes). */
    void *cache_head[CACHE_CLASSES];
    /* Both bounds kept as what is left, so that the leaf free path tests each with one load and
     * one compare: the blocks a class may still take (cfg.cache_depth minus those cached; 0
     * for ever in classes 0 and 1, see CACHE_CLASS_MIN), and the bytes the cache may still
     * take (cfg.cache_bytes minus the footprints cached). */
    uint16_t cache_room[CACHE_CLASSES];
    unsigned spill_cursor; /* the class the next spill looks at first */
    unsigned miss_class;   /* the class of the last cache miss (see CACHE_REFILL_MAX) */
    unsigned miss_run;     /* log2 of the blocks its next refill takes (1..3) */
    size_t cache_left;
    unsigned drain_tick; /* cache hits left before the next drain (see DRAIN_EVERY) */
    /* Blocks this heap's thread freed into another heap, `batch_to`, not yet pushed on its
     * remote stack (see REMOTE_BATCH_MAX): linked through their first word, newest first. */
    struct thread_heap *batch_to;
    void *batch_head, *batch_tail;
    unsigned batch_count;
    size_t batch_bytes;
    /* Blocks freed by other threads: a lock-free LIFO linked through the blocks' first word.
     * On its own cache line: other threads write it, the owner only reads it when not NULL. */
    _Alignas(64) _Atomic(void *) remote;
    _Alignas(64) unsigned char control[];
} thread_heap;

typedef struct tlsf_config {
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
} tlsf_config;
extern tlsf_config cfg; /* set once by init (tlsf_backend.c) */

enum { ON_GROW_IGNORE = 0, ON_GROW_WARN = 1, ON_GROW_ABORT = 2 };

/* Marks a block in a thread cache (its second word), to catch a double free cheaply. */
extern uintptr_t cache_key;

/* The shared mutex on cache lines of its own: taking it must not evict what every free reads
 * (cfg, cache_key, heap_count, heaps). */
typedef union shared_lock_line {
    pthread_mutex_t m;
    unsigned char line[128];
} shared_lock_line_t;
extern shared_lock_line_t shared_lock_line;
#define shared_lock (shared_lock_line.m)
extern HEAPHOOK_LARGE_STORAGE unsigned char shared_control[CONTROL_BYTES];
extern tlsf_growing shared;                      /* the pool: guarded by shared_lock */
extern release_state shared_release;             /* returning memory: under shared_lock */
extern thread_heap *heaps[THREAD_HEAPS_MAX + 1]; /* by owner id; [0] unused */
extern _Atomic unsigned heap_count;              /* ids 1..heap_count exist */
extern pthread_key_t heap_key;                   /* its destructor: heap_release */

extern __thread thread_heap *t_heap __attribute__((tls_model("initial-exec")));
/* The area this thread last freed into, when it has no heap. */
extern __thread area_cache t_area __attribute__((tls_model("initial-exec")));
/* Set when this thread must not (or cannot) get a heap: it uses the shared heap. */
extern __thread bool t_no_heap __attribute__((tls_model("initial-exec")));
/* A growth of this thread's call, reported (HEAPHOOK_TLSF_ON_GROW) when the shared lock is
 * given back: the stack is walked and the line written with no lock of ours held. */
typedef struct grow_note {
    size_t added, total, count, areas;
} grow_note;
extern __thread grow_note t_grew __attribute__((tls_model("initial-exec")));

/* backend_pool.c */
void *area_map(void *ctx, size_t bytes);
int area_probe(void *ctx, size_t bytes);
void area_grew(void *ctx, size_t added, size_t total, size_t count);
bool areas_find(uintptr_t p, uintptr_t *lo, uintptr_t *hi);
__attribute__((noinline, cold)) void grow_report(void);
void *shared_alloc(size_t size, size_t align);
/* backend_check.c */
void check_pointer_locked(const void *ptr, const char *call);
__attribute__((noinline, noreturn, cold)) void misuse(const void *ptr, const char *call,
                                                      tlsf_error e, const void *where);
__attribute__((noinline)) void check_slow(const void *ptr, const char *call, area_cache *a);
/* backend_heaps.c */
void heap_release(void *arg);
void remote_batch_flush(thread_heap *h);
size_t trim_thread_heap(thread_heap *h, size_t pad);
void *tlsf_backend_alloc(size_t size, size_t align);
void tlsf_backend_dealloc(void *ptr);
void *tlsf_backend_realloc(void *ptr, size_t size);
size_t tlsf_backend_block_size(void *ptr);
/* backend_trim.c */
bool release_budget(release_state *r);
__attribute__((noinline)) void free_release(tlsf_t *t, release_state *r, void *ptr);
__attribute__((noinline)) void free_trimming(tlsf_t *t, void *ptr, size_t threshold);
size_t trim_heap(tlsf_t *t, size_t pad);
int tlsf_backend_trim(size_t pad);
/* backend_stats.c */
void *stats_alloc(size_t size, size_t align);
void stats_dealloc(void *ptr);
void *stats_realloc(void *ptr, size_t size);
int tlsf_backend_get_stats(heaphook_stats *out);
void tlsf_backend_print_stats(int fd);
/* tlsf_backend.c */
bool stats_wanted(void);
/* The backend's table; heaphook_backend_get returns it (backend_entry.c). */
const heaphook_backend *tlsf_backend_get(void);

/*
 * The shared lock. Giving it back reports a growth of this thread's call (backend_pool.c).
 */
static inline void shared_lock_take(void) {
    pthread_mutex_lock(&shared_lock);
}
static inline void shared_lock_give(void) {
    pthread_mutex_unlock(&shared_lock);
    if (UNLIKELY(t_grew.areas)) grow_report();
}

/* The shared heap; shared_lock held. */
static inline void *shared_alloc_locked(size_t size, size_t align) {
    return tlsf_growing_alloc(&shared, size, align);
}

/*
 * The check on every call: its inline parts (backend_check.c has the rest).
 */
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

#pragma GCC visibility pop

#endif
