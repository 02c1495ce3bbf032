/*
 * tlsf_backend.c — the heaphook backend: libheaphook_tlsf.so.
 *
 * Memory comes from the pool: a first area of INITIAL_MEMPOOL_SIZE bytes, grown by
 * ADDITIONAL_MEMPOOL_SIZE, 2x, 4x ... when a request cannot be served (tlsf_grow.c). The pool
 * is one TLSF heap, the shared heap (owner id 0), guarded by one mutex.
 *
 * Threads. Each thread gets a thread heap (owner ids 1..255): a TLSF heap of its own whose
 * memory is chunks borrowed from the shared heap (256 KiB, then a quarter of the heap's size up
 * to 64 MiB; a smaller chunk when the pool has no large one left). A thread allocates and frees
 * its own blocks with no lock and no atomic read-modify-write. Blocks freed by another thread
 * are pushed on their owner's remote-free stack a few at a time (one CAS for up to
 * REMOTE_BATCH_MAX blocks or REMOTE_BATCH_BYTES; what a thread holds back is pushed at its next
 * cache miss, malloc_trim and exit too); the owner takes the whole stack with
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
 *   free:   one TLSF free, or one CAS push of at most REMOTE_BATCH_MAX blocks (retried only
 *           while other threads push).
 * A thread heap is released when its thread exits and adopted by the next new thread, with
 * its chunks; chunks are not returned to the shared heap.
 *
 * Checking mode (HEAPHOOK_TLSF_CHECK=1) turns thread heaps off: every call goes to the shared
 * heap under the mutex, and every free/realloc/malloc_usable_size validates its pointer first
 * (tlsf_validate), stopping the program with one line on a bad one.
 */
#include "backend_internal.h"

tlsf_config cfg;
uintptr_t cache_key;

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
    .alloc_sets_errno = 1,
};

/* HEAPHOOK_TLSF_STATS, read before init (the reader allocates nothing): the core copies the
 * table once, before init, so the table itself decides whether calls are counted. */
bool stats_wanted(void) {
    return heaphook_env_bool("HEAPHOOK_TLSF_STATS", NULL, false);
}

const heaphook_backend *tlsf_backend_get(void) {
    if (stats_wanted()) {
        tlsf_backend.alloc = stats_alloc;
        tlsf_backend.dealloc = stats_dealloc;
        tlsf_backend.realloc = stats_realloc;
    }
    return &tlsf_backend;
}
