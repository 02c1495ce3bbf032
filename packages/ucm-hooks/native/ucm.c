/*
 * ucm.c — memory events (heaphook/ucm.h): the hooks of mmap, munmap, mremap, shmat, shmdt,
 * sbrk, brk and madvise, the handler chain, installation (preload or GOT patching) and the
 * self-test.
 *
 * The real calls are system calls (syscall(2)) for mmap, munmap, mremap, madvise, shmat and
 * shmdt: no symbol lookup inside a hook, and the same in both install modes. sbrk and brk go
 * to the C library's functions (found with dlsym at load), because glibc keeps the current
 * break in a variable its own malloc uses.
 *
 * Handlers: a fixed array sorted by priority, read under a writer-preferring rwlock, written
 * under the same lock taken for writing. Writer preference matters: with threads mapping
 * memory back to back, the read side is almost never free, and a reader-preferring lock
 * starves set/unset_event_handler forever. A thread never takes the read side twice (the
 * per-thread depth guard in ucm_enter turns hooks inside handlers into plain calls), so a
 * waiting writer cannot deadlock a reader against itself. A handler must not set or unset
 * handlers (libucm forbids it too): it holds the read side. pthread_atfork takes it for writing
 * before fork, so the child never inherits a lock held by a thread that does not exist there.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/log.h"
#include "heaphook/reloc.h"
#include "heaphook/ucm.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

/* ---- Logging (HEAPHOOK_MEM_LOG_LEVEL) ------------------------------------------------------ */

static int ucm_log_level = 1; /* error 0, warn 1, info 2, debug 3, trace 4 */

static void ucm_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ucm_log(int level, const char *fmt, ...) {
    if (level > ucm_log_level) return;
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    char line[512];
    size_t n =
        heaphook_formatf(line, sizeof line, "heaphook-ucm[%d] %s: ", (int)getpid(), names[level]);
    va_list args;
    va_start(args, fmt);
    n += heaphook_format(line + n, sizeof line - n - 1, fmt, args);
    va_end(args);
    line[n++] = '\n';
    heaphook_write_all(2, line, n);
}

/* ---- The real calls ------------------------------------------------------------------------ */

static void *(*ucm_real_sbrk)(intptr_t);
static int (*ucm_real_brk)(void *);

EXPORT void *heaphook_ucm_orig_mmap(void *addr, size_t length, int prot, int flags, int fd,
                                    off_t offset) {
    return (void *)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
}
EXPORT int heaphook_ucm_orig_munmap(void *addr, size_t length) {
    return (int)syscall(SYS_munmap, addr, length);
}
EXPORT void *heaphook_ucm_orig_mremap(void *old, size_t old_size, size_t new_size, int flags,
                                      void *new_addr) {
    return (void *)syscall(SYS_mremap, old, old_size, new_size, flags, new_addr);
}
EXPORT int heaphook_ucm_orig_madvise(void *addr, size_t length, int advice) {
    return (int)syscall(SYS_madvise, addr, length, advice);
}
EXPORT void *heaphook_ucm_orig_shmat(int shmid, const void *shmaddr, int shmflg) {
    return (void *)syscall(SYS_shmat, shmid, shmaddr, shmflg);
}
EXPORT int heaphook_ucm_orig_shmdt(const void *shmaddr) {
    return (int)syscall(SYS_shmdt, shmaddr);
}
static void ucm_resolve_brk(void);
EXPORT void *heaphook_ucm_orig_sbrk(intptr_t increment) {
    if (ucm_real_sbrk == NULL) ucm_resolve_brk();
    return ucm_real_sbrk(increment);
}
EXPORT int heaphook_ucm_orig_brk(void *addr) {
    if (ucm_real_brk == NULL) ucm_resolve_brk();
    return ucm_real_brk(addr);
}

/* ---- Handlers ------------------------------------------------------------------------------ */

#define UCM_MAX_HANDLERS 64

struct ucm_handler {
    int events;
    int priority;
    heaphook_ucm_event_callback_t callback;
    void *arg;
};

static pthread_rwlock_t ucm_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static struct ucm_handler ucm_handlers[UCM_MAX_HANDLERS];
static int ucm_handler_count;
static _Atomic int ucm_active_events; /* union of the handlers' masks: the fast path */
static __thread int ucm_depth __attribute__((tls_model("initial-exec")));
/* Self-test: events seen by the thread running it. */
static __thread int ucm_test_seen __attribute__((tls_model("initial-exec")));
static __thread int ucm_testing __attribute__((tls_model("initial-exec")));

static void ucm_fork_prepare(void) {
    pthread_rwlock_wrlock(&ucm_lock);
}
static void ucm_fork_parent(void) {
    pthread_rwlock_unlock(&ucm_lock);
}
static void ucm_fork_child(void) {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&ucm_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
}

/* Calls the handlers of type with priority in [low, high]. Lock held for reading. */
static void ucm_call(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event, long low,
                     long high) {
    for (int i = 0; i < ucm_handler_count; ++i) {
        struct ucm_handler *h = &ucm_handlers[i];
        if ((h->events & type) && h->priority >= low && h->priority <= high) {
            h->callback(type, event, h->arg);
        }
    }
}

/* Is any event dispatched on this call? Returns false inside handlers (no recursion). */
static bool ucm_enter(void) {
    if (ucm_depth > 0) return false;
    if (atomic_load_explicit(&ucm_active_events, memory_order_relaxed) == 0 && !ucm_testing) {
        return false;
    }
    ++ucm_depth;
    pthread_rwlock_rdlock(&ucm_lock);
    return true;
}
static void ucm_leave(void) {
    pthread_rwlock_unlock(&ucm_lock);
    --ucm_depth;
}

static void ucm_vm(heaphook_ucm_event_type_t type, void *address, size_t size) {
    if (size == 0) return;
    if (ucm_testing) ucm_test_seen |= type;
    heaphook_ucm_event_t event = {.vm_mapped = {.address = address, .size = size}};
    ucm_call(type, &event, INT32_MIN, INT32_MAX);
}

/* The chain of a native event: handlers < 0, the real call (unless the result is set),
 * handlers >= 0. */
#define UCM_CHAIN(type, event, unset_test, real_call) \
    do {                                              \
        if (ucm_testing) ucm_test_seen |= (type);     \
        ucm_call((type), (event), INT32_MIN, -1);     \
        if (unset_test) {                             \
            real_call;                                \
        }                                             \
        int saved_errno_ = errno;                     \
        ucm_call((type), (event), 0, INT32_MAX);      \
        errno = saved_errno_;                         \
    } while (0)

static size_t ucm_page(void) {
    static size_t page;
    if (page == 0) page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}
static size_t ucm_page_round(size_t size) {
    return (size + ucm_page() - 1) & ~(ucm_page() - 1);
}

/* ---- The hooks ----------------------------------------------------------------------------- */

EXPORT void *heaphook_ucm_mmap(void *addr, size_t length, int prot, int flags, int fd,
                               off_t offset) {
    if (!ucm_enter()) return heaphook_ucm_orig_mmap(addr, length, prot, flags, fd, offset);
    if (flags & MAP_FIXED) ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, addr, ucm_page_round(length));
    heaphook_ucm_event_t event = {.mmap = {.result = MAP_FAILED,
                                           .address = addr,
                                           .size = length,
                                           .prot = prot,
                                           .flags = flags,
                                           .fd = fd,
                                           .offset = offset}};
    UCM_CHAIN(HEAPHOOK_UCM_EVENT_MMAP, &event, event.mmap.result == MAP_FAILED,
              event.mmap.result =
                  heaphook_ucm_orig_mmap(event.mmap.address, event.mmap.size, event.mmap.prot,
                                         event.mmap.flags, event.mmap.fd, event.mmap.offset));
    int saved = errno;
    if (event.mmap.result != MAP_FAILED) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_MAPPED, event.mmap.result, ucm_page_round(event.mmap.size));
    }
    ucm_leave();
    errno = saved;
    return event.mmap.result;
}

EXPORT int heaphook_ucm_munmap(void *addr, size_t length) {
    if (!ucm_enter()) return heaphook_ucm_orig_munmap(addr, length);
    ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, addr, ucm_page_round(length));
    heaphook_ucm_event_t event = {.munmap = {.result = -1, .address = addr, .size = length}};
    UCM_CHAIN(
        HEAPHOOK_UCM_EVENT_MUNMAP, &event, event.munmap.result == -1,
        event.munmap.result = heaphook_ucm_orig_munmap(event.munmap.address, event.munmap.size));
    int saved = errno;
    ucm_leave();
    errno = saved;
    return event.munmap.result;
}

static void *ucm_mremap_impl(void *old, size_t old_size, size_t new_size, int flags,
                             void *new_address) {
    if (!(flags & MREMAP_FIXED)) new_address = NULL;
    if (!ucm_enter()) return heaphook_ucm_orig_mremap(old, old_size, new_size, flags, new_address);
    ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, old, ucm_page_round(old_size));
    if (flags & MREMAP_FIXED) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, new_address, ucm_page_round(new_size));
    }
    heaphook_ucm_event_t event = {.mremap = {.result = MAP_FAILED,
                                             .address = old,
                                             .old_size = old_size,
                                             .new_size = new_size,
                                             .flags = flags,
                                             .new_address = new_address}};
    UCM_CHAIN(HEAPHOOK_UCM_EVENT_MREMAP, &event, event.mremap.result == MAP_FAILED,
              event.mremap.result = heaphook_ucm_orig_mremap(
                  event.mremap.address, event.mremap.old_size, event.mremap.new_size,
                  event.mremap.flags, event.mremap.new_address));
    int saved = errno;
    if (event.mremap.result != MAP_FAILED) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_MAPPED, event.mremap.result,
               ucm_page_round(event.mremap.new_size));
    }
    ucm_leave();
    errno = saved;
    return event.mremap.result;
}

static size_t ucm_shm_size(int shmid) {
    struct shmid_ds ds;
    if (syscall(SYS_shmctl, shmid, IPC_STAT, &ds) != 0) return 0;
    return ucm_page_round(ds.shm_segsz);
}

/* The size of the mapping starting at address, from /proc/self/maps (no allocation). */
static size_t ucm_mapping_size(const void *address) {
    int fd = (int)syscall(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096];
    size_t have = 0, size = 0;
    bool done = false;
    while (!done) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0) break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf;
        char *newline;
        while ((newline = strchr(line, '\n')) != NULL) {
            *newline = '\0';
            char *end;
            unsigned long start = strtoul(line, &end, 16);
            if (*end == '-' && start == (uintptr_t)address) {
                size = strtoul(end + 1, NULL, 16) - start;
                done = true;
                break;
            }
            line = newline + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    close(fd);
    return size;
}

/* ---- Attached segments: (address, size) recorded by shmat, read by shmdt ------------------
 *
 * A fixed open-addressing table (linear probing), lock-free: a slot's key goes empty ->
 * reserved (CAS, by the one inserting thread) -> address (release, after the size is written)
 * -> tombstone (CAS, by the one detaching thread, after it read the size). No allocation, no
 * lock, so nothing to take around fork (the child inherits the table with the attachments).
 * shmdt falls back to /proc/self/maps for addresses not in the table: segments attached
 * before the hooks were installed, while no handler was set, from inside a handler, or when
 * the table was full. */

#define UCM_SHM_SLOTS 1024 /* power of two */
#define UCM_SHM_EMPTY ((uintptr_t)0)
#define UCM_SHM_RESERVED ((uintptr_t)1)
#define UCM_SHM_TOMBSTONE ((uintptr_t)2)

static struct {
    _Atomic uintptr_t key;
    size_t size;
} ucm_shm_table[UCM_SHM_SLOTS];
static _Atomic int ucm_shm_live; /* entries present (approximate while inserts run) */

static size_t ucm_shm_hash(uintptr_t address) {
    uint64_t h = (uint64_t)address >> 12;
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 40) & (UCM_SHM_SLOTS - 1);
}

/* Removes the entry of address; returns its size, or 0 when absent. */
static size_t ucm_shm_forget(const void *address) {
    uintptr_t key = (uintptr_t)address;
    if (key <= UCM_SHM_TOMBSTONE) return 0;
    if (atomic_load_explicit(&ucm_shm_live, memory_order_acquire) == 0) return 0;
    size_t i = ucm_shm_hash(key);
    for (size_t n = 0; n < UCM_SHM_SLOTS; ++n, i = (i + 1) & (UCM_SHM_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&ucm_shm_table[i].key, memory_order_acquire);
        if (k == UCM_SHM_EMPTY) return 0;
        if (k != key) continue;
        size_t size = ucm_shm_table[i].size;
        if (atomic_compare_exchange_strong_explicit(&ucm_shm_table[i].key, &k, UCM_SHM_TOMBSTONE,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            atomic_fetch_sub_explicit(&ucm_shm_live, 1, memory_order_relaxed);
            return size;
        }
        return 0; /* another thread detached the same address at the same time */
    }
    return 0;
}

/* Records (address, size), replacing a stale entry of the same address. */
static void ucm_shm_remember(const void *address, size_t size) {
    uintptr_t key = (uintptr_t)address;
    if (key <= UCM_SHM_TOMBSTONE || size == 0) return;
    ucm_shm_forget(address);
    size_t i = ucm_shm_hash(key);
    for (size_t n = 0; n < UCM_SHM_SLOTS; ++n, i = (i + 1) & (UCM_SHM_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&ucm_shm_table[i].key, memory_order_relaxed);
        if (k != UCM_SHM_EMPTY && k != UCM_SHM_TOMBSTONE) continue;
        if (!atomic_compare_exchange_strong_explicit(&ucm_shm_table[i].key, &k, UCM_SHM_RESERVED,
                                                     memory_order_acquire, memory_order_relaxed)) {
            continue;
        }
        ucm_shm_table[i].size = size;
        atomic_fetch_add_explicit(&ucm_shm_live, 1, memory_order_relaxed);
        atomic_store_explicit(&ucm_shm_table[i].key, key, memory_order_release);
        return;
    }
    /* Full: shmdt of this address will read /proc/self/maps. */
}

EXPORT void *heaphook_ucm_shmat(int shmid, const void *shmaddr, int shmflg) {
    if (!ucm_enter()) {
        void *result = heaphook_ucm_orig_shmat(shmid, shmaddr, shmflg);
        if (result != (void *)-1) {
            int saved = errno;
            ucm_shm_forget(result); /* a recorded entry there is stale */
            errno = saved;
        }
        return result;
    }
    size_t size = ucm_shm_size(shmid);
    if (shmaddr != NULL && (shmflg & SHM_REMAP)) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, (void *)shmaddr, size);
    }
    heaphook_ucm_event_t event = {
        .shmat = {.result = (void *)-1, .shmid = shmid, .shmaddr = shmaddr, .shmflg = shmflg}};
    UCM_CHAIN(HEAPHOOK_UCM_EVENT_SHMAT, &event, event.shmat.result == (void *)-1,
              event.shmat.result = heaphook_ucm_orig_shmat(event.shmat.shmid, event.shmat.shmaddr,
                                                           event.shmat.shmflg));
    int saved = errno;
    if (event.shmat.result != (void *)-1) {
        if (event.shmat.shmid != shmid) size = ucm_shm_size(event.shmat.shmid);
        ucm_shm_remember(event.shmat.result, size);
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_MAPPED, event.shmat.result, size);
    }
    ucm_leave();
    errno = saved;
    return event.shmat.result;
}

EXPORT int heaphook_ucm_shmdt(const void *shmaddr) {
    if (!ucm_enter()) {
        int result = heaphook_ucm_orig_shmdt(shmaddr);
        int saved = errno;
        ucm_shm_forget(shmaddr);
        errno = saved;
        return result;
    }
    size_t size = ucm_shm_forget(shmaddr);
    if (size == 0) size = ucm_mapping_size(shmaddr);
    ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, (void *)shmaddr, size);
    heaphook_ucm_event_t event = {.shmdt = {.result = -1, .shmaddr = shmaddr}};
    UCM_CHAIN(HEAPHOOK_UCM_EVENT_SHMDT, &event, event.shmdt.result == -1,
              event.shmdt.result = heaphook_ucm_orig_shmdt(event.shmdt.shmaddr));
    int saved = errno;
    ucm_leave();
    errno = saved;
    return event.shmdt.result;
}

EXPORT void *heaphook_ucm_sbrk(intptr_t increment) {
    if (!ucm_enter()) return heaphook_ucm_orig_sbrk(increment);
    if (increment < 0) {
        char *current = heaphook_ucm_orig_sbrk(0);
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, current + increment, (size_t)-increment);
    }
    heaphook_ucm_event_t event = {.sbrk = {.result = (void *)-1, .increment = increment}};
    UCM_CHAIN(HEAPHOOK_UCM_EVENT_SBRK, &event, event.sbrk.result == (void *)-1,
              event.sbrk.result = heaphook_ucm_orig_sbrk(event.sbrk.increment));
    int saved = errno;
    if (event.sbrk.result != (void *)-1 && event.sbrk.increment > 0) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_MAPPED, event.sbrk.result, (size_t)event.sbrk.increment);
    }
    ucm_leave();
    errno = saved;
    return event.sbrk.result;
}

EXPORT int heaphook_ucm_brk(void *addr) {
    if (!ucm_enter()) return heaphook_ucm_orig_brk(addr);
    char *before = heaphook_ucm_orig_sbrk(0);
    if ((char *)addr < before) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, addr, (size_t)(before - (char *)addr));
    }
    heaphook_ucm_event_t event = {.brk = {.result = -1, .addr = addr}};
    UCM_CHAIN(HEAPHOOK_UCM_EVENT_BRK, &event, event.brk.result == -1,
              event.brk.result = heaphook_ucm_orig_brk(event.brk.addr));
    int saved = errno;
    if (event.brk.result == 0 && (char *)event.brk.addr > before) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_MAPPED, before, (size_t)((char *)event.brk.addr - before));
    }
    ucm_leave();
    errno = saved;
    return event.brk.result;
}

EXPORT int heaphook_ucm_madvise(void *addr, size_t length, int advice) {
    if (!ucm_enter()) return heaphook_ucm_orig_madvise(addr, length, advice);
    if (advice == MADV_DONTNEED || advice == MADV_REMOVE || advice == MADV_FREE) {
        ucm_vm(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, addr, ucm_page_round(length));
    }
    heaphook_ucm_event_t event = {
        .madvise = {.result = -1, .addr = addr, .length = length, .advice = advice}};
    UCM_CHAIN(HEAPHOOK_UCM_EVENT_MADVISE, &event, event.madvise.result == -1,
              event.madvise.result = heaphook_ucm_orig_madvise(
                  event.madvise.addr, event.madvise.length, event.madvise.advice));
    int saved = errno;
    ucm_leave();
    errno = saved;
    return event.madvise.result;
}

/* The C library's names: what a preloaded libheaphook_ucm.so interposes. */
static void *ucm_hook_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
    return heaphook_ucm_mmap(addr, length, prot, flags, fd, offset);
}
static int ucm_hook_munmap(void *addr, size_t length) {
    return heaphook_ucm_munmap(addr, length);
}
static void *ucm_hook_mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
    void *new_address = NULL;
    if (flags & MREMAP_FIXED) {
        va_list args;
        va_start(args, flags);
        new_address = va_arg(args, void *);
        va_end(args);
    }
    return ucm_mremap_impl(old, old_size, new_size, flags, new_address);
}
static void *ucm_hook_shmat(int shmid, const void *shmaddr, int shmflg) {
    return heaphook_ucm_shmat(shmid, shmaddr, shmflg);
}
static int ucm_hook_shmdt(const void *shmaddr) {
    return heaphook_ucm_shmdt(shmaddr);
}
static void *ucm_hook_sbrk(intptr_t increment) {
    return heaphook_ucm_sbrk(increment);
}
static int ucm_hook_brk(void *addr) {
    return heaphook_ucm_brk(addr);
}
static int ucm_hook_madvise(void *addr, size_t length, int advice) {
    return heaphook_ucm_madvise(addr, length, advice);
}

/* Exported under the C library's names, as aliases: the addresses this file takes are the
 * local functions, not whatever the process binds "mmap" to. */
#define UCM_ALIAS(name, hook) EXPORT __typeof__(hook) name __attribute__((alias(#hook)))
UCM_ALIAS(mmap, ucm_hook_mmap);
UCM_ALIAS(mmap64, ucm_hook_mmap);
UCM_ALIAS(munmap, ucm_hook_munmap);
UCM_ALIAS(mremap, ucm_hook_mremap);
UCM_ALIAS(heaphook_ucm_mremap, ucm_hook_mremap);
UCM_ALIAS(shmat, ucm_hook_shmat);
UCM_ALIAS(shmdt, ucm_hook_shmdt);
UCM_ALIAS(sbrk, ucm_hook_sbrk);
UCM_ALIAS(brk, ucm_hook_brk);
UCM_ALIAS(madvise, ucm_hook_madvise);

/* ---- Installation ------------------------------------------------------------------------- */

static const struct {
    const char *name;
    void *hook;
    int event;
} ucm_symbols[] = {
    {"mmap", (void *)ucm_hook_mmap, HEAPHOOK_UCM_EVENT_MMAP},
    {"mmap64", (void *)ucm_hook_mmap, HEAPHOOK_UCM_EVENT_MMAP},
    {"munmap", (void *)ucm_hook_munmap, HEAPHOOK_UCM_EVENT_MUNMAP},
    {"mremap", (void *)ucm_hook_mremap, HEAPHOOK_UCM_EVENT_MREMAP},
    {"shmat", (void *)ucm_hook_shmat, HEAPHOOK_UCM_EVENT_SHMAT},
    {"shmdt", (void *)ucm_hook_shmdt, HEAPHOOK_UCM_EVENT_SHMDT},
    {"sbrk", (void *)ucm_hook_sbrk, HEAPHOOK_UCM_EVENT_SBRK},
    {"brk", (void *)ucm_hook_brk, HEAPHOOK_UCM_EVENT_BRK},
    {"madvise", (void *)ucm_hook_madvise, HEAPHOOK_UCM_EVENT_MADVISE},
};
#define UCM_SYMBOL_COUNT (sizeof ucm_symbols / sizeof ucm_symbols[0])

static pthread_mutex_t ucm_install_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *ucm_mode = "none";
static bool ucm_events_enabled = true, ucm_reloc_enabled = true, ucm_malloc_hooks = true;
static int ucm_failed;

static void ucm_resolve_brk(void) {
    void *s = dlsym(RTLD_NEXT, "sbrk");
    if (s == NULL || s == (void *)ucm_hook_sbrk) s = dlsym(RTLD_DEFAULT, "__sbrk");
    void *b = dlsym(RTLD_NEXT, "brk");
    if (b == NULL || b == (void *)ucm_hook_brk) b = dlsym(RTLD_DEFAULT, "__brk");
    ucm_real_sbrk = (void *(*)(intptr_t))s;
    ucm_real_brk = (int (*)(void *))b;
}

/* The definition the process's global scope binds symbol to (dlsym(RTLD_DEFAULT) from a
 * library searches that library's own scope too). */
static void *ucm_global_symbol(const char *symbol) {
    void *program = dlopen(NULL, RTLD_NOW | RTLD_NOLOAD);
    void *address = program ? dlsym(program, symbol) : NULL;
    if (program) dlclose(program);
    return address;
}

static heaphook_ucm_status_t ucm_install(void) {
    if (!ucm_events_enabled) return HEAPHOOK_UCM_ERR_UNSUPPORTED;
    pthread_mutex_lock(&ucm_install_lock);
    heaphook_ucm_status_t status = HEAPHOOK_UCM_OK;
    if (strcmp(ucm_mode, "none") == 0) {
        if (ucm_global_symbol("mmap") == (void *)ucm_hook_mmap) {
            ucm_mode = "preload";
        } else if (!ucm_reloc_enabled) {
            ucm_log(0,
                    "not loaded first and HEAPHOOK_MEM_RELOC_HOOKS=no: no memory events "
                    "(preload libheaphook_ucm.so, or allow relocation hooks)");
            status = HEAPHOOK_UCM_ERR_UNSUPPORTED;
        } else {
            heaphook_reloc_skip((void *)ucm_install);
            for (size_t i = 0; i < UCM_SYMBOL_COUNT; ++i) {
                int error =
                    heaphook_reloc_patch(ucm_symbols[i].name, ucm_symbols[i].hook, NULL, NULL);
                if (error != HEAPHOOK_RELOC_OK && error != HEAPHOOK_RELOC_NO_ORIGINAL) {
                    ucm_log(1, "patching %s: %s", ucm_symbols[i].name,
                            heaphook_reloc_strerror(error));
                }
            }
            ucm_mode = "reloc";
        }
        if (status == HEAPHOOK_UCM_OK) {
            ucm_log(2, "memory events installed (%s mode)", ucm_mode);
            if (ucm_malloc_hooks && dlsym(RTLD_DEFAULT, "heaphook_active_backend") == NULL) {
                ucm_log(2,
                        "the heap is glibc's malloc, which maps memory with internal calls: "
                        "its mappings raise no events (preload a heaphook backend too)");
            }
        }
    }
    pthread_mutex_unlock(&ucm_install_lock);
    return status;
}

/* The function the process calls for symbol: in preload mode the global definition; in reloc
 * mode what the main program's GOT entry leads to (so a patch that did not take, or was undone,
 * shows), or our hook when the program has no entry for it. */
static void *ucm_process_function(size_t index) {
    const char *name = ucm_symbols[index].name;
    if (strcmp(ucm_mode, "preload") == 0) return ucm_global_symbol(name);
    void *current = NULL;
    heaphook_reloc_object *program;
    if (heaphook_reloc_open(&program, NULL) == HEAPHOOK_RELOC_OK) {
        heaphook_reloc_get(program, name, &current);
        heaphook_reloc_close(program);
    }
    return current != NULL ? current : ucm_symbols[index].hook;
}

EXPORT heaphook_ucm_status_t heaphook_ucm_test_events(int events) {
    heaphook_ucm_status_t status = ucm_install();
    if (status != HEAPHOOK_UCM_OK) return status;
    ucm_testing = 1;
    ucm_test_seen = 0;
    size_t page = ucm_page();
    void *(*f_mmap)(void *, size_t, int, int, int, off_t) = ucm_process_function(0);
    int (*f_munmap)(void *, size_t) = ucm_process_function(2);
    void *(*f_mremap)(void *, size_t, size_t, int, ...) = ucm_process_function(3);
    void *(*f_shmat)(int, const void *, int) = ucm_process_function(4);
    int (*f_shmdt)(const void *) = ucm_process_function(5);
    void *(*f_sbrk)(intptr_t) = ucm_process_function(6);
    int (*f_brk)(void *) = ucm_process_function(7);
    int (*f_madvise)(void *, size_t, int) = ucm_process_function(8);
    void *p = f_mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        f_madvise(p, page, MADV_DONTNEED);
        void *q = f_mremap(p, page, 2 * page, MREMAP_MAYMOVE);
        f_munmap(q != MAP_FAILED ? q : p, q != MAP_FAILED ? 2 * page : page);
    }
    int shmid = shmget(IPC_PRIVATE, page, IPC_CREAT | 0600);
    if (shmid >= 0) {
        void *s = f_shmat(shmid, NULL, 0);
        if (s != (void *)-1) f_shmdt(s);
        shmctl(shmid, IPC_RMID, NULL);
    }
    void *current = f_sbrk(0);
    f_brk(current);
    ucm_testing = 0;
    int wanted = events & (HEAPHOOK_UCM_NATIVE_EVENTS | HEAPHOOK_UCM_VM_EVENTS);
    if (shmid < 0) wanted &= ~(HEAPHOOK_UCM_EVENT_SHMAT | HEAPHOOK_UCM_EVENT_SHMDT);
    ucm_failed = wanted & ~ucm_test_seen;
    if (ucm_failed == 0) return HEAPHOOK_UCM_OK;
    static const char *const names[] = {"MMAP",  "MUNMAP", "MREMAP",  "SHMAT",
                                        "SHMDT", "SBRK",   "MADVISE", "BRK"};
    char list[256];
    size_t n = 0;
    for (int bit = 0; bit < 8; ++bit) {
        if (ucm_failed & (1 << bit))
            n += heaphook_formatf(list + n, sizeof list - n, " %s", names[bit]);
    }
    if (ucm_failed & HEAPHOOK_UCM_EVENT_VM_MAPPED)
        n += heaphook_formatf(list + n, sizeof list - n, " VM_MAPPED");
    if (ucm_failed & HEAPHOOK_UCM_EVENT_VM_UNMAPPED)
        heaphook_formatf(list + n, sizeof list - n, " VM_UNMAPPED");
    ucm_log(0, "self-test (%s mode): these events do not fire:%s", ucm_mode, list);
    return HEAPHOOK_UCM_ERR_UNSUPPORTED;
}

EXPORT int heaphook_ucm_failed_events(void) {
    return ucm_failed;
}

EXPORT const char *heaphook_ucm_install_mode(void) {
    return ucm_mode;
}

static _Atomic int ucm_external_events;

EXPORT void heaphook_ucm_set_external_event(int events) {
    atomic_fetch_or(&ucm_external_events, events);
}
EXPORT void heaphook_ucm_unset_external_event(int events) {
    atomic_fetch_and(&ucm_external_events, ~events);
}

static void ucm_vm_external(heaphook_ucm_event_type_t type, void *addr, size_t length) {
    if (!ucm_enter()) return;
    ucm_vm(type, addr, length);
    ucm_leave();
}
EXPORT void heaphook_ucm_vm_mmap(void *addr, size_t length) {
    ucm_vm_external(HEAPHOOK_UCM_EVENT_VM_MAPPED, addr, length);
}
EXPORT void heaphook_ucm_vm_munmap(void *addr, size_t length) {
    ucm_vm_external(HEAPHOOK_UCM_EVENT_VM_UNMAPPED, addr, length);
}

static void ucm_update_active(void) {
    int all = 0;
    for (int i = 0; i < ucm_handler_count; ++i) all |= ucm_handlers[i].events;
    atomic_store(&ucm_active_events, all);
}

EXPORT heaphook_ucm_status_t heaphook_ucm_set_event_handler(int events, int priority,
                                                            heaphook_ucm_event_callback_t callback,
                                                            void *arg) {
    if (callback == NULL) return HEAPHOOK_UCM_ERR_INVALID_PARAM;
    if (!ucm_events_enabled) return HEAPHOOK_UCM_ERR_UNSUPPORTED;
    if (!(events & (HEAPHOOK_UCM_EVENT_FLAG_NO_INSTALL | atomic_load(&ucm_external_events)))) {
        heaphook_ucm_status_t status = ucm_install();
        if (status != HEAPHOOK_UCM_OK) return status;
    }
    events &= HEAPHOOK_UCM_NATIVE_EVENTS | HEAPHOOK_UCM_VM_EVENTS;
    pthread_rwlock_wrlock(&ucm_lock);
    if (ucm_handler_count == UCM_MAX_HANDLERS) {
        pthread_rwlock_unlock(&ucm_lock);
        return HEAPHOOK_UCM_ERR_NO_MEMORY;
    }
    int at = ucm_handler_count;
    while (at > 0 && ucm_handlers[at - 1].priority > priority) {
        ucm_handlers[at] = ucm_handlers[at - 1];
        --at;
    }
    ucm_handlers[at] = (struct ucm_handler){
        .events = events, .priority = priority, .callback = callback, .arg = arg};
    ++ucm_handler_count;
    ucm_update_active();
    pthread_rwlock_unlock(&ucm_lock);
    return HEAPHOOK_UCM_OK;
}

EXPORT void heaphook_ucm_unset_event_handler(int events, heaphook_ucm_event_callback_t callback,
                                             void *arg) {
    pthread_rwlock_wrlock(&ucm_lock);
    int kept = 0;
    for (int i = 0; i < ucm_handler_count; ++i) {
        struct ucm_handler h = ucm_handlers[i];
        if (h.callback == callback && h.arg == arg) h.events &= ~events;
        if (h.events != 0) ucm_handlers[kept++] = h;
    }
    ucm_handler_count = kept;
    ucm_update_active();
    pthread_rwlock_unlock(&ucm_lock);
}

__attribute__((constructor)) static void ucm_init(void) {
    static const char *const levels[] = {"error", "warn", "info", "debug", "trace"};
    ucm_log_level =
        heaphook_env_choice("HEAPHOOK_MEM_LOG_LEVEL", "UCX_MEM_LOG_LEVEL", levels, 5, 1);
    ucm_events_enabled = heaphook_env_bool("HEAPHOOK_MEM_EVENTS", "UCX_MEM_EVENTS", true);
    ucm_reloc_enabled = heaphook_env_bool("HEAPHOOK_MEM_RELOC_HOOKS", "UCX_MEM_RELOC_HOOKS", true);
    ucm_malloc_hooks = heaphook_env_bool("HEAPHOOK_MEM_MALLOC_HOOKS", "UCX_MEM_MALLOC_HOOKS", true);
    ucm_resolve_brk();
    pthread_atfork(ucm_fork_prepare, ucm_fork_parent, ucm_fork_child);
}
