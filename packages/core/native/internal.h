/*
 * internal.h — what the core's files share and nobody else sees.
 *
 * Naming: public functions are heaphook_* (include/heaphook/), internal ones are hh_* and are
 * hidden (the whole core is compiled with -fvisibility=hidden; only the malloc family and
 * core.h's functions carry HH_EXPORT). Every file here is one concept:
 *
 *   interpose.c  the malloc family: glibc-compatible normalisation, then the backend
 *   stats.c      mallinfo2, mallinfo, malloc_stats, malloc_trim, mallopt, heaphook_get_stats
 *   init.c       the backend's life cycle (uninit -> initialising -> ready) and the constructor
 *   bootstrap.c  the static arena serving allocations made before the backend is ready
 *   fork.c       the library's fork module: its one pthread_atfork and the lock order
 *   config.c     environment parsing (config.h)
 *   log.c        the malloc-safe logger and the report fd (log.h)
 *   os.c         the seam for OS memory calls (os.h)
 *   attach.c     heaphook_attach: installing this library into a running process (attach.h)
 *   agent_loader.c  HEAPHOOK_AGENT: loads and starts @heaphook/agent's client at start-up
 *   reloc_object.c  GOT relocation patching of one object (reloc.h; self-contained)
 *   reloc_patch.c   the process-wide patch table and its dlopen / dlclose hooks (reloc.h)
 *   cxx_adapter.cpp  heaphook_backend_get() for a heaphook::GlobalAllocator backend
 */
#ifndef HH_INTERNAL_H
#define HH_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heaphook/backend.h"
#include "heaphook/bootstrap.h"

/* ---- Compiler helpers -------------------------------------------------------------------- */

#define HH_EXPORT __attribute__((visibility("default")))
#define HH_LIKELY(x) __builtin_expect(!!(x), 1)
#define HH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HH_NOINLINE __attribute__((noinline))
#define HH_COLD __attribute__((cold))

/* ---- Debug assertions -------------------------------------------------------------------- */
/* Built with -DHEAPHOOK_DEBUG=1 (cmake -DHEAPHOOK_DEBUG=ON) the core checks its invariants and
 * the backend's promises (alignment, usable size) and stops with one line naming the broken
 * one. In a normal build they cost nothing. */
#ifdef HEAPHOOK_DEBUG
#define hh_assert(cond) ((cond) ? (void)0 : hh_assert_fail(#cond, __FILE__, __LINE__))
#else
#define hh_assert(cond) ((void)0)
#endif
__attribute__((noreturn)) HH_COLD void hh_assert_fail(const char *cond, const char *file, int line);

/* ---- os.c and attach.c ------------------------------------------------------------------- */

/* Does ptr lie in a mapping made through heaphook_os_map*? (lock-free scan) */
bool hh_os_owns(const void *ptr);
/* Set while this library is attached to a process it was not preloaded into: frees,
 * reallocs and sizes of pointers it does not own go to the previous allocator. */
extern _Atomic bool hh_attached;
bool hh_attach_is_foreign(const void *ptr);
void hh_attach_free(void *ptr);
size_t hh_attach_usable_size(void *ptr);
void *hh_attach_realloc(void *ptr, size_t new_size);
/* Fork (fork.c's order): the attach lock, held across fork. */
void hh_attach_prefork(void);
void hh_attach_postfork_parent(void);
void hh_attach_postfork_child(void);

/* ---- Requests ---------------------------------------------------------------------------- */

/* The largest request the core passes on: as glibc, anything above PTRDIFF_MAX fails with
 * ENOMEM before reaching the backend, so a backend may add headers and round up without
 * checking for overflow. */
#define HH_MAX_REQUEST ((size_t)PTRDIFF_MAX)

static inline bool hh_is_power_of_two(size_t x) {
    return x != 0 && (x & (x - 1)) == 0;
}

static inline uintptr_t hh_align_up(uintptr_t x, size_t align) {
    return (x + (align - 1)) & ~(uintptr_t)(align - 1);
}

/* ---- The backend (init.c) ---------------------------------------------------------------- */

/* The backend's table as the core uses it: a copy of heaphook_backend_get()'s table with every
 * optional member that has a default (alloc_zeroed, realloc) filled in. Valid once
 * hh_backend_state is HH_STATE_READY. */
extern heaphook_backend hh_backend;

enum hh_backend_state_value {
    HH_STATE_UNINIT = 0,       /* nobody asked yet */
    HH_STATE_INITIALISING = 1, /* one thread is running heaphook_backend_get() and init() */
    HH_STATE_READY = 2,        /* hh_backend may be used by everyone */
};
extern _Atomic int hh_backend_state;
/* True once the backend is ready and sets errno itself when alloc fails (alloc_sets_errno):
 * malloc then calls alloc directly (interpose.c). Set before hh_backend_state turns READY,
 * never cleared. */
extern _Atomic bool hh_malloc_direct;
/* True once the backend is ready and its dealloc keeps errno (dealloc_keeps_errno), while this
 * library is not attached (hh_attached): free then jumps to dealloc after one test. Set before
 * hh_backend_state turns READY; cleared, for good, before an attach routes foreign frees. */
extern _Atomic bool hh_free_direct;

/* Whether the backend's table (hh_backend, loaded) holds the entry points interpose.c calls by
 * name on its common paths: always true, unless the library was built with a backend's DIRECT
 * entry points (heaphook_add_backend's DIRECT; interpose.c) and the table holds others (a
 * backend that wraps its calls in a mode, such as HEAPHOOK_TLSF_STATS). Only then do
 * hh_malloc_direct and hh_free_direct stay clear, and every call go through the table. */
bool hh_interpose_direct_alloc_matches(void);
bool hh_interpose_direct_dealloc_matches(void);

/* Makes the backend ready if it is not. Returns true when the caller may use hh_backend, and
 * false when the caller is the thread initialising the backend (a recursive call from
 * heaphook_backend_get(), init() or what they call) or when init() answered
 * HEAPHOOK_INIT_LATER: it must use the bootstrap arena. Other
 * threads wait for the initialisation to finish. */
bool hh_backend_make_ready(void);

static inline bool hh_backend_is_ready(void) {
    return HH_LIKELY(atomic_load_explicit(&hh_backend_state, memory_order_acquire) ==
                     HH_STATE_READY) ||
           hh_backend_make_ready();
}

/* ---- The bootstrap arena (bootstrap.c; its contract: heaphook/bootstrap.h) ----------------- */

/* heaphook_bootstrap_alloc, but a request the arena cannot serve stops the program: a backend
 * that allocates that much before it is ready is broken, not short of memory. */
void *hh_bootstrap_alloc(size_t size, size_t align);
#define hh_bootstrap_owns heaphook_bootstrap_owns
#define hh_bootstrap_block_size heaphook_bootstrap_block_size
#define hh_bootstrap_used_bytes heaphook_bootstrap_used_bytes
#define hh_bootstrap_capacity() ((size_t)HEAPHOOK_BOOTSTRAP_CAPACITY)

/* ---- Fork (fork.c) ------------------------------------------------------------------------ */

/* Registers the library's pthread_atfork handlers (once; the lock order is fork.c's). */
void hh_fork_register(void);

/* ---- The agent's client (agent_loader.c) ------------------------------------------------- */

/* With HEAPHOOK_AGENT set, loads libheaphook_agent.so and starts it (a bad value or a missing
 * client stops the program); unset, returns at once. Called by the constructor once the
 * backend is ready. */
void hh_agent_loader_start(void);

/* ---- Logging (log.c) ----------------------------------------------------------------------- */

/* Takes the report fd and reads HEAPHOOK_LOG_FILE / HEAPHOOK_LOG_LEVEL (once; later calls
 * return at once). Called from the constructor and lazily by anything that logs first. */
void hh_log_init(void);
/* True when the report fd is a HEAPHOOK_LOG_FILE rather than a duplicate of stderr. */
bool hh_log_is_file(void);

#endif /* HH_INTERNAL_H */
