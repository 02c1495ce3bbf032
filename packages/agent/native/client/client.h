/*
 * client.h — what the agent client's files share. The client is libheaphook_agent.so, preloaded
 * ahead of any backend (`heaphook run --agent PATH -b tlsf ...` puts it there): hooks.c wraps
 * the malloc family and forwards to the next allocator (RTLD_NEXT); sampler.c decides which
 * allocations are sampled and remembers the sampled addresses; link.c owns the connection to
 * the agent and the thread that keeps it up; fork.c is the fork module (its lock order).
 *
 * The program never waits for the agent: frames are sent with MSG_DONTWAIT and a frame that
 * cannot be sent now is dropped and counted.
 */
#ifndef HH_AGENT_CLIENT_H
#define HH_AGENT_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HH_TLS __thread __attribute__((tls_model("initial-exec")))
#define HH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HH_LIKELY(x) __builtin_expect(!!(x), 1)

/* Set while the client itself runs on this thread: its own allocations are not sampled. */
extern HH_TLS int hh_agent_busy;

/* link.c: true once the client reports (start.c started it). */
extern bool hh_agent_enabled;
/* Takes "unix:PATH" as the agent's address; false when value has another form. */
bool hh_agent_parse_address(const char *value);
/* The sampled-address table, the first connection and the keeper thread; then the hooks
 * report (hh_agent_enabled). NULL, or why it could not. Once per process. */
const char *hh_agent_link_start(uint64_t sample_bytes);
void hh_agent_link_fork_child(void); /* the child gets a connection of its own */
/* fork.c: the library's only pthread_atfork (once; before the first GOT patch). */
void hh_agent_fork_register(void);
void hh_agent_link_ensure_thread(void); /* (re)starts the keeper thread when it is missing */
/* Ends the keeper thread and waits for it (setid.c: around a change of credentials), and
 * starts it again. */
void hh_agent_keeper_pause(void);
void hh_agent_keeper_resume(void);
/* attach.c: the hooks reached by GOT patching, for a client that is not the process's malloc.
 * Resolve finds what they forward to (before the link starts); patch redirects the process's
 * malloc family to them. NULL, or why not. */
const char *hh_agent_attach_resolve(void);
const char *hh_agent_attach_patch(void);
/* extras.c: ucm-hooks' mapped bytes and heaptrack's leak figures, when those are loaded. Start
 * registers the VM handler (once, when the client starts); fill adds them to a STATS frame. */
struct hh_agent_stats;
void hh_agent_extras_start(void);
void hh_agent_extras_fill(struct hh_agent_stats *frame);
/* Sends one sampled allocation (with its stack, and symbols not sent yet). False: dropped. */
bool hh_agent_send_alloc(uintptr_t address, size_t size, const uintptr_t *pcs, int depth);
bool hh_agent_send_free(uintptr_t address);
void hh_agent_count_dropped(void);

/* sampler.c. The per-call part is inline here: every malloc and free of the program runs it. */
extern uint64_t hh_agent_sample_bytes;
extern HH_TLS int64_t
    hh_agent_until_sample; /* bytes this thread allocates before its next sample */
extern HH_TLS uint32_t hh_agent_thread_allocs, hh_agent_thread_frees;
#define HH_COUNT_STEP 64u /* per-thread counts reach the shared ones in steps of this */
void hh_agent_publish_allocs(void);
void hh_agent_publish_frees(void);
/* The countdown crossed zero: true when this allocation is sampled (a thread's first crossing
 * draws its first interval instead). */
bool hh_agent_sample_slow(size_t size);

/* Counts one allocation of size bytes on this thread; true when it is to be sampled. */
static inline bool hh_agent_sample(size_t size) {
    if (HH_UNLIKELY(++hh_agent_thread_allocs == HH_COUNT_STEP)) hh_agent_publish_allocs();
    hh_agent_until_sample -= (int64_t)size;
    if (HH_LIKELY(hh_agent_until_sample > 0)) return false;
    return hh_agent_sample_slow(size);
}

static inline void hh_agent_count_free(void) {
    if (HH_UNLIKELY(++hh_agent_thread_frees == HH_COUNT_STEP)) hh_agent_publish_frees();
}
/* The sampled-address table: false when full (the sample is then dropped). */
bool hh_agent_remember(uintptr_t address);
/* True when address was sampled (and forgets it). */
bool hh_agent_forget_slow(uintptr_t address);
#define HH_TABLE_BITS 18
extern _Atomic uintptr_t *hh_agent_table;
static inline size_t hh_agent_slot_of(uintptr_t address) {
    return (size_t)(((uint64_t)address * 0x9e3779b97f4a7c15ULL) >> (64 - HH_TABLE_BITS));
}
/* The common answer, "not sampled", in one load: the address's first slot is empty. */
static inline bool hh_agent_forget(uintptr_t address) {
    if (HH_UNLIKELY(hh_agent_table == NULL)) return false;
    uintptr_t first =
        atomic_load_explicit(&hh_agent_table[hh_agent_slot_of(address)], memory_order_relaxed);
    if (HH_LIKELY(first == 0)) return false;
    return hh_agent_forget_slow(address);
}
/* ---- the hooks' sampling path (sample_path.c), the same for hooks.c and attach.c ---------- */

/* A sampled allocation: its stack, its address remembered, one frame. Call it from the hook
 * itself (it skips two frames: its own and the hook's). */
void hh_agent_sampled(void *ptr, size_t size);

/* Every allocation: a thread-local countdown, inline in the hook. hh_agent_busy is not tested
 * before the countdown: the client's own allocations happen with it set and are rare, so it
 * is tested only when one would be sampled. */
#define hh_after_alloc(ptr, size)                                                                 \
    do {                                                                                          \
        if (HH_LIKELY(hh_agent_enabled) && HH_UNLIKELY(hh_agent_sample(size)) && (ptr) != NULL && \
            !hh_agent_busy)                                                                       \
            hh_agent_sampled((ptr), (size));                                                      \
    } while (0)

/* Every free (and the old block of a realloc): the probe of the sampled-address table. */
static inline void hh_before_free(void *ptr) {
    if (!hh_agent_enabled) return;
    hh_agent_count_free();
    if (HH_LIKELY(!hh_agent_forget((uintptr_t)ptr))) return;
    hh_agent_busy++;
    /* A FREE that cannot be sent leaves the agent over-counting this block until the process
     * reconnects (a new connection starts the in-use profile over): counted as dropped. */
    if (!hh_agent_send_free((uintptr_t)ptr)) hh_agent_count_dropped();
    hh_agent_busy--;
}

uint64_t hh_agent_allocs_total(void);
uint64_t hh_agent_frees_total(void);
int hh_agent_sampler_init(void);

#endif /* HH_AGENT_CLIENT_H */
