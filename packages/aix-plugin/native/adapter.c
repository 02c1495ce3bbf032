/*
 * adapter.c — the AIX malloc plug-in entry points over any heaphook C backend.
 *
 * Linked into the plug-in module (mem64.o / mem32.o) together with one backend that defines
 * heaphook_backend_get() (heaphook/backend.h), e.g. TLSF's tlsf_backend.c, and the core's
 * allocation-free helpers (config.c, log.c, os.c). There is no heaphook core interposition in
 * the module: AIX's libc (or the Linux emulation) calls the entry points directly, so this file
 * does what the core's interpose.c does for a preload library:
 *
 *   - self-initialisation: the first call of any entry point initialises the backend (AIX calls
 *     __malloc__ long before __malloc_init__). Until __malloc_init__ the process has one thread,
 *     so a call that arrives while the backend initialises is a recursive one (the backend's init
 *     allocating) and is served from a small static arena; once threaded, other threads wait;
 *   - argument normalisation (size 0, calloc overflow, invalid alignment) with errno set as the
 *     C library would;
 *   - __mallinfo__ from the backend's statistics; __mallopt__ mapped where a command has a
 *     meaning for a heaphook backend (M_DISCLAIM: trim, M_MALIGN: the default alignment, the
 *     backend's own commands: its mallopt) and refused with AIX's non-zero otherwise (M_MXFAST,
 *     M_NLBLKS, M_GRAIN, M_KEEP tune the AIX 3.1 allocator's small-block lists);
 *   - the fork pair: prefork takes every backend lock (fork_prepare); postfork releases them,
 *     telling the parent (fork_parent) from the child (fork_child, which re-initialises) by pid;
 *   - with HEAPHOOK_AIX_SERIALIZE (CMake: heaphook_aix_add_plugin(... SERIALIZE)), for a backend
 *     that is not thread safe, the AIX framework's thread switch: until __malloc_init__ the
 *     process has one thread and nothing is locked; __malloc_init__ creates the subsystem's
 *     recursive mutex and turns it on, and from then on every entry point runs under it. It is
 *     recursive because a thread inside the backend may come back (a user callback that
 *     allocates, a backend calling malloc); the fork pair holds it across fork (the forking
 *     thread may still allocate in between) and the child creates it anew.
 *
 * Rules: no stdio, no allocation, no C++; no lock but the subsystem mutex of a SERIALIZE build.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "aix_malloc.h"
#include "heaphook/backend.h"
#include "heaphook/log.h"

#define AIX_EXPORT __attribute__((visibility("default")))

static const heaphook_backend *backend;

enum { UNINIT = 0, INITIALISING = 1, READY = 2 };
static _Atomic int state = UNINIT;
/* Set by __malloc_init__: from then on other threads may call in. */
static _Atomic int threaded = 0;
static pid_t fork_pid;
/* M_MALIGN: the alignment of __malloc__, __calloc__ and __realloc__ blocks (1: the default). */
static _Atomic size_t default_align = 1;

/* ---- The thread switch and the subsystem lock (HEAPHOOK_AIX_SERIALIZE) ------------------ */

#ifdef HEAPHOOK_AIX_SERIALIZE
static pthread_mutex_t subsystem_lock;
static int fork_locked; /* prefork took the lock: postfork gives it back */

/* A recursive mutex (pthread_mutex_init allocates nothing). */
static void subsystem_lock_create(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&subsystem_lock, &attr);
    pthread_mutexattr_destroy(&attr);
}

/* Returns 1 when the lock was taken (the process is threaded), for subsystem_leave. */
static int subsystem_enter(void) {
    if (!atomic_load_explicit(&threaded, memory_order_acquire)) return 0;
    pthread_mutex_lock(&subsystem_lock);
    return 1;
}

static void subsystem_leave(int locked) {
    if (!locked) return;
    int saved = errno; /* the entry point's errno is the caller's */
    pthread_mutex_unlock(&subsystem_lock);
    errno = saved;
}
#else
static void subsystem_lock_create(void) {}
static int subsystem_enter(void) {
    return 0;
}
static void subsystem_leave(int locked) {
    (void)locked;
}
#endif

/* ---- The arena for recursive calls made while the backend initialises ------------------- */

#define ARENA_SIZE (64 * 1024)
static unsigned char arena[ARENA_SIZE] __attribute__((aligned(16)));
static _Atomic size_t arena_used = 0;

static int in_arena(const void *ptr) {
    return (const unsigned char *)ptr >= arena && (const unsigned char *)ptr < arena + ARENA_SIZE;
}

static void *arena_alloc(size_t size, size_t align) {
    if (align < 16) align = 16;
    if (size > ARENA_SIZE) return NULL;
    size_t used = atomic_load(&arena_used);
    for (;;) {
        size_t start = (used + sizeof(size_t) + align - 1) & ~(align - 1);
        size_t end = start + ((size + 15) & ~(size_t)15);
        if (end > ARENA_SIZE) return NULL;
        if (atomic_compare_exchange_weak(&arena_used, &used, end)) {
            memcpy(arena + start - sizeof(size_t), &size, sizeof size);
            return arena + start; /* static memory: already zero, never reused */
        }
    }
}

static size_t arena_block_size(const void *ptr) {
    size_t size;
    memcpy(&size, (const unsigned char *)ptr - sizeof(size_t), sizeof size);
    return size;
}

/* ---- Life cycle ----------------------------------------------------------------------------- */

/* Returns 1 when the backend may be used, 0 when the caller must use the arena. */
static int ready(void) {
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == READY) return 1;
    for (;;) {
        if (s == UNINIT) {
            int expected = UNINIT;
            if (atomic_compare_exchange_strong(&state, &expected, INITIALISING)) {
                const heaphook_backend *table = heaphook_backend_get();
                if (table == NULL || table->alloc == NULL || table->dealloc == NULL ||
                    table->get_block_size == NULL) {
                    heaphook_fatal("aix plug-in: the backend's table is incomplete");
                }
                if (table->init != NULL && table->init() != 0) {
                    heaphook_fatal("aix plug-in: backend %s refused to initialise", table->name);
                }
                backend = table;
                atomic_store_explicit(&state, READY, memory_order_release);
                heaphook_log_debug(
                    "aix plug-in: backend %s ready (%zu bytes of the plug-in's "
                    "arena used while it initialised)",
                    table->name, atomic_load(&arena_used));
                return 1;
            }
            s = expected;
            continue;
        }
        if (s == READY) return 1;
        /* INITIALISING. Single-threaded (before __malloc_init__): it is our own recursion. */
        if (!atomic_load_explicit(&threaded, memory_order_acquire)) return 0;
        sched_yield();
        s = atomic_load_explicit(&state, memory_order_acquire);
    }
}

/* ---- Entry points --------------------------------------------------------------------------- */

static void *fail(int error) {
    errno = error;
    return NULL;
}

static void *plugin_malloc(size_t size) {
    if (size == 0) size = 1;
    if (size > (size_t)PTRDIFF_MAX) return fail(ENOMEM);
    if (!ready()) {
        void *p = arena_alloc(size, 1);
        return p ? p : fail(ENOMEM);
    }
    void *p = backend->alloc(size, atomic_load_explicit(&default_align, memory_order_relaxed));
    return p ? p : fail(ENOMEM);
}

static void plugin_free(void *ptr) {
    if (ptr == NULL || in_arena(ptr)) return;
    int saved = errno;
    backend->dealloc(ptr);
    errno = saved;
}

static void *plugin_realloc(void *ptr, size_t size) {
    if (ptr == NULL) return plugin_malloc(size);
    if (size == 0) {
        plugin_free(ptr);
        return NULL;
    }
    if (size > (size_t)PTRDIFF_MAX) return fail(ENOMEM);
    if (in_arena(ptr)) {
        void *moved = plugin_malloc(size);
        if (moved == NULL) return NULL;
        size_t old = arena_block_size(ptr);
        memcpy(moved, ptr, old < size ? old : size);
        return moved;
    }
    void *moved;
    size_t align = atomic_load_explicit(&default_align, memory_order_relaxed);
    if (backend->realloc != NULL && align == 1) {
        moved = backend->realloc(ptr, size);
    } else { /* M_MALIGN: a backend's realloc keeps only the default alignment */
        moved = backend->alloc(size, align);
        if (moved != NULL) {
            size_t old = backend->get_block_size(ptr);
            memcpy(moved, ptr, old < size ? old : size);
            backend->dealloc(ptr);
        }
    }
    return moved ? moved : fail(ENOMEM);
}

static void *plugin_calloc(size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total) || total > (size_t)PTRDIFF_MAX) {
        return fail(ENOMEM);
    }
    if (total == 0) total = 1;
    if (!ready()) {
        void *p = arena_alloc(total, 1);
        return p ? p : fail(ENOMEM);
    }
    void *p;
    size_t align = atomic_load_explicit(&default_align, memory_order_relaxed);
    if (backend->alloc_zeroed != NULL && align == 1) {
        p = backend->alloc_zeroed(total);
    } else {
        p = backend->alloc(total, align);
        if (p != NULL) memset(p, 0, total);
    }
    return p ? p : fail(ENOMEM);
}

static int plugin_posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment % sizeof(void *) != 0) {
        return EINVAL;
    }
    if (size == 0) size = 1;
    if (size > (size_t)PTRDIFF_MAX || alignment > (size_t)PTRDIFF_MAX) return ENOMEM;
    if (alignment <= HEAPHOOK_DEFAULT_ALIGNMENT) alignment = 1;
    void *p;
    if (!ready()) {
        p = arena_alloc(size, alignment);
    } else {
        int saved = errno;
        p = backend->alloc(size, alignment);
        errno = saved;
    }
    if (p == NULL) return ENOMEM;
    *result = p;
    return 0;
}

static int saturate(size_t value) {
    return value > (size_t)INT_MAX ? INT_MAX : (int)value;
}

/* The backend's statistics in the platform's struct mallinfo (heaphook's mapping, as the core
 * uses for mallinfo). Fields it does not keep, and all of them for a backend without
 * statistics, are 0. */
static struct mallinfo plugin_mallinfo(void) {
    struct mallinfo info;
    memset(&info, 0, sizeof info);
    heaphook_stats s;
    memset(&s, 0, sizeof s);
    if (ready() && backend->get_stats != NULL && backend->get_stats(&s) == 0) {
        info.arena = saturate(s.pool_bytes);
        info.ordblks = saturate(s.free_blocks);
        info.hblks = saturate(s.mmapped_blocks);
        info.hblkhd = saturate(s.mmapped_bytes);
        info.uordblks = saturate(s.used_bytes);
        info.fordblks = saturate(s.free_bytes);
        info.keepcost = saturate(s.largest_free_block);
    }
    return info;
}

/* AIX (SVID) mallopt returns 0 when the command was accepted and non-zero otherwise; a
 * heaphook backend's mallopt returns 1 when accepted (glibc's convention). */
static int plugin_mallopt(int command, int value) {
    if (!ready()) return AIX_MALLOPT_REFUSED;
    switch (command) {
        case M_MXFAST:
        case M_NLBLKS:
        case M_GRAIN:
        case M_KEEP:
            /* the AIX 3.1 allocator's small-block lists: no heaphook backend has them */
            return AIX_MALLOPT_REFUSED;
        case M_DISCLAIM: /* give free memory back to the system: the backend's trim */
            if (backend->trim == NULL) return AIX_MALLOPT_REFUSED;
            backend->trim(0);
            return AIX_MALLOPT_ACCEPTED;
        case M_MALIGN: { /* a power of two, a multiple of a pointer: every later block so aligned */
            size_t align = value > 0 ? (size_t)value : 0;
            if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *) != 0 ||
                align > (size_t)1 << 30)
                return AIX_MALLOPT_REFUSED;
            atomic_store_explicit(&default_align, align <= HEAPHOOK_DEFAULT_ALIGNMENT ? 1 : align,
                                  memory_order_relaxed);
            return AIX_MALLOPT_ACCEPTED;
        }
        default: /* the backend's own commands (glibc's numbering), when it has any */
            if (backend->mallopt == NULL) return AIX_MALLOPT_REFUSED;
            return backend->mallopt(command, value) ? AIX_MALLOPT_ACCEPTED : AIX_MALLOPT_REFUSED;
    }
}

/* HEAPHOOK_AIX_LAZY_START (a test build): start leaves the initialisation to the first
 * allocation, as for a plug-in without __malloc_start__. */
AIX_EXPORT void __malloc_start__(void) {
#ifndef HEAPHOOK_AIX_LAZY_START
    ready();
#endif
}

AIX_EXPORT void __malloc_init__(void) {
    /* Initialise now, while there is still one thread, then let other threads in: the switch
     * turns the subsystem lock on (a SERIALIZE build), once. */
    if (atomic_load_explicit(&threaded, memory_order_acquire)) return;
    ready();
    subsystem_lock_create();
    atomic_store_explicit(&threaded, 1, memory_order_release);
}

AIX_EXPORT void __malloc_prefork_lock__(void) {
    if (!ready()) return;
#ifdef HEAPHOOK_AIX_SERIALIZE
    fork_locked = subsystem_enter(); /* no other thread is inside the backend at the fork */
#endif
    fork_pid = getpid();
    if (backend->fork_prepare != NULL) backend->fork_prepare();
}

AIX_EXPORT void __malloc_postfork_unlock__(void) {
    if (atomic_load_explicit(&state, memory_order_acquire) != READY) return;
    if (getpid() != fork_pid) {
        if (backend->fork_child != NULL) backend->fork_child();
#ifdef HEAPHOOK_AIX_SERIALIZE
        /* the child's one thread held it at the fork: a new mutex, as the article's child does */
        if (fork_locked) subsystem_lock_create();
#endif
    } else {
        if (backend->fork_parent != NULL) backend->fork_parent();
#ifdef HEAPHOOK_AIX_SERIALIZE
        subsystem_leave(fork_locked);
#endif
    }
#ifdef HEAPHOOK_AIX_SERIALIZE
    fork_locked = 0;
#endif
}

/* ---- The allocation entry points: the plug-in's calls under the thread switch ------------ */

AIX_EXPORT void *__malloc__(size_t size) {
    int locked = subsystem_enter();
    void *result_ = plugin_malloc(size);
    subsystem_leave(locked);
    return result_;
}

AIX_EXPORT void __free__(void *ptr) {
    int locked = subsystem_enter();
    plugin_free(ptr);
    subsystem_leave(locked);
}

AIX_EXPORT void *__realloc__(void *ptr, size_t size) {
    int locked = subsystem_enter();
    void *result_ = plugin_realloc(ptr, size);
    subsystem_leave(locked);
    return result_;
}

AIX_EXPORT void *__calloc__(size_t count, size_t size) {
    int locked = subsystem_enter();
    void *result_ = plugin_calloc(count, size);
    subsystem_leave(locked);
    return result_;
}

AIX_EXPORT int __posix_memalign__(void **result, size_t alignment, size_t size) {
    int locked = subsystem_enter();
    int result_ = plugin_posix_memalign(result, alignment, size);
    subsystem_leave(locked);
    return result_;
}

AIX_EXPORT struct mallinfo __mallinfo__(void) {
    int locked = subsystem_enter();
    struct mallinfo result_ = plugin_mallinfo();
    subsystem_leave(locked);
    return result_;
}

AIX_EXPORT int __mallopt__(int command, int value) {
    int locked = subsystem_enter();
    int result_ = plugin_mallopt(command, value);
    subsystem_leave(locked);
    return result_;
}
