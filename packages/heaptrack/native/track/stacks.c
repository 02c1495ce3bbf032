/*
 * stacks.c — the stack trie (stacks.h).
 *
 * Lookups are lock-free: a slot is written once (its meta, then its pc with release order)
 * and never moves. New nodes are created under a spin lock, which also orders their NODE
 * record in the ring before any event that can name them. Each thread remembers its previous
 * stack: the outer frames it shares with the new one keep their node ids without a lookup.
 */
#include "stacks.h"

#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "fork.h"
#include "modules.h"
#include "trace.h"
#include "tracer.h"
#include "unwinder.h"

/* slot meta: bits 0-27 parent, 28-55 id, 56-63 epoch */
#define HH_NODE_BITS 28
#define HH_NODE_MASK ((1u << HH_NODE_BITS) - 1)
#define HH_TABLE_BITS 21
#define HH_TABLE_CAP (1u << HH_TABLE_BITS)
#define HH_MAX_NODES (HH_TABLE_CAP - HH_TABLE_CAP / 8)

typedef struct hh_node_slot {
    _Atomic uint64_t pc;
    _Atomic uint64_t meta;
} hh_node_slot;

static hh_node_slot *hh_nodes;
static _Atomic uint32_t hh_node_count;
static _Atomic int hh_nodes_lock;
static _Atomic uint32_t hh_epoch;

/* Frames of the per-thread cache of the previous stack: the default HEAPHOOK_STACK_DEPTH, so
 * that the library's static TLS stays under what glibc keeps for initial-exec TLS of objects
 * loaded by dlopen (~1.6 KiB; attach.c loads the tracer that way). Deeper stacks are interned
 * without the cache. */
#define HH_PREV_DEPTH 64
static HH_TLS uintptr_t t_prev_pcs[HH_PREV_DEPTH];
static HH_TLS uint32_t t_prev_ids[HH_PREV_DEPTH];
static HH_TLS int t_prev_n;
static HH_TLS uint32_t t_prev_epoch;
static HH_TLS bool t_prev_is_last; /* t_prev_pcs are the pcs of this thread's last walk */

int hh_stacks_init(void) {
    if (hh_nodes != NULL) return 0;
    void *p = hh_sys_mmap(NULL, sizeof(hh_node_slot) * HH_TABLE_CAP, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return -1;
    hh_nodes = p;
    return 0;
}

static inline uint32_t hh_node_hash(uint32_t parent, uintptr_t pc) {
    uint64_t h = (pc ^ ((uint64_t)parent << 40) ^ parent) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> (64 - HH_TABLE_BITS));
}

static inline uint64_t hh_meta(uint32_t parent, uint32_t id, uint32_t epoch) {
    return (uint64_t)parent | ((uint64_t)id << HH_NODE_BITS) | ((uint64_t)(epoch & 0xff) << 56);
}

static inline uint32_t hh_meta_parent(uint64_t m) {
    return (uint32_t)(m & HH_NODE_MASK);
}
static inline uint32_t hh_meta_id(uint64_t m) {
    return (uint32_t)((m >> HH_NODE_BITS) & HH_NODE_MASK);
}
static inline uint32_t hh_meta_epoch(uint64_t m) {
    return (uint32_t)(m >> 56);
}

static void hh_lock(void) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HH_RANK_STACK_TRIE, "the stack trie lock (stacks.c)");
    hh_spin_lock(&hh_nodes_lock);
}

static void hh_unlock(void) {
    hh_spin_unlock(&hh_nodes_lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HH_RANK_STACK_TRIE);
}

static bool hh_send_node(uint32_t id, uint32_t parent, uintptr_t pc) {
    if (!hh_modules_contains(pc)) hh_modules_sync(); /* a library loaded since? */
    hh_rec_node *rec = hh_tracer_reserve(sizeof(hh_rec_node));
    if (rec == NULL) return false;
    rec->id = id;
    rec->parent = parent;
    rec->pc = pc;
    hh_tracer_commit(rec, HH_REC_NODE);
    return true;
}

/* The slot of (parent, pc), or the empty slot where it belongs; NULL when the probe is full. */
static hh_node_slot *hh_probe(uint32_t parent, uintptr_t pc, uint64_t *meta_out) {
    uint32_t i = hh_node_hash(parent, pc);
    for (int n = 0; n < 64; n++, i = (i + 1) & (HH_TABLE_CAP - 1)) {
        hh_node_slot *s = &hh_nodes[i];
        uintptr_t k = atomic_load_explicit(&s->pc, memory_order_acquire);
        if (k == 0) {
            *meta_out = 0;
            return s;
        }
        if (k == pc) {
            uint64_t m = atomic_load_explicit(&s->meta, memory_order_relaxed);
            if (hh_meta_parent(m) == parent) {
                *meta_out = m;
                return s;
            }
        }
    }
    return NULL;
}

/* The node id of (parent, pc), creating (or re-sending, in a new epoch) it. 0 when the table
 * is full, UINT32_MAX when the node could not be sent (ring full in drop mode). */
static uint32_t hh_intern(uint32_t parent, uintptr_t pc, uint32_t epoch) {
    uint64_t m;
    hh_node_slot *s = hh_probe(parent, pc, &m);
    if (s != NULL && m != 0 && hh_meta_epoch(m) == (epoch & 0xff)) return hh_meta_id(m);
    hh_lock();
    s = hh_probe(parent, pc, &m);
    uint32_t id = 0;
    if (s == NULL) {
        id = 0;
    } else if (m != 0) {
        id = hh_meta_id(m);
        if (hh_meta_epoch(m) != (epoch & 0xff)) {
            if (hh_send_node(id, parent, pc)) {
                atomic_store_explicit(&s->meta, hh_meta(parent, id, epoch), memory_order_release);
            } else {
                id = UINT32_MAX;
            }
        }
    } else if (atomic_load(&hh_node_count) < HH_MAX_NODES) {
        id = atomic_load(&hh_node_count) + 1;
        if (hh_send_node(id, parent, pc)) {
            atomic_store(&hh_node_count, id);
            atomic_store_explicit(&s->meta, hh_meta(parent, id, epoch), memory_order_relaxed);
            atomic_store_explicit(&s->pc, pc, memory_order_release);
        } else {
            id = UINT32_MAX;
        }
    }
    hh_unlock();
    return id;
}

/* A stack deeper than the cache: every frame interned, outermost first. */
static uint32_t hh_stack_intern_all(const uintptr_t *pcs, int n, uint32_t epoch) {
    t_prev_n = 0;
    uint32_t parent = 0;
    for (int i = n - 1; i >= 0; i--) {
        uint32_t id = hh_intern(parent, pcs[i], epoch);
        if (id == 0 || id == UINT32_MAX) return id == 0 ? parent : UINT32_MAX;
        parent = id;
    }
    return parent;
}

uint32_t hh_stack_capture(int depth, const hh_regs *regs) {
    uintptr_t pcs[HH_MAX_DEPTH];
    if (depth > HH_MAX_DEPTH) depth = HH_MAX_DEPTH;
    int same_outer;
    int n = hh_unwind_from(regs, pcs, depth, &same_outer);
    const bool prev_is_last = t_prev_is_last;
    t_prev_is_last = false; /* until this walk's pcs are stored below */
    if (n <= 0) return 0;
    uint32_t epoch = atomic_load_explicit(&hh_epoch, memory_order_relaxed);
    if (n > HH_PREV_DEPTH) return hh_stack_intern_all(pcs, n, epoch);
    /* The previous stack is kept anchored at the arrays' end (its outermost frame in the last
     * slot), where this one's frames go too: the outer frames they share are already in
     * place with their ids, and only the new inner ones are written. */
    int shared = 0;
    if (t_prev_epoch == epoch) {
        const int m = t_prev_n;
        if (prev_is_last && same_outer > 0) {
            /* The walk checked these against the previous walk's frames: no need to compare */
            shared = same_outer < m ? same_outer : m;
#ifdef HEAPHOOK_DEBUG
            for (int i = 0; i < shared; i++)
                if (pcs[n - 1 - i] != t_prev_pcs[HH_PREV_DEPTH - 1 - i]) __builtin_trap();
#endif
        }
        while (shared < n && shared < m &&
               pcs[n - 1 - shared] == t_prev_pcs[HH_PREV_DEPTH - 1 - shared]) {
            shared++;
        }
    }
    uint32_t parent = shared > 0 ? t_prev_ids[HH_PREV_DEPTH - shared] : 0;
    for (int i = n - 1 - shared; i >= 0; i--) {
        uint32_t id = hh_intern(parent, pcs[i], epoch);
        if (id == 0 || id == UINT32_MAX) {
            t_prev_n = 0;
            /* table full: keep the outer part; not sent: the event must be dropped */
            return id == 0 ? parent : UINT32_MAX;
        }
        t_prev_pcs[HH_PREV_DEPTH - n + i] = pcs[i];
        t_prev_ids[HH_PREV_DEPTH - n + i] = id;
        parent = id;
    }
    t_prev_n = n;
    t_prev_epoch = epoch;
    t_prev_is_last = true;
    return parent;
}

uint32_t hh_stack_capture_outside(int depth, uintptr_t lo, uintptr_t hi) {
    uintptr_t pcs[HH_MAX_DEPTH];
    if (depth > HH_MAX_DEPTH) depth = HH_MAX_DEPTH;
    int same_outer;
    int n = hh_unwind_from(NULL, pcs, depth, &same_outer);
    t_prev_is_last = false; /* the next walk's same_outer is not about t_prev's frames */
    int inner = 0;
    while (inner < n && pcs[inner] >= lo && pcs[inner] < hi) inner++;
    if (n - inner <= 0) return 0;
    return hh_stack_intern_all(pcs + inner, n - inner,
                               atomic_load_explicit(&hh_epoch, memory_order_relaxed));
}

void hh_stacks_fork_prepare(void) {
    hh_lock();
}
void hh_stacks_fork_parent(void) {
    hh_unlock();
}
void hh_stacks_new_log(void) {
    atomic_fetch_add(&hh_epoch, 1);
    t_prev_n = 0;
}

void hh_stacks_fork_child(void) {
    atomic_fetch_add(&hh_epoch, 1);
    t_prev_n = 0;
    hh_unlock();
}
