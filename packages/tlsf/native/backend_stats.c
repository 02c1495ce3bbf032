/*
 * backend_stats.c — HEAPHOOK_TLSF_STATS (the counting entry points and the lines at exit) and
 * the statistics calls (mallinfo2, malloc_stats) over the shared heap and every thread heap.
 */
#include <stdarg.h>

#include "backend_internal.h"

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

void *stats_alloc(size_t size, size_t align) {
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

void stats_dealloc(void *ptr) {
    check_pointer(ptr, "free"); /* before its head is read for the size */
    atomic_fetch_sub_explicit(&stat_in_use, tlsf_block_size(ptr), memory_order_relaxed);
    tlsf_backend_dealloc(ptr);
}

void *stats_realloc(void *ptr, size_t size) {
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
        size_t cached_bytes = 0;
        for (unsigned cls = CACHE_CLASS_MIN; cls < CACHE_CLASSES; cls++) {
            const size_t blocks = cfg.cache_depth - heaps[id]->cache_room[cls];
            cached_blocks += blocks;
            cached_bytes += blocks * cls * 16;
        }
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

int tlsf_backend_get_stats(heaphook_stats *out) {
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

void tlsf_backend_print_stats(int fd) {
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
