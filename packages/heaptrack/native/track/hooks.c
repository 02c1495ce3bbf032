/*
 * hooks.c — the interposed allocation family.
 *
 * Why not the core's interposition behind an observer seam: measured, it costs the tracer more
 * than a few percent (README, "Why the tracer has hooks of its own").
 *
 * Every function forwards to the next allocator in the lookup order (dlsym(RTLD_NEXT)), so
 * LD_PRELOAD="libheaphook_heaptrack.so libheaphook_tlsf.so" traces TLSF. The next allocator
 * and the arena serving requests until it is known (dlsym itself may allocate) are the core's
 * (heaphook/bootstrap.h); arena blocks are recognised and never passed on. A per-thread guard
 * (hh_busy) sends the tracer's own allocations straight to the next allocator, untraced.
 *
 * Ordering: a free is reserved in the ring before the block is released and an allocation
 * after it is obtained, so when one thread frees an address and another gets it back, the
 * log has them in that order. A realloc that moves the block is two records: the realloc
 * (reserved before the call: the old block's end) and a REALLOC_DONE after it (the new
 * block's start).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attach.h"
#include "heaphook/bootstrap.h"
#include "leaks/leaks.h"
#include "stacks.h"
#include "trace.h"
#include "tracer.h"
#include "vm.h"
#include "unwinder.h"

typedef void (*hh_exit_fn)(int);
typedef int (*hh_dlclose_fn)(void *);
typedef int (*hh_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*hh_execv_fn)(const char *, char *const[]);

/* The calls other than the allocation family that the library wraps; the family itself is the
 * core's heaphook_next (heaphook/bootstrap.h), with its bootstrap arena. */
static struct {
    hh_exit_fn exit; /* _exit: resolved with the rest, as dlsym is no call for a signal handler */
    hh_dlclose_fn dlclose;
    hh_execve_fn execve;
    hh_execv_fn execv;
    hh_execv_fn execvp;
    hh_execve_fn execvpe;
} next_process;

#define next heaphook_next
#define hh_in_arena heaphook_bootstrap_owns
#define hh_arena_size heaphook_bootstrap_block_size

static void *hh_arena_alloc(size_t size, size_t align) {
    return heaphook_bootstrap_alloc(size, align);
}

/* Its blocks are the program's (dlsym's, early start-up's): a root of the leak checks. */
void hh_arena_range(uintptr_t *lo, uintptr_t *hi) {
    heaphook_bootstrap_range(lo, hi);
}

/* ---- the next allocator ------------------------------------------------------------------ */

static _Atomic bool g_process_calls_resolved;

/* Idempotent (two threads store the same pointers), so it needs no lock and no waiting. Called
 * by the first allocation, so that _exit from a signal handler normally finds it done, and by
 * each wrapper of these calls in case it comes first. */
static void hh_resolve_process_calls(void) {
    if (atomic_load_explicit(&g_process_calls_resolved, memory_order_acquire)) return;
    __atomic_store_n(&next_process.exit, (hh_exit_fn)dlsym(RTLD_NEXT, "_exit"), __ATOMIC_RELAXED);
    __atomic_store_n(&next_process.dlclose, (hh_dlclose_fn)dlsym(RTLD_NEXT, "dlclose"),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&next_process.execve, (hh_execve_fn)dlsym(RTLD_NEXT, "execve"),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&next_process.execv, (hh_execv_fn)dlsym(RTLD_NEXT, "execv"), __ATOMIC_RELAXED);
    __atomic_store_n(&next_process.execvp, (hh_execv_fn)dlsym(RTLD_NEXT, "execvp"),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&next_process.execvpe, (hh_execve_fn)dlsym(RTLD_NEXT, "execvpe"),
                     __ATOMIC_RELAXED);
    atomic_store_explicit(&g_process_calls_resolved, true, memory_order_release);
}

/* The slow path of hh_next_ready(): the family, then the process calls. */
__attribute__((noinline, cold)) static bool hh_resolve(void) {
    if (!heaphook_next_resolve("heaptrack")) return false;
    hh_resolve_process_calls();
    return true;
}

static inline bool hh_next_ready(void) {
    if (HH_LIKELY(atomic_load_explicit(&heaphook_next_state, memory_order_acquire) ==
                  HEAPHOOK_NEXT_READY))
        return true;
    return hh_resolve();
}

/* ---- sampling ---------------------------------------------------------------------------- */

static HH_TLS int64_t t_until_sample;
static HH_TLS uint64_t t_rng;

/* ln(x) for x in (0, 1], without libm. */
static double hh_ln(double x) {
    int e = 0;
    while (x < 0.5) {
        x *= 2;
        e--;
    }
    double z = (x - 1) / (x + 1), z2 = z * z, term = z, sum = 0;
    for (int k = 1; k < 40; k += 2) {
        sum += term / k;
        term *= z2;
    }
    return 2 * sum + e * 0.6931471805599453;
}

static int64_t hh_next_gap(void) {
    if (t_rng == 0) t_rng = hh_now() ^ ((uint64_t)hh_tid() << 32) ^ 0x9e3779b97f4a7c15ull;
    t_rng ^= t_rng << 13;
    t_rng ^= t_rng >> 7;
    t_rng ^= t_rng << 17;
    double u = ((t_rng >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double gap = -hh_ln(u) * (double)hh_cfg.sample_bytes;
    return gap < 1 ? 1 : (int64_t)gap;
}

/* 0 when not sampled, else the bytes this allocation stands for (as heapprofd). */
static inline uint64_t hh_sample(size_t size) {
    uint64_t interval = hh_cfg.sample_bytes;
    if (HH_LIKELY(interval == 0)) return size != 0 ? size : 1; /* malloc(0) is a call too */
    if (size >= interval) return size;
    if (t_until_sample == 0) t_until_sample = hh_next_gap();
    t_until_sample -= (int64_t)size;
    if (t_until_sample > 0) return 0;
    uint64_t samples = 0;
    while (t_until_sample <= 0) {
        t_until_sample += hh_next_gap();
        samples++;
    }
    return samples * interval;
}

/* ---- the sampled blocks ------------------------------------------------------------------
 * When sampling, only frees of sampled blocks are recorded: a lock-free set of their addresses
 * (open addressing; 0 empty, 1 deleted) answers "was this block sampled?" in a probe or two.
 * Should the set ever be too crowded to insert, every free is recorded from then on (the
 * decoder ignores frees of blocks it never saw allocated, so that stays correct). */

#define HH_SAMPLED_BITS 20
#define HH_SAMPLED_CAP (1u << HH_SAMPLED_BITS)
#define HH_SAMPLED_PROBES 64

static _Atomic(_Atomic uintptr_t *) g_sampled;
static _Atomic int g_sampled_overflow;

static _Atomic uintptr_t *hh_sampled_table(void) {
    _Atomic uintptr_t *t = atomic_load_explicit(&g_sampled, memory_order_acquire);
    if (HH_LIKELY(t != NULL)) return t;
    void *m = hh_sys_mmap(NULL, sizeof(uintptr_t) * HH_SAMPLED_CAP, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        atomic_store(&g_sampled_overflow, 1);
        return NULL;
    }
    _Atomic uintptr_t *expected = NULL;
    if (!atomic_compare_exchange_strong(&g_sampled, &expected, (_Atomic uintptr_t *)m)) {
        hh_sys_munmap(m, sizeof(uintptr_t) * HH_SAMPLED_CAP);
        return expected;
    }
    return (_Atomic uintptr_t *)m;
}

static inline uint32_t hh_sampled_hash(uintptr_t p) {
    return (uint32_t)(((p >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - HH_SAMPLED_BITS));
}

static void hh_sampled_insert(void *ptr) {
    _Atomic uintptr_t *t = hh_sampled_table();
    if (t == NULL) return;
    uintptr_t p = (uintptr_t)ptr;
    uint32_t i = hh_sampled_hash(p);
    for (int n = 0; n < HH_SAMPLED_PROBES; n++, i = (i + 1) & (HH_SAMPLED_CAP - 1)) {
        uintptr_t v = atomic_load_explicit(&t[i], memory_order_relaxed);
        if ((v == 0 || v == 1) && atomic_compare_exchange_strong_explicit(
                                      &t[i], &v, p, memory_order_release, memory_order_relaxed)) {
            return;
        }
    }
    atomic_store(&g_sampled_overflow, 1);
}

/* Removes ptr; true when it was there. */
static bool hh_sampled_remove(void *ptr) {
    _Atomic uintptr_t *t = atomic_load_explicit(&g_sampled, memory_order_acquire);
    if (t == NULL) return false;
    uintptr_t p = (uintptr_t)ptr;
    uint32_t i = hh_sampled_hash(p);
    for (int n = 0; n < HH_SAMPLED_PROBES; n++, i = (i + 1) & (HH_SAMPLED_CAP - 1)) {
        uintptr_t v = atomic_load_explicit(&t[i], memory_order_acquire);
        if (v == 0) return false;
        if (v == p) {
            return atomic_compare_exchange_strong_explicit(&t[i], &v, 1, memory_order_acq_rel,
                                                           memory_order_relaxed);
        }
    }
    return false;
}

/* When sampling: should the free of p be recorded? (Removes p from the set.) */
static inline bool hh_free_wanted(void *p) {
    if (HH_LIKELY(hh_cfg.sample_bytes == 0)) return true;
    return hh_sampled_remove(p) || atomic_load_explicit(&g_sampled_overflow, memory_order_relaxed);
}

/* Set between HH_ENTER and HH_LEAVE: hh_busy is then the program's call in progress, not the
 * tracer's own work, so memory the next allocator maps meanwhile is the program's (vm.c). */
HH_TLS int hh_in_hook;

/* ---- records ----------------------------------------------------------------------------- */

static inline uint32_t hh_stack(bool wanted, const hh_regs *regs) {
    return wanted ? hh_stack_capture(hh_cfg.depth, regs) : 0;
}

/* Bytes of an event record, with or without its extra fields. */
static inline uint32_t hh_event_len(bool extra) {
    return (uint32_t)(sizeof(hh_rec_event) + (extra ? sizeof(hh_rec_event_extra) : 0));
}

/* Does an allocation record need the extra fields? Only plain malloc/valloc/pvalloc without
 * timing or sampling do without. */
static inline bool hh_alloc_needs_extra(uint8_t op) {
    return (op != HH_OP_MALLOC && op != HH_OP_VALLOC && op != HH_OP_PVALLOC) || hh_cfg.timing ||
           hh_cfg.sample_bytes != 0;
}

/* Fills the common part (addr and size 0), and zeroes the extra fields when the record has
 * them (len from hh_event_len). Returns the extra fields, or NULL. */
static hh_rec_event_extra *hh_fill(hh_rec_event *e, uint32_t len, uint8_t op, uint64_t t0,
                                   uint32_t stack) {
    e->time = t0;
    e->tid = hh_tid();
    e->stack = stack;
    e->addr = e->size = 0;
    e->op = op;
    e->pad0 = 0;
    e->pad1 = 0;
    if (len == sizeof *e) {
        e->flags = 0;
        return NULL;
    }
    e->flags = HH_EV_EXTRA;
    hh_rec_event_extra *x = (hh_rec_event_extra *)(e + 1);
    *x = (hh_rec_event_extra){0};
    return x;
}

/* An allocation that has returned p. */
static void hh_record_alloc(uint8_t op, void *p, size_t size, size_t count, size_t align,
                            uint64_t t0, uint64_t weight, const hh_regs *regs) {
    uint64_t duration = hh_cfg.timing ? hh_now() - t0 : 0;
    if (hh_cfg.sample_bytes != 0 && p != NULL) hh_sampled_insert(p);
    uint32_t stack = hh_stack(hh_cfg.stacks, regs);
    if (stack == UINT32_MAX) return;
    uint32_t len = hh_event_len(hh_alloc_needs_extra(op));
    hh_rec_event *e = hh_tracer_reserve(len);
    if (e == NULL) return;
    hh_rec_event_extra *x = hh_fill(e, len, op, t0, stack);
    e->addr = (uintptr_t)p;
    e->size = size;
    if (x != NULL) {
        x->count = count;
        x->align = align;
        x->weight = weight;
        x->duration = duration;
    }
    hh_tracer_commit(e, HH_REC_EVENT);
}

/* Entering a traced call: the guard, the time, and the registers of this frame, where the
 * stack walk will start (the tracer's own frames below it are never walked). */
#define HH_ENTER()               \
    int hh_saved_errno;          \
    uint64_t hh_t0;              \
    hh_regs hh_regs_at;          \
    HH_CAPTURE_REGS(hh_regs_at); \
    hh_busy = 1;                 \
    hh_in_hook = 1;              \
    hh_t0 = hh_now();            \
    (void)hh_saved_errno

/* Leaving: a leak check that found this thread inside the hook (deferred mode) stops it here,
 * once its record is published. */
#define HH_LEAVE()                                         \
    do {                                                   \
        hh_busy = hh_in_hook = 0;                          \
        if (HH_UNLIKELY(hh_park_pending)) hh_leaks_park(); \
    } while (0)

/* ---- the allocation family --------------------------------------------------------------- */

HH_EXPORT void *malloc(size_t size) {
    if (HH_UNLIKELY(!hh_next_ready())) return hh_arena_alloc(size, 16);
    if (hh_busy || !hh_tracer_active()) return next.malloc(size);
    uint64_t weight = hh_sample(size);
    if (weight == 0) return hh_leaks_track(next.malloc(size), size);
    HH_ENTER();
    void *p = next.malloc(size);
    hh_saved_errno = errno;
    hh_leaks_track(p, size);
    hh_record_alloc(HH_OP_MALLOC, p, size, 0, 0, hh_t0, weight, &hh_regs_at);
    errno = hh_saved_errno;
    HH_LEAVE();
    return p;
}

HH_EXPORT void free(void *p) {
    if (p == NULL) return;
    if (HH_UNLIKELY(hh_in_arena(p))) return;
    if (HH_UNLIKELY(!hh_next_ready())) return;
    if (hh_busy || !hh_tracer_active()) {
        next.free(p);
        return;
    }
    hh_leaks_untrack(p); /* before the block can be handed out again */
    if (!hh_free_wanted(p)) {
        next.free(p);
        return;
    }
    HH_ENTER();
    hh_saved_errno = errno;
    uint32_t stack = hh_stack(hh_cfg.free_stacks, &hh_regs_at);
    uint32_t len = hh_event_len(hh_cfg.timing);
    hh_rec_event *e = stack == UINT32_MAX ? NULL : hh_tracer_reserve(len);
    hh_rec_event_extra *x = NULL;
    if (e != NULL) {
        x = hh_fill(e, len, HH_OP_FREE, hh_t0, stack);
        e->addr = (uintptr_t)p;
    }
    hh_vm_hold_record(e != NULL); /* what the free maps or unmaps waits for e (vm.h) */
    next.free(p);
    if (e != NULL) {
        if (x != NULL) x->duration = hh_now() - hh_t0;
        hh_tracer_commit(e, HH_REC_EVENT);
    }
    hh_vm_release_record();
    errno = hh_saved_errno;
    HH_LEAVE();
}

HH_EXPORT void *calloc(size_t n, size_t size) {
    if (HH_UNLIKELY(!hh_next_ready())) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total)) {
            errno = ENOMEM;
            return NULL;
        }
        return hh_arena_alloc(total, 16);
    }
    if (hh_busy || !hh_tracer_active()) return next.calloc(n, size);
    size_t total;
    uint64_t weight = __builtin_mul_overflow(n, size, &total) ? 1 : hh_sample(total);
    if (weight == 0) return hh_leaks_track(next.calloc(n, size), total);
    HH_ENTER();
    void *p = next.calloc(n, size);
    hh_saved_errno = errno;
    hh_leaks_track(p, total);
    hh_record_alloc(HH_OP_CALLOC, p, size, n, 0, hh_t0, weight, &hh_regs_at);
    errno = hh_saved_errno;
    HH_LEAVE();
    return p;
}

/* realloc and reallocarray: op, and count = 0 for realloc. */
static void *hh_realloc_common(uint8_t op, void *old, size_t count, size_t size) {
    size_t total = size;
    if (op == HH_OP_REALLOCARRAY && __builtin_mul_overflow(count, size, &total)) total = SIZE_MAX;
    HH_ENTER();
    uint64_t old_meta = hh_leaks_untrack(old);
    uint64_t weight = total == SIZE_MAX ? 1 : hh_sample(total);
    bool old_sampled = true;
    if (hh_cfg.sample_bytes != 0) {
        old_sampled = old != NULL && hh_free_wanted(old);
        if (weight == 0 && !old_sampled) { /* nothing of interest: no record */
            HH_LEAVE();
            void *q;
            if (op == HH_OP_REALLOC) {
                q = next.realloc(old, size);
            } else if (next.reallocarray != NULL) {
                q = next.reallocarray(old, count, size);
            } else if (total == SIZE_MAX) {
                errno = ENOMEM;
                q = NULL;
            } else {
                q = next.realloc(old, total);
            }
            hh_saved_errno = errno;
            if (q != NULL)
                hh_leaks_track(q, total);
            else if (total != 0)
                hh_leaks_reinsert(old, old_meta);
            errno = hh_saved_errno;
            return q;
        }
    }
    uint32_t stack = weight != 0 ? hh_stack(hh_cfg.stacks, &hh_regs_at) : 0;
    uint32_t len = hh_event_len(true);
    hh_rec_event *e = stack == UINT32_MAX ? NULL : hh_tracer_reserve(len);
    hh_vm_hold_record(e != NULL); /* what the realloc maps or unmaps waits for e (vm.h) */
    void *p;
    if (op == HH_OP_REALLOC) {
        p = next.realloc(old, size);
    } else if (next.reallocarray != NULL) {
        p = next.reallocarray(old, count, size);
    } else if (total == SIZE_MAX) {
        errno = ENOMEM;
        p = NULL;
    } else {
        p = next.realloc(old, total);
    }
    hh_saved_errno = errno;
    if (p != NULL)
        hh_leaks_track(p, total);
    else if (total != 0)
        hh_leaks_reinsert(old, old_meta); /* failed: the old block stays */
    if (hh_cfg.sample_bytes != 0) {
        if (p == NULL && total != 0 && old != NULL && old_sampled) hh_sampled_insert(old);
        if (p != NULL && weight != 0) hh_sampled_insert(p);
    }
    bool split = p != NULL && old != NULL && p != old;
    if (e != NULL) {
        hh_rec_event_extra *x = hh_fill(e, len, op, hh_t0, stack);
        e->addr = (uintptr_t)p;
        e->size = size;
        if (split) e->flags |= HH_EV_SPLIT;
        x->old = (uintptr_t)old;
        x->count = count;
        x->weight = weight;
        if (hh_cfg.timing) x->duration = hh_now() - hh_t0;
        hh_tracer_commit(e, HH_REC_EVENT);
        if (split) {
            uint32_t done_len = hh_event_len(false);
            hh_rec_event *done = hh_tracer_reserve(done_len);
            if (done != NULL) {
                hh_fill(done, done_len, HH_OP_REALLOC_DONE, hh_t0, 0);
                hh_tracer_commit(done, HH_REC_EVENT);
            }
        }
    }
    hh_vm_release_record();
    errno = hh_saved_errno;
    HH_LEAVE();
    return p;
}

HH_EXPORT void *realloc(void *old, size_t size) {
    if (HH_UNLIKELY(old != NULL && hh_in_arena(old))) {
        void *p = malloc(size);
        if (p != NULL) {
            size_t n = hh_arena_size(old);
            memcpy(p, old, n < size ? n : size);
        }
        return p;
    }
    if (HH_UNLIKELY(!hh_next_ready())) return hh_arena_alloc(size, 16);
    if (hh_busy || !hh_tracer_active()) return next.realloc(old, size);
    return hh_realloc_common(HH_OP_REALLOC, old, 0, size);
}

HH_EXPORT void *reallocarray(void *old, size_t count, size_t size) {
    size_t total;
    if (HH_UNLIKELY((old != NULL && hh_in_arena(old)) || !hh_next_ready() ||
                    next.reallocarray == NULL)) {
        if (__builtin_mul_overflow(count, size, &total)) {
            errno = ENOMEM;
            return NULL;
        }
        if (!hh_next_ready() || (old != NULL && hh_in_arena(old))) return realloc(old, total);
    }
    if (hh_busy || !hh_tracer_active()) {
        if (next.reallocarray != NULL) return next.reallocarray(old, count, size);
        return next.realloc(old, count * size);
    }
    return hh_realloc_common(HH_OP_REALLOCARRAY, old, count, size);
}

/* posix_memalign, memalign, aligned_alloc, valloc, pvalloc. */
static void *hh_aligned_common(uint8_t op, size_t align, size_t size, int *rc) {
    void *p = NULL;
    switch (op) {
        case HH_OP_POSIX_MEMALIGN:
            *rc = next.posix_memalign(&p, align, size);
            if (*rc != 0) p = NULL;
            break;
        case HH_OP_MEMALIGN:
            p = next.memalign(align, size);
            break;
        case HH_OP_ALIGNED_ALLOC:
            p = next.aligned_alloc != NULL ? next.aligned_alloc(align, size)
                                           : next.memalign(align, size);
            break;
        case HH_OP_VALLOC:
            p = next.valloc != NULL ? next.valloc(size)
                                    : next.memalign((size_t)sysconf(_SC_PAGESIZE), size);
            break;
        default: {
            size_t page = (size_t)sysconf(_SC_PAGESIZE);
            p = next.pvalloc != NULL ? next.pvalloc(size)
                                     : next.memalign(page, (size + page - 1) & ~(page - 1));
            break;
        }
    }
    return p;
}

static void *hh_aligned(uint8_t op, size_t align, size_t size, int *rc) {
    if (HH_UNLIKELY(!hh_next_ready())) {
        size_t a = op == HH_OP_VALLOC || op == HH_OP_PVALLOC ? 4096 : align;
        if (a == 0 || (a & (a - 1)) != 0) {
            *rc = EINVAL;
            return NULL;
        }
        void *p = hh_arena_alloc(size, a);
        *rc = p != NULL ? 0 : ENOMEM;
        return p;
    }
    if (hh_busy || !hh_tracer_active()) return hh_aligned_common(op, align, size, rc);
    uint64_t weight = hh_sample(size);
    if (weight == 0) return hh_leaks_track(hh_aligned_common(op, align, size, rc), size);
    HH_ENTER();
    void *p = hh_aligned_common(op, align, size, rc);
    hh_saved_errno = errno;
    hh_leaks_track(p, size);
    hh_record_alloc(op, p, size, 0, align, hh_t0, weight, &hh_regs_at);
    errno = hh_saved_errno;
    HH_LEAVE();
    return p;
}

HH_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    int rc = 0;
    void *p = hh_aligned(HH_OP_POSIX_MEMALIGN, align, size, &rc);
    if (rc == 0) *out = p;
    return rc;
}

HH_EXPORT void *memalign(size_t align, size_t size) {
    int rc = 0;
    return hh_aligned(HH_OP_MEMALIGN, align, size, &rc);
}

HH_EXPORT void *aligned_alloc(size_t align, size_t size) {
    int rc = 0;
    return hh_aligned(HH_OP_ALIGNED_ALLOC, align, size, &rc);
}

HH_EXPORT void *valloc(size_t size) {
    int rc = 0;
    return hh_aligned(HH_OP_VALLOC, 0, size, &rc);
}

HH_EXPORT void *pvalloc(size_t size) {
    int rc = 0;
    return hh_aligned(HH_OP_PVALLOC, 0, size, &rc);
}

HH_EXPORT size_t malloc_usable_size(void *p) {
    if (p == NULL) return 0;
    if (hh_in_arena(p)) return hh_arena_size(p);
    if (!hh_next_ready() || next.malloc_usable_size == NULL) return 0;
    return next.malloc_usable_size(p);
}

/* ---- dlclose and exec -------------------------------------------------------------------- */

HH_EXPORT int dlclose(void *handle) {
    hh_resolve_process_calls();
    int rc = next_process.dlclose(handle);
    hh_unwind_invalidate(); /* code may be unmapped and other code mapped there */
    return rc;
}

/* Standalone mode: write out what the ring holds before the process image is replaced. */
static void hh_before_exec(void) {
    if (hh_busy) return;
    hh_busy = hh_stop_later = 1; /* a leak check must not stop this thread in the drain's locks */
    hh_tracer_flush_now();
    hh_busy = hh_stop_later = 0;
    if (HH_UNLIKELY(hh_park_pending)) hh_leaks_park();
}

HH_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    hh_resolve_process_calls();
    hh_before_exec();
    return next_process.execve(path, argv, envp);
}

HH_EXPORT int execv(const char *path, char *const argv[]) {
    hh_resolve_process_calls();
    hh_before_exec();
    return next_process.execv(path, argv);
}

HH_EXPORT int execvp(const char *file, char *const argv[]) {
    hh_resolve_process_calls();
    hh_before_exec();
    return next_process.execvp(file, argv);
}

HH_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    hh_resolve_process_calls();
    hh_before_exec();
    return next_process.execvpe(file, argv, envp);
}

/* ---- _exit ------------------------------------------------------------------------------- */

/* A process that ends through _exit (os._exit in Python, a forked child, a signal handler)
 * skips the exit path, so the destructor that writes the ring's tail and the END record never
 * runs: the tracer finishes the log here (standalone mode; the collector sees the end by
 * itself), after the counts of rtcheck's violations, when its guard is loaded, are in the ring.
 * glibc's exit() reaches its _exit internally, not through these symbols. */
static __attribute__((noreturn)) void hh_exit_now(int status) {
    if (!hh_busy) hh_rt_flush_guard(); /* rtcheck's final counts: its destructor will not run */
    hh_tracer_finish_before_exit();
    if (next_process.exit != NULL) next_process.exit(status);
    for (;;) syscall(SYS_exit_group, status);
}

HH_EXPORT void _exit(int status) {
    hh_exit_now(status);
}

HH_EXPORT void _Exit(int status) {
    hh_exit_now(status);
}

/* ---- installing into a running process (attach.c) ---------------------------------------- */

/* The hooks under names of their own. When this library was dlopen'ed rather than preloaded,
 * the exported names (malloc ...) resolve to the C library's functions, even from inside it;
 * these names always reach the hooks: they are what heaphook_heaptrack_attach writes into the
 * GOTs of the process. */
#define HH_SELF(name) \
    extern __typeof__(name) hh_self_##name __attribute__((alias(#name), visibility("hidden")))
HH_SELF(malloc);
HH_SELF(free);
HH_SELF(calloc);
HH_SELF(realloc);
HH_SELF(reallocarray);
HH_SELF(posix_memalign);
HH_SELF(memalign);
HH_SELF(aligned_alloc);
HH_SELF(valloc);
HH_SELF(pvalloc);
HH_SELF(malloc_usable_size);

const hh_hook hh_hooks[HH_HOOK_COUNT] = {
    {"malloc", (void *)hh_self_malloc},
    {"free", (void *)hh_self_free},
    {"calloc", (void *)hh_self_calloc},
    {"realloc", (void *)hh_self_realloc},
    {"reallocarray", (void *)hh_self_reallocarray},
    {"posix_memalign", (void *)hh_self_posix_memalign},
    {"memalign", (void *)hh_self_memalign},
    {"aligned_alloc", (void *)hh_self_aligned_alloc},
    {"valloc", (void *)hh_self_valloc},
    {"pvalloc", (void *)hh_self_pvalloc},
    {"malloc_usable_size", (void *)hh_self_malloc_usable_size},
};

bool hh_hooks_interposed(void) {
    /* In the program's scope (preloaded, or a dependency of the program), this library's own
     * exported names are found by a lookup from the program; dlopen'ed with RTLD_LOCAL, they
     * are not. (Not RTLD_DEFAULT: from here it searches this library's own scope too. Nor
     * malloc's address: a non-PIE program that takes it answers with its canonical PLT entry,
     * whatever serves the calls.) */
    void *program = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (program == NULL) return true;
    bool found = dlsym(program, "heaphook_heaptrack_log_path") != NULL;
    dlclose(program);
    return found;
}

void hh_hooks_forward_to(void *const originals[HH_HOOK_COUNT]) {
    heaphook_next_allocator table = {
        .malloc = (void *(*)(size_t))originals[0],
        .free = (void (*)(void *))originals[1],
        .calloc = (void *(*)(size_t, size_t))originals[2],
        .realloc = (void *(*)(void *, size_t))originals[3],
        .reallocarray = (void *(*)(void *, size_t, size_t))originals[4],
        .posix_memalign = (int (*)(void **, size_t, size_t))originals[5],
        .memalign = (void *(*)(size_t, size_t))originals[6],
        .aligned_alloc = (void *(*)(size_t, size_t))originals[7],
        .valloc = (void *(*)(size_t))originals[8],
        .pvalloc = (void *(*)(size_t))originals[9],
        .malloc_usable_size = (size_t(*)(void *))originals[10],
    };
    hh_resolve_process_calls();
    heaphook_next_forward_to(&table);
}
