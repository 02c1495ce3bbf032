/*
 * mark.c — the check. Under the check lock: the table is copied into an mmap'd array sorted by
 * address, with clusters of blocks and a page index per cluster for the lookups; the roots
 * (writable PT_LOAD segments of every loaded object but the tracer, the bootstrap arena, every
 * stopped thread's registers and its stack from sp to its top, static TLS, the caller's stack,
 * registered roots and root-marked blocks) mark the blocks they point into, at their start or
 * inside; marked blocks are scanned in turn from an explicit work list (no recursion), typed
 * ones through their pointer fields only. Unmarked blocks are leaked: LEAK records, then one
 * LEAK_CHECK, go into the log, and the leaked blocks are kept for heaphook_leaks_foreach.
 * The switch of the table from the drain thread to the hooks (hh_leaks_go_sync) runs under the
 * same lock and stop.
 *
 * Owns: the check lock, the snapshot and mark arrays, the last result. May call: table.c
 * (locked snapshot), types.c (types, roots), stop.c, track/tracer.h (the cursor lock and its
 * catch-up, records into the ring), hh_arena_range (hooks.c). Allocates nothing: every array
 * is mmap'd and kept for the next check.
 */
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "leaks/internal.h"
#include "track/fork.h"
#include "track/tracer.h"

typedef struct hh_range {
    uintptr_t lo, hi;
} hh_range;

#define HH_MAX_SEGMENTS 65536u
#define HH_MAPS_CAP (64u << 20)
#define HH_MAX_MAPS (1u << 20)

static struct {
    /* roots from dl_iterate_phdr */
    hh_range *segments;
    uint32_t nsegments;
    /* /proc/self/maps */
    char *maps_text;
    hh_range *maps;
    uint32_t nmaps;
    /* blocks sorted by address, their marks, the work list */
    hh_entry *blocks;
    hh_entry *tmp;
    uint8_t *marks;
    uint32_t *work;
    uint32_t *counts;
    uint64_t n, cap, nwork;
    uintptr_t lo, hi;
    /* clusters of blocks (no gap over 64 KiB inside), each with a page index:
     * pages[page0 + p] = first block at or above cluster.lo + (p << shift) */
    struct hh_cluster {
        uintptr_t lo, hi;
        uint64_t page0;
        uint32_t first, end;
    } * clusters;
    uint64_t nclusters, clusters_cap;
    uint32_t *pages;
    uint64_t npages, pages_cap;
    uint64_t *addrs; /* the blocks' addresses alone: the lookups touch fewer cache lines */
    uint64_t addrs_cap;
    unsigned shift;
    bool precise;
} g_ck;

/* The result of the last check, for heaphook_leaks_foreach. */
static hh_entry *g_result;
static uint64_t g_nresult, g_result_cap;
static _Atomic int g_check_lock;

/* Its rank in fork.c's order (track/fork.h): checked in a debug build. */
static void hh_check_lock_take(void) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HH_RANK_LEAK_CHECK, "the leak check lock (leaks/mark.c)");
    hh_spin_lock(&g_check_lock);
}

static void hh_check_lock_give(void) {
    hh_spin_unlock(&g_check_lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HH_RANK_LEAK_CHECK);
}
static uint32_t g_check_no;
static hh_rec_leak_check g_last_totals; /* of check g_check_no, under g_check_lock */
static size_t g_static_tls = 4096;

static int hh_phdr_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    uintptr_t self = (uintptr_t)&g_ck; /* any object of this library */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (self >= lo && self < lo + ph->p_memsz) return 0; /* the tracer itself */
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) continue;
        if (g_ck.nsegments >= HH_MAX_SEGMENTS) break;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        g_ck.segments[g_ck.nsegments++] = (hh_range){lo, lo + ph->p_memsz};
    }
    return 0;
}

static void hh_read_maps(void) {
    g_ck.nmaps = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    size_t len = 0;
    for (;;) {
        ssize_t got = read(fd, g_ck.maps_text + len, HH_MAPS_CAP - 1 - len);
        if (got <= 0) break;
        len += (size_t)got;
        if (len >= HH_MAPS_CAP - 1) break;
    }
    close(fd);
    const char *p = g_ck.maps_text, *end = g_ck.maps_text + len;
    while (p < end && g_ck.nmaps < HH_MAX_MAPS) {
        uintptr_t lo = 0, hi = 0;
        int d;
        while (p < end && *p != '-') {
            d = *p >= 'a' ? *p - 'a' + 10 : *p - '0';
            lo = lo * 16 + (uintptr_t)d;
            p++;
        }
        p++;
        while (p < end && *p != ' ') {
            d = *p >= 'a' ? *p - 'a' + 10 : *p - '0';
            hi = hi * 16 + (uintptr_t)d;
            p++;
        }
        p++;
        bool readable = p < end && *p == 'r';
        while (p < end && *p != '\n') p++;
        p++;
        if (readable) g_ck.maps[g_ck.nmaps++] = (hh_range){lo, hi};
    }
}

/* The readable mapping that holds a, or NULL. */
static const hh_range *hh_map_of(uintptr_t a) {
    uint32_t lo = 0, hi = g_ck.nmaps;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (g_ck.maps[mid].hi <= a) {
            lo = mid + 1;
        } else if (g_ck.maps[mid].lo > a) {
            hi = mid;
        } else {
            return &g_ck.maps[mid];
        }
    }
    return NULL;
}

static void hh_radix_sort(void) {
    hh_entry *a = g_ck.blocks, *b = g_ck.tmp;
    uint64_t n = g_ck.n;
    for (int shift = 0; shift < 64; shift += 16) {
        memset(g_ck.counts, 0, 65536 * sizeof(uint32_t));
        for (uint64_t i = 0; i < n; i++) g_ck.counts[(a[i].addr >> shift) & 0xffff]++;
        if (n == 0 || g_ck.counts[(a[0].addr >> shift) & 0xffff] == n) continue;
        uint32_t sum = 0;
        for (uint32_t d = 0; d < 65536; d++) {
            uint32_t c = g_ck.counts[d];
            g_ck.counts[d] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++) b[g_ck.counts[(a[i].addr >> shift) & 0xffff]++] = a[i];
        hh_entry *t = a;
        a = b;
        b = t;
    }
    g_ck.blocks = a;
    g_ck.tmp = b;
}

static bool hh_ensure_arrays(uint64_t n) {
    if (n <= g_ck.cap && g_ck.blocks != NULL) return true;
    if (g_ck.blocks != NULL) {
        hh_sys_munmap(g_ck.blocks, g_ck.cap * sizeof(hh_entry));
        hh_sys_munmap(g_ck.tmp, g_ck.cap * sizeof(hh_entry));
        hh_sys_munmap(g_ck.marks, g_ck.cap);
        hh_sys_munmap(g_ck.work, g_ck.cap * sizeof(uint32_t));
    }
    uint64_t cap = 65536;
    while (cap < n) cap *= 2;
    g_ck.blocks = hh_map(cap * sizeof(hh_entry));
    g_ck.tmp = hh_map(cap * sizeof(hh_entry));
    g_ck.marks = hh_map(cap);
    g_ck.work = hh_map(cap * sizeof(uint32_t));
    g_ck.cap = cap;
    if (g_ck.blocks == NULL || g_ck.tmp == NULL || g_ck.marks == NULL || g_ck.work == NULL) {
        g_ck.blocks = NULL;
        g_ck.cap = 0;
        return false;
    }
    return true;
}

/* Copies the table (locked) into g_ck.blocks, sorted by address. */
static bool hh_snapshot(void) {
    uint64_t n = hh_table_live();
    if (!hh_ensure_arrays(n)) return false;
    uint64_t k = hh_table_copy(g_ck.blocks, n);
    g_ck.n = k;
    hh_radix_sort();
    memset(g_ck.marks, 0, k);
    g_ck.nwork = 0;
    g_ck.lo = k > 0 ? g_ck.blocks[0].addr : 0;
    g_ck.hi = 0;
    for (uint64_t i = 0; i < k; i++) {
        uint64_t size = g_ck.blocks[i].meta & HH_META_SIZE;
        uintptr_t end = g_ck.blocks[i].addr + (size > 0 ? size : 1);
        if (end > g_ck.hi) g_ck.hi = end;
    }
    /* The page index: a lookup reads one entry and searches the few blocks of one page. */
    if (k > g_ck.addrs_cap) {
        if (g_ck.addrs != NULL) hh_sys_munmap(g_ck.addrs, g_ck.addrs_cap * sizeof(uint64_t));
        g_ck.addrs_cap = g_ck.cap;
        g_ck.addrs = hh_map(g_ck.addrs_cap * sizeof(uint64_t));
        if (g_ck.addrs == NULL) {
            g_ck.addrs_cap = 0;
            return false;
        }
    }
    for (uint64_t j = 0; j < k; j++) g_ck.addrs[j] = g_ck.blocks[j].addr;
    /* Clusters (a new one after a gap of more than 64 KiB: the main heap, each thread arena,
     * each mmap'd block), then a page index per cluster: about two pages per block. */
    if (k > g_ck.clusters_cap) {
        if (g_ck.clusters != NULL)
            hh_sys_munmap(g_ck.clusters, g_ck.clusters_cap * sizeof *g_ck.clusters);
        g_ck.clusters_cap = g_ck.cap;
        g_ck.clusters = hh_map(g_ck.clusters_cap * sizeof *g_ck.clusters);
        if (g_ck.clusters == NULL) {
            g_ck.clusters_cap = 0;
            return false;
        }
    }
    uint64_t nc = 0;
    for (uint64_t j = 0; j < k; j++) {
        uint64_t size = g_ck.blocks[j].meta & HH_META_SIZE;
        uintptr_t a = g_ck.blocks[j].addr, end = a + (size > 0 ? size : 1);
        if (nc == 0 || a > g_ck.clusters[nc - 1].hi + 65536) {
            g_ck.clusters[nc++] = (struct hh_cluster){a, end, 0, (uint32_t)j, (uint32_t)j + 1};
        } else {
            if (end > g_ck.clusters[nc - 1].hi) g_ck.clusters[nc - 1].hi = end;
            g_ck.clusters[nc - 1].end = (uint32_t)j + 1;
        }
    }
    g_ck.nclusters = nc;
    unsigned shift = 6;
    uint64_t npages;
    for (;; shift++) {
        npages = 0;
        for (uint64_t c = 0; c < nc; c++) {
            npages += ((g_ck.clusters[c].hi - g_ck.clusters[c].lo) >> shift) + 2;
        }
        if (npages <= 4 * k + 65536 || shift >= 40) break;
    }
    if (npages > g_ck.pages_cap) {
        if (g_ck.pages != NULL) hh_sys_munmap(g_ck.pages, g_ck.pages_cap * sizeof(uint32_t));
        g_ck.pages_cap = npages * 2;
        g_ck.pages = hh_map(g_ck.pages_cap * sizeof(uint32_t));
        if (g_ck.pages == NULL) {
            g_ck.pages_cap = 0;
            return false;
        }
    }
    g_ck.shift = shift;
    uint64_t at = 0;
    for (uint64_t c = 0; c < nc; c++) {
        struct hh_cluster *cl = &g_ck.clusters[c];
        cl->page0 = at;
        uint64_t np = ((cl->hi - cl->lo) >> shift) + 2, i = cl->first;
        for (uint64_t p = 0; p < np; p++) {
            uintptr_t start = cl->lo + (p << shift);
            while (i < cl->end && g_ck.addrs[i] < start) i++;
            g_ck.pages[at + p] = (uint32_t)i;
        }
        at += np;
    }
    g_ck.npages = at;
    return true;
}

static inline void hh_consider(uintptr_t w) {
    if (w < g_ck.lo || w >= g_ck.hi) return;
    /* the cluster: the last one starting at or below w */
    uint64_t clo = 0, chi = g_ck.nclusters;
    while (chi - clo > 1) {
        uint64_t mid = (clo + chi) / 2;
        if (g_ck.clusters[mid].lo <= w) {
            clo = mid;
        } else {
            chi = mid;
        }
    }
    const struct hh_cluster *cl = &g_ck.clusters[clo];
    if (w >= cl->hi) return;
    /* blocks[lo] starts before w's page (or is the cluster's first), and none from hi on
     * starts at or below w: the block holding w, if any, is in [lo, hi) */
    uint64_t p = cl->page0 + ((w - cl->lo) >> g_ck.shift);
    uint64_t lo = g_ck.pages[p] > cl->first ? g_ck.pages[p] - 1 : cl->first;
    uint64_t hi = g_ck.pages[p + 1] > lo ? g_ck.pages[p + 1] : lo + 1;
    while (hi - lo > 1) {
        uint64_t mid = (lo + hi) / 2;
        if (g_ck.addrs[mid] <= w) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if (g_ck.marks[lo] || g_ck.addrs[lo] > w) return;
    uint64_t size = g_ck.blocks[lo].meta & HH_META_SIZE;
    if (w >= g_ck.addrs[lo] + (size > 0 ? size : 1)) return;
    g_ck.marks[lo] = 1;
    g_ck.work[g_ck.nwork++] = (uint32_t)lo;
}

static void hh_scan_words(uintptr_t lo, uintptr_t hi) {
    lo = (lo + sizeof(uintptr_t) - 1) & ~(uintptr_t)(sizeof(uintptr_t) - 1);
    for (uintptr_t a = lo; a + sizeof(uintptr_t) <= hi; a += sizeof(uintptr_t)) {
        hh_consider(*(const uintptr_t *)a);
    }
}

/* An object of a known type: its pointer fields only, for each element. */
static void hh_scan_typed(uintptr_t base, uint64_t bytes, const hh_type *t) {
    const uint32_t *words = hh_type_ptr_words(t);
    for (uint64_t at = 0; at + t->size <= bytes; at += t->size) {
        for (uint32_t k = 0; k < t->nptr; k++) {
            hh_consider(*(const uintptr_t *)(base + at + words[k]));
        }
    }
}

/* The parts of [lo, hi) still mapped and readable (an object may have been unloaded since
 * dl_iterate_phdr listed it, before the world stopped). */
static void hh_scan_mapped(uintptr_t lo, uintptr_t hi) {
    uint32_t a = 0, b = g_ck.nmaps;
    while (a < b) { /* the first mapping that ends above lo */
        uint32_t mid = (a + b) / 2;
        if (g_ck.maps[mid].hi <= lo) {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    for (uint32_t i = a; i < g_ck.nmaps && g_ck.maps[i].lo < hi; i++) {
        uintptr_t from = lo > g_ck.maps[i].lo ? lo : g_ck.maps[i].lo;
        uintptr_t to = hi < g_ck.maps[i].hi ? hi : g_ck.maps[i].hi;
        if (from < to) hh_scan_words(from, to);
    }
}

static void hh_drain_work(void) {
    while (g_ck.nwork > 0) {
        const hh_entry *b = &g_ck.blocks[g_ck.work[--g_ck.nwork]];
        uint64_t size = b->meta & HH_META_SIZE;
        const hh_type *t = hh_type_of(b->meta);
        if (t != NULL) {
            hh_scan_typed(b->addr, size, t);
        } else if (!g_ck.precise) {
            hh_scan_words(b->addr, b->addr + size);
        }
    }
}

/* A stack from sp (less the red zone) to its top; static TLS around the thread pointer. */
static void hh_scan_thread(uintptr_t sp, uintptr_t tp) {
    const hh_range *m = sp != 0 ? hh_map_of(sp) : NULL;
    bool tls_done = false;
    if (m != NULL) {
        uintptr_t lo = sp >= m->lo + 128 ? sp - 128 : m->lo, hi = m->hi;
        if (tp > sp && tp < m->hi) { /* glibc: the TCB and static TLS top the thread's stack */
            if (tp + 4096 < hi) hi = tp + 4096;
            tls_done = true;
        }
        hh_scan_words(lo, hi);
    }
    const hh_range *t = tp != 0 && !tls_done ? hh_map_of(tp) : NULL;
    if (t != NULL) {
        uintptr_t lo = tp >= t->lo + g_static_tls ? tp - g_static_tls : t->lo;
        uintptr_t hi = tp + 4096 < t->hi ? tp + 4096 : t->hi;
        hh_scan_words(lo, hi);
    }
    hh_drain_work();
}

static void hh_mark_registered_roots(void) {
    hh_roots_scan(hh_scan_typed);
    for (uint64_t i = 0; i < g_ck.n; i++) {
        if ((g_ck.blocks[i].meta & HH_META_ROOT) && !g_ck.marks[i]) {
            g_ck.marks[i] = 1;
            g_ck.work[g_ck.nwork++] = (uint32_t)i;
        }
    }
    hh_drain_work();
}

static bool hh_ensure_check_memory(void) {
    if (g_ck.segments == NULL) g_ck.segments = hh_map(HH_MAX_SEGMENTS * sizeof(hh_range));
    if (g_ck.maps_text == NULL) g_ck.maps_text = hh_map(HH_MAPS_CAP);
    if (g_ck.maps == NULL) g_ck.maps = hh_map(HH_MAX_MAPS * sizeof(hh_range));
    if (g_ck.counts == NULL) g_ck.counts = hh_map(65536 * sizeof(uint32_t));
    return g_ck.segments != NULL && g_ck.maps_text != NULL && g_ck.maps != NULL &&
           g_ck.counts != NULL;
}

static void hh_emit(uint32_t check, int trigger, uint64_t start, const hh_rec_leak_check *totals) {
    if (atomic_load(&hh_state) != HH_STATE_ACTIVE) return;
    for (uint64_t i = 0; i < g_nresult; i++) {
        hh_rec_leak *r = hh_tracer_reserve(sizeof *r);
        if (r == NULL) continue;
        r->check = check;
        r->type = (uint32_t)(g_result[i].meta >> HH_META_TYPE_SHIFT);
        r->ptr = g_result[i].addr;
        r->size = g_result[i].meta & HH_META_SIZE;
        hh_tracer_commit(r, HH_REC_LEAK);
    }
    hh_rec_leak_check *c = hh_tracer_reserve(sizeof *c);
    if (c == NULL) return;
    c->live = totals->live;
    c->leaked = totals->leaked;
    c->leaked_bytes = totals->leaked_bytes;
    c->reachable = totals->reachable;
    c->reachable_bytes = totals->reachable_bytes;
    c->duration_ns = totals->duration_ns;
    c->check = check;
    c->trigger = (uint32_t)trigger;
    c->time = start;
    hh_tracer_commit(c, HH_REC_LEAK_CHECK);
}

/* Deferred mode, the cursor lock held: applies every published record. A record still being
 * written (a thread the stop could not reach, a tracer thread's) is waited for a little, then
 * left for the drain thread: the check sees the table as of that record. */
static void hh_catch_up(void) {
    for (int ms = 0; !hh_tracer_leaks_catch_up(UINT64_MAX) && ms < 100; ms++) hh_pause_us(1000);
}

/* With the world stopped outside the hooks, every record is published and applied, and no
 * thread is between its hook's decision and its record. */
void hh_leaks_go_sync(void) {
    if (atomic_load(&hh_leaks_on) != HH_LEAKS_DEFERRED) return;
    hh_busy++;
    hh_check_lock_take();
    if (atomic_load(&hh_leaks_on) == HH_LEAKS_DEFERRED) {
        hh_stop_world_outside_hooks();
        hh_tracer_leaks_lock();
        hh_catch_up();
        atomic_store(&hh_leaks_on, HH_LEAKS_SYNC);
        hh_tracer_leaks_unlock();
        hh_resume_world();
    }
    hh_check_lock_give();
    hh_busy--;
}

/* Not inlined into its callers: their frames from stack_from up are roots, its own are not. */
__attribute__((noinline)) long hh_check(int trigger, bool precise, uintptr_t stack_from) {
    hh_busy++;
    hh_check_lock_take();
    long leaked = -1;
    if (!hh_ensure_check_memory()) goto out;
    uint64_t start_tick = hh_now();
    g_ck.precise = precise;
    g_ck.nsegments = 0;
    if (!precise) dl_iterate_phdr(hh_phdr_cb, NULL); /* before stopping: it takes a lock */
    /* Deferred: the world stops first (no program thread inside a hook, so their records are
     * all published), then the table catches up with the ring. Synchronous: the table is locked
     * first, so no thread stops while it holds a shard lock. */
    bool deferred = !precise && atomic_load(&hh_leaks_on) == HH_LEAKS_DEFERRED;
    uint64_t t0 = hh_mono();
    if (deferred) {
        hh_stop_world_outside_hooks();
        hh_tracer_leaks_lock();
        hh_catch_up();
    }
    hh_table_lock();
    if (!precise && !deferred) hh_stop_world(0);
    if (!hh_snapshot()) {
        if (!precise) hh_resume_world();
        hh_table_unlock();
        if (deferred) hh_tracer_leaks_unlock();
        goto out;
    }
    if (!precise) {
        hh_read_maps();
        for (uint32_t i = 0; i < g_ck.nsegments; i++) {
            hh_scan_mapped(g_ck.segments[i].lo, g_ck.segments[i].hi);
            hh_drain_work();
        }
        uintptr_t alo, ahi;
        hh_arena_range(&alo, &ahi);
        hh_scan_words(alo, ahi);
        hh_drain_work();
        uint32_t n;
        const hh_stopped *slots = hh_stopped_threads(&n);
        for (uint32_t i = 0; i < n; i++) {
            const hh_stopped *s = &slots[i];
            int state = atomic_load(&s->state);
            if (state != HH_STOP_STOPPED && state != HH_STOP_IN_KERNEL) continue;
            for (uint32_t r = 0; r < s->nregs; r++) hh_consider((uintptr_t)s->regs[r]);
            hh_scan_thread(s->sp, s->tp);
        }
        if (stack_from != 0) hh_scan_thread(stack_from, hh_thread_pointer());
    }
    if (hh_types_in_use()) hh_mark_registered_roots();
    /* the verdicts */
    hh_rec_leak_check totals;
    memset(&totals, 0, sizeof totals);
    uint64_t nleaked = 0;
    for (uint64_t i = 0; i < g_ck.n; i++) {
        const hh_entry *b = &g_ck.blocks[i];
        uint64_t size = b->meta & HH_META_SIZE;
        if (precise && hh_type_of(b->meta) == NULL) continue;
        totals.live++;
        if (g_ck.marks[i]) {
            totals.reachable++;
            totals.reachable_bytes += size;
        } else {
            totals.leaked++;
            totals.leaked_bytes += size;
            g_ck.tmp[nleaked++] = *b; /* tmp is free after the sort */
        }
    }
    uint64_t t1 = hh_mono();
    if (!precise) hh_resume_world();
    hh_table_unlock();
    if (deferred) hh_tracer_leaks_unlock();
    totals.duration_ns = t1 - t0;
    if (nleaked > g_result_cap) {
        if (g_result != NULL) hh_sys_munmap(g_result, g_result_cap * sizeof *g_result);
        g_result_cap = nleaked * 2;
        g_result = hh_map(g_result_cap * sizeof *g_result);
        if (g_result == NULL) g_result_cap = 0;
    }
    g_nresult = g_result != NULL ? nleaked : 0;
    if (g_nresult > 0) memcpy(g_result, g_ck.tmp, g_nresult * sizeof *g_result);
    hh_emit(++g_check_no, trigger, start_tick, &totals);
    g_last_totals = totals;
    leaked = (long)nleaked;
out:
    hh_check_lock_give();
    hh_busy--;
    return leaked;
}

void hh_check_configure(size_t static_tls) {
    g_static_tls = static_tls;
}

const hh_entry *hh_check_result(uint64_t *n) {
    *n = g_nresult;
    return g_result;
}

void hh_check_lock(void) {
    hh_check_lock_take();
}

void hh_check_unlock(void) {
    hh_check_lock_give();
}

bool hh_check_last(uint32_t *check_no, hh_rec_leak_check *totals) {
    if (atomic_exchange_explicit(&g_check_lock, 1, memory_order_acquire) != 0) return false;
    *check_no = g_check_no;
    *totals = g_last_totals;
    hh_spin_unlock(&g_check_lock);
    return true;
}

void hh_check_fork_child(void) {
    g_check_no = 0;
    memset(&g_last_totals, 0, sizeof g_last_totals);
    g_nresult = 0;
}
