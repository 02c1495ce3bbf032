/*
 * init.c — the backend's life cycle and the library constructor.
 *
 * The backend is initialised exactly once, by whichever comes first: the first call of the
 * malloc family (often from the dynamic loader or libc, before any constructor runs) or the
 * library constructor. A small state machine makes this safe:
 *
 *   HH_STATE_UNINIT --(one thread wins a CAS)--> HH_STATE_INITIALISING --> HH_STATE_READY
 *
 * While INITIALISING, the winning thread's own allocations (the backend's init calling malloc,
 * dlsym calling calloc) are recognised by thread identity and served by the bootstrap arena:
 * no recursion into the half-built backend, no deadlock on a lock it holds. Any other thread
 * waits until READY (this only happens when threads exist before the library's constructor).
 *
 * Contents:
 *   1. The backend table and its defaults
 *   2. The state machine
 *   3. The library constructor and the public queries of core.h
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "heaphook/core.h"
#include "heaphook/log.h"
#include "internal.h"

/* ---- 1. The backend table and its defaults ------------------------------------------------ */

heaphook_backend hh_backend;
_Atomic bool hh_malloc_direct = false;
_Atomic bool hh_free_direct = false;

/* backend.h: "Default: alloc(size, 1) then memset." */
static void *hh_default_alloc_zeroed(size_t size) {
    void *ptr = hh_backend.alloc(size, 1);
    if (ptr != NULL) memset(ptr, 0, size);
    return ptr;
}

/* backend.h: "Default: alloc, memcpy of min(get_block_size(ptr), new_size), dealloc." */
static void *hh_default_realloc(void *ptr, size_t new_size) {
    void *moved = hh_backend.alloc(new_size, 1);
    if (moved == NULL) return NULL;
    size_t old_size = hh_backend.get_block_size(ptr);
    memcpy(moved, ptr, old_size < new_size ? old_size : new_size);
    hh_backend.dealloc(ptr);
    return moved;
}

/* Copies the backend's table, checks the required members and fills in the defaults. */
static void hh_backend_load(void) {
    const heaphook_backend *table = heaphook_backend_get();
    if (table == NULL || table->name == NULL || table->alloc == NULL || table->dealloc == NULL ||
        table->get_block_size == NULL) {
        heaphook_fatal(
            "heaphook_backend_get() returned an incomplete table: name, alloc, dealloc and "
            "get_block_size are required");
    }
    hh_backend = *table;
    if (hh_backend.alloc_zeroed == NULL) hh_backend.alloc_zeroed = hh_default_alloc_zeroed;
    if (hh_backend.realloc == NULL) hh_backend.realloc = hh_default_realloc;
}

/* ---- 2. The state machine ------------------------------------------------------------------ */

_Atomic int hh_backend_state = HH_STATE_UNINIT;
/* pthread_self() of the thread running the initialisation (0 when none). */
static _Atomic unsigned long hh_initialising_thread = 0;

/* Returns false when the backend's init answered HEAPHOOK_INIT_LATER: the state is UNINIT
 * again and the caller uses the bootstrap arena. */
static bool hh_backend_initialise(void) {
    atomic_store_explicit(&hh_initialising_thread, (unsigned long)pthread_self(),
                          memory_order_relaxed);
    hh_backend_load();
    int result = hh_backend.init != NULL ? hh_backend.init() : 0;
    if (result == HEAPHOOK_INIT_LATER) {
        atomic_store_explicit(&hh_initialising_thread, 0, memory_order_relaxed);
        atomic_store_explicit(&hh_backend_state, HH_STATE_UNINIT, memory_order_release);
        return false;
    }
    if (result != 0) {
        heaphook_fatal("backend %s refused to initialise", hh_backend.name);
    }
    atomic_store_explicit(&hh_initialising_thread, 0, memory_order_relaxed);
#ifndef HEAPHOOK_DEBUG /* a debug build checks every block alloc returns (hh_checked) */
    atomic_store_explicit(&hh_malloc_direct,
                          hh_backend.alloc_sets_errno != 0 && hh_interpose_direct_alloc_matches(),
                          memory_order_relaxed);
#endif
    /* Set, then attached looked at again (both sequentially consistent, as attach's clear is):
     * an attach racing with this init ends with the flag clear whichever runs first. */
    if (hh_backend.dealloc_keeps_errno && hh_interpose_direct_dealloc_matches()) {
        atomic_store(&hh_free_direct, true);
        if (atomic_load(&hh_attached)) atomic_store(&hh_free_direct, false);
    }
    atomic_store_explicit(&hh_backend_state, HH_STATE_READY, memory_order_release);
    heaphook_log_debug("backend %s ready (heaphook %s; bootstrap arena used %zu of %zu bytes)",
                       hh_backend.name, HEAPHOOK_VERSION, hh_bootstrap_used_bytes(),
                       hh_bootstrap_capacity());
    return true;
}

HH_NOINLINE bool hh_backend_make_ready(void) {
    for (;;) {
        int state = atomic_load_explicit(&hh_backend_state, memory_order_acquire);
        if (state == HH_STATE_READY) return true;
        if (state == HH_STATE_UNINIT) {
            int expected = HH_STATE_UNINIT;
            if (atomic_compare_exchange_strong_explicit(&hh_backend_state, &expected,
                                                        HH_STATE_INITIALISING, memory_order_acq_rel,
                                                        memory_order_acquire)) {
                return hh_backend_initialise();
            }
            continue;
        }
        /* INITIALISING: by us (a recursive call: use the arena) or by another thread. */
        if (atomic_load_explicit(&hh_initialising_thread, memory_order_relaxed) ==
            (unsigned long)pthread_self()) {
            return false;
        }
        sched_yield();
    }
}

/* ---- 3. The library constructor and the public queries ---------------------------------- */

/* Runs before the program's own constructors (priority 101 is the earliest an application
 * may use), and before main: so a bad configuration value stops the program before it
 * starts, and the report fd is taken before the program can close stderr. */
__attribute__((constructor(101))) static void hh_library_init(void) {
    hh_log_init();
    hh_backend_make_ready();
    hh_fork_register();
    hh_agent_loader_start();
}

HH_EXPORT const char *heaphook_active_backend(void) {
    if (!hh_backend_is_ready()) return "(initialising)";
    return hh_backend.name;
}

HH_EXPORT const char *heaphook_version(void) {
    return HEAPHOOK_VERSION;
}
