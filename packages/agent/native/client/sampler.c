/*
 * sampler.c — Poisson sampling by bytes, as tcmalloc, jemalloc and heapprofd do it: each
 * thread counts down a random number of bytes drawn from an exponential distribution of mean
 * HEAPHOOK_AGENT_SAMPLE_BYTES; the allocation that crosses zero is sampled. An allocation of
 * size s is then sampled with probability 1 - exp(-s / mean), and the agent weights it by the
 * inverse of that probability, so its sums estimate the real heap without bias.
 *
 * The sampled addresses are kept in a fixed table (open addressing, linear probing of at most
 * HH_PROBE_LIMIT slots, tombstones reused) so that a free can tell, in a few loads, whether its
 * block was sampled and the agent must hear of it.
 */
#include <math.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

uint64_t hh_agent_sample_bytes = 512u * 1024u;

/* 2 MiB of addresses: 262,144 live samples at most. */
#define HH_TABLE_SLOTS (1u << HH_TABLE_BITS)
#define HH_PROBE_LIMIT 32u
#define HH_EMPTY ((uintptr_t)0)
#define HH_TOMBSTONE ((uintptr_t)1)
_Atomic uintptr_t *hh_agent_table;
#define g_table hh_agent_table
/* Per-thread counters reach the shared ones in steps (HH_COUNT_STEP), so threads do not share
 * a cache line on every call. */
static _Atomic uint64_t g_allocs, g_frees;

HH_TLS int64_t hh_agent_until_sample;
HH_TLS uint32_t hh_agent_thread_allocs, hh_agent_thread_frees;
#define t_until_sample hh_agent_until_sample
static HH_TLS bool t_seeded;
static HH_TLS uint64_t t_rng;

int hh_agent_sampler_init(void) {
    void *p = mmap(NULL, HH_TABLE_SLOTS * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    g_table = p;
    return 0;
}

static uint64_t hh_next_random(void) {
    /* xorshift64*: enough for drawing intervals, and it never allocates. */
    t_rng ^= t_rng >> 12;
    t_rng ^= t_rng << 25;
    t_rng ^= t_rng >> 27;
    return t_rng * 0x2545f4914f6cdd1dULL;
}

static int64_t hh_next_interval(void) {
    if (hh_agent_sample_bytes <= 1) return 0;
    /* u in (0, 1]: 53 random bits. */
    double u = (double)((hh_next_random() >> 11) + 1) / 9007199254740992.0;
    double bytes = -log(u) * (double)hh_agent_sample_bytes;
    return bytes > 9.0e18 ? INT64_MAX : (int64_t)bytes;
}

void hh_agent_publish_allocs(void) {
    atomic_fetch_add_explicit(&g_allocs, HH_COUNT_STEP, memory_order_relaxed);
    hh_agent_thread_allocs = 0;
}

void hh_agent_publish_frees(void) {
    atomic_fetch_add_explicit(&g_frees, HH_COUNT_STEP, memory_order_relaxed);
    hh_agent_thread_frees = 0;
}

bool hh_agent_sample_slow(size_t size) {
    if (HH_UNLIKELY(!t_seeded)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t_rng =
            ((uint64_t)syscall(SYS_gettid) << 32) ^ (uint64_t)ts.tv_nsec ^ 0x9e3779b97f4a7c15ULL;
        if (t_rng == 0) t_rng = 1;
        t_seeded = true;
        /* A thread's first interval is drawn here, not taken as 0: otherwise every thread's
         * first allocation would be sampled. */
        t_until_sample = hh_next_interval() - (int64_t)size;
        if (t_until_sample > 0) return false;
    }
    t_until_sample = hh_next_interval();
    return true;
}

uint64_t hh_agent_allocs_total(void) {
    return atomic_load_explicit(&g_allocs, memory_order_relaxed);
}

uint64_t hh_agent_frees_total(void) {
    return atomic_load_explicit(&g_frees, memory_order_relaxed);
}

#define hh_slot_of hh_agent_slot_of

bool hh_agent_remember(uintptr_t address) {
    if (g_table == NULL || address <= HH_TOMBSTONE) return false;
    size_t slot = hh_slot_of(address);
    for (unsigned i = 0; i < HH_PROBE_LIMIT; i++) {
        _Atomic uintptr_t *s = &g_table[(slot + i) & (HH_TABLE_SLOTS - 1)];
        uintptr_t seen = atomic_load_explicit(s, memory_order_relaxed);
        if (seen != HH_EMPTY && seen != HH_TOMBSTONE) continue;
        if (atomic_compare_exchange_strong(s, &seen, address)) return true;
    }
    return false;
}

bool hh_agent_forget_slow(uintptr_t address) {
    if (g_table == NULL) return false;
    size_t slot = hh_slot_of(address);
    for (unsigned i = 0; i < HH_PROBE_LIMIT; i++) {
        _Atomic uintptr_t *s = &g_table[(slot + i) & (HH_TABLE_SLOTS - 1)];
        uintptr_t seen = atomic_load_explicit(s, memory_order_relaxed);
        if (seen == HH_EMPTY) return false;
        if (seen == address) {
            /* Only the thread freeing the block can clear it: no race on the same address. */
            atomic_store_explicit(s, HH_TOMBSTONE, memory_order_relaxed);
            return true;
        }
    }
    return false;
}
