/*
 * backend_pool.c — the pool: the list of its areas, their mapping and growth (HEAPHOOK_TLSF_ON_GROW
 * reports), and the shared heap under its mutex. See backend_internal.h for the file map.
 */
#include "backend_internal.h"

shared_lock_line_t shared_lock_line __attribute__((aligned(64))) = {PTHREAD_MUTEX_INITIALIZER};
HEAPHOOK_LARGE_STORAGE _Alignas(64) unsigned char shared_control[CONTROL_BYTES];
tlsf_growing shared;
release_state shared_release;
__thread grow_note t_grew __attribute__((tls_model("initial-exec")));
static bool mlock_warned;

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
bool areas_find(uintptr_t p, uintptr_t *lo, uintptr_t *hi) {
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

void *area_map(void *ctx, size_t bytes) {
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

int area_probe(void *ctx, size_t bytes) {
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

void area_grew(void *ctx, size_t added, size_t total, size_t count) {
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

/*
 * HEAPHOOK_TLSF_ON_GROW: a growth after start-up (any area added to the pool beyond the first,
 * INITIAL_MEMPOOL_SIZE) is named with the call's stack, once per call that grew the pool.
 * The stack comes from glibc's backtrace() (libgcc's unwinder over .eh_frame, so it needs no
 * frame pointers), warmed up at start-up (its first call loads libgcc_s, which allocates);
 * frames are named with dladdr (module + offset, and the symbol when the module exports it).
 * Frames inside this library are left out. No lock of ours is held here.
 */
#define GROW_FRAMES 24
void grow_report(void) {
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

/* Every allocation path of the backend ends here when it fails: errno is set here
 * (alloc_sets_errno). */
void *shared_alloc(size_t size, size_t align) {
    shared_lock_take();
    void *p = shared_alloc_locked(size, align);
    shared_lock_give();
    if (UNLIKELY(p == NULL)) errno = ENOMEM;
    return p;
}
