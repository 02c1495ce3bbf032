/*
 * leaks/internal.h — what the files of leaks/ share with each other. The tracer sees leaks.h
 * only; programs see include/heaphook/leaks.h. Everything here is hidden (the library is built
 * with -fvisibility=hidden) and hh_-prefixed. One file per concept (native/README.md):
 *
 *   table.c  the live-block table: address -> size, type, root flag
 *   types.c  the precise API's types and roots
 *   stop.c   stopping the world
 *   mark.c   the check: snapshot, mark from the roots, verdicts and their records
 *   leaks.c  the public check API, the signal thread, configuration, who keeps the table,
 *            fork and exit
 *
 * Lock order: the check lock, then tracer.h's cursor lock, then the table's shard locks.
 */
#ifndef HH_LEAKS_INTERNAL_H
#define HH_LEAKS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include "format/heaplog.h"
#include "leaks.h"
#include "track/trace.h"

/* Debug builds (cmake -DHEAPHOOK_DEBUG=ON) trap when an invariant of leaks/ is broken; other
 * builds compile the condition away. Only cheap conditions: some sit on the hooks' path. */
#ifdef HEAPHOOK_DEBUG
#define HH_LEAKS_ASSERT(cond) ((cond) ? (void)0 : __builtin_trap())
#else
#define HH_LEAKS_ASSERT(cond) ((void)0)
#endif

/* Zeroed anonymous memory straight from the kernel (never malloc), or NULL. */
static inline void *hh_map(size_t bytes) {
    void *m = hh_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

/* ---- table.c: the live-block table ------------------------------------------------------- */

/* An entry's meta: bits 0-45 the block's size, 46 present (never 0 for a live block), 47 the
 * root flag of the precise API, 48-63 its type id (0: untyped). */
#define HH_META_SIZE ((1ull << 46) - 1)
#define HH_META_PRESENT (1ull << 46)
#define HH_META_ROOT (1ull << 47)
#define HH_META_TYPE_SHIFT 48

typedef struct hh_entry {
    uint64_t addr; /* 0 empty */
    uint64_t meta;
} hh_entry;

/* Changes the entry of the live block p: its type (type >= 0) and/or its root flag (root 1
 * sets, 0 clears, -1 leaves it). False when p is not in the table. Takes p's shard lock. */
bool hh_table_modify(void *p, int type, int root);

/* Take and release every shard lock, in shard order: in between, no insert, remove or modify
 * runs (a check's snapshot, fork). */
void hh_table_lock(void);
void hh_table_unlock(void);

/* With hh_table_lock held: the number of live entries, and a copy of at most cap of them into
 * out, shard after shard (not sorted); returns how many were copied. */
uint64_t hh_table_live(void);
uint64_t hh_table_copy(hh_entry *out, uint64_t cap);

/* ---- types.c: types and roots of the precise API ----------------------------------------- */

typedef struct hh_type {
    char name[64];
    uint64_t size;
    uint32_t first, nptr; /* its pointer words (byte offsets): hh_type_ptr_words(t)[0 .. nptr) */
} hh_type;

/* The registered type of an entry's meta, or NULL (untyped, or an id never registered). */
const hh_type *hh_type_of(uint64_t meta);
/* The byte offsets of t's pointer words in one object, t->nptr of them. */
const uint32_t *hh_type_ptr_words(const hh_type *t);
/* True from the first heaphook_type_register with valid arguments on: the type arrays are
 * mapped, and the hooks keep the table (hh_leaks_go_sync ran). */
bool hh_types_in_use(void);
/* Calls scan for every registered root object, with its type's size. Called by the check under
 * the check lock only, not the types' lock (as before the split): a root added or removed by
 * another thread meanwhile may be missed. */
void hh_roots_scan(void (*scan)(uintptr_t base, uint64_t bytes, const hh_type *t));

/* ---- stop.c: stopping the world ----------------------------------------------------------- */

#define HH_MAX_REGS 64u

/* A thread's slot during a stop. Only the state moves it on:
 *   SIGNALLED    sent the stop signal, not stopped yet;
 *   STOPPED      waiting in the handler: sp, tp and regs are its interrupted context;
 *   RESUMED      was stopped, has left the handler;
 *   NOT_STOPPED  exited, could not be signalled, or out of time (its tid then in sp): not
 *                scanned;
 *   IN_KERNEL    blocks the signal but sleeps in a system call: sp from /proc, no tp, no regs;
 *   IN_HOOK      deferred mode, was inside a hook: stops (STOPPED) when it leaves it. */
enum {
    HH_STOP_SIGNALLED = 0,
    HH_STOP_STOPPED = 1,
    HH_STOP_RESUMED = 2,
    HH_STOP_NOT_STOPPED = 3,
    HH_STOP_IN_KERNEL = 4,
    HH_STOP_IN_HOOK = 5,
};

typedef struct hh_stopped {
    _Atomic uint32_t tid;
    _Atomic int state; /* HH_STOP_* */
    uintptr_t sp, tp;
    uint32_t nregs;
    uint64_t regs[HH_MAX_REGS];
} hh_stopped;

/* The stop signal (a real-time one) and how long to wait for a thread that neither stops nor
 * sleeps in the kernel (HEAPHOOK_LEAK_STOP_*); called once the configuration is read. */
void hh_stop_configure(int signal, long timeout_ms);

/* Stops every other thread but the tracer's (hh_leaks_tracer_thread); threads not stopped after
 * the timeout are left running (NOT_STOPPED). With in_hook_grace_ns > 0, gives up and returns
 * false when after that long the only threads not stopped are inside a hook (the world is then
 * still to be resumed). Allocates nothing; the caller holds the check lock. */
bool hh_stop_world(uint64_t in_hook_grace_ns);
/* Deferred mode: stops the world with no thread inside a hook, resuming and retrying while a
 * thread stays in one (see stop.c); the last attempt is hh_stop_world(0). */
void hh_stop_world_outside_hooks(void);
/* Lets every stopped thread go and waits (at most 2 s) until each has left the handler. */
void hh_resume_world(void);
/* Between a stop and its resume: the slots of the threads signalled, *n of them (NULL and 0
 * when no slot memory could be mapped). Scan those STOPPED or IN_KERNEL. */
const hh_stopped *hh_stopped_threads(uint32_t *n);
/* Fork child: forgets the parent's tracer threads and any stop in progress. */
void hh_stop_fork_child(void);

/* The calling thread's thread pointer (glibc: its TCB, with static TLS below it). */
static inline uintptr_t hh_thread_pointer(void) {
#if defined(__x86_64__)
    uintptr_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    return tp;
#else
    return (uintptr_t)__builtin_thread_pointer();
#endif
}

static inline uint64_t hh_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void hh_pause_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* ---- mark.c: the check ------------------------------------------------------------------- */

/* What ran a check: HH_TRIGGER_* (format/heaplog.h), the LEAK_CHECK record's trigger field. */

/* Runs one check and logs its verdicts; returns the number of leaked blocks, or -1 (no memory
 * for the check). precise: only typed blocks, from the registered roots, with no stop of the
 * world. stack_from: the calling thread's stack from that address up is a root (0: the caller
 * is a tracer thread, whose stack is not). Takes the check lock; any thread but a stopped one. */
long hh_check(int trigger, bool precise, uintptr_t stack_from);
/* The size of the main thread's static TLS (_dl_get_tls_static_info), scanned below its thread
 * pointer; 4096 until configured. */
void hh_check_configure(size_t static_tls);
/* The leaked blocks of the last check, *n of them; valid until the next check. */
const hh_entry *hh_check_result(uint64_t *n);
/* The check lock, for fork: taken first (before tracer.h's cursor lock and the table's). */
/* The number of checks so far and the last one's totals; false (nothing written) while a check
 * runs: the caller, which must not wait for a check, asks again later. */
bool hh_check_last(uint32_t *check_no, hh_rec_leak_check *totals);
void hh_check_lock(void);
void hh_check_unlock(void);
/* Fork child: checks count from 1 again and the parent's result is forgotten. */
void hh_check_fork_child(void);

/* The table goes from the drain thread to the hooks, for good (the precise API's calls read and
 * change it as the program sees it): stops the world like a check, applies every published
 * record, then switches hh_leaks_on to HH_LEAKS_SYNC. Nothing when not deferred. */
void hh_leaks_go_sync(void);

#endif /* HH_LEAKS_INTERNAL_H */
