/*
 * ucm.c — memory events (heaphook/ucm.h): the hooks of mmap, munmap, mremap, shmat, shmdt,
 * sbrk, brk and madvise, dispatch to the handler chain, installation (preload, GOT or code
 * patching) and the self-test.
 *
 * The real calls are system calls, made with the core's unobserved variant (heaphook/os.h: the
 * system-call instruction inline, errno set like the C library's): no symbol lookup and no call
 * into libc inside a hook, and the same in every install mode. sbrk and brk keep glibc's cached
 * break (__curbrk, which its own malloc uses) right: a dispatching hook does what glibc's sbrk/brk
 * do, inline, on __curbrk; otherwise they call the C library's functions (found with dlsym at
 * load).
 *
 * Handlers: the registered handlers (priority order) are compiled by the writer into a table of
 * per-event lists, and the hooks read the table without a lock and without an atomic
 * read-modify-write: native/rcu.h has the scheme's contract (rcu.c the writers' side), and
 * docs/readers-and-writers.md why it is safe. The sizes of attached segments are native/shm.c's,
 * the fork handlers' order native/fork.c's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
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
#include <time.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/log.h"
#include "heaphook/os.h"
#include "heaphook/reloc.h"
#include "heaphook/ucm.h"

#include "bistro.h"
#include "rcu.h"
#include "ucm_internal.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

/* ---- Logging: the core's logger on ucm-hooks' channel (HEAPHOOK_MEM_LOG_LEVEL) ------------- */

heaphook_log_channel ucm_log_channel = {.name = "heaphook-ucm", .level = HEAPHOOK_LOG_WARN};

/* ---- The real calls ------------------------------------------------------------------------ */

static void *(*ucm_real_sbrk)(intptr_t);
static int (*ucm_real_brk)(void *);
/* Once the C library's entries are prepared for patching (ucm_patch_libc), its sbrk and brk may
 * lead to the hooks: the real ones are then these trampolines, whatever dlsym says. */
static void *ucm_sbrk_trampoline, *ucm_brk_trampoline;

EXPORT void *heaphook_ucm_orig_mmap(void *addr, size_t length, int prot, int flags, int fd,
                                    off_t offset) {
    return (void *)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_mmap, addr, length, prot, flags, fd, offset));
}
EXPORT int heaphook_ucm_orig_munmap(void *addr, size_t length) {
    return (int)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_munmap, addr, length, 0, 0, 0, 0));
}
EXPORT void *heaphook_ucm_orig_mremap(void *old, size_t old_size, size_t new_size, int flags,
                                      void *new_addr) {
    return (void *)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_mremap, old, old_size, new_size, flags, new_addr, 0));
}
EXPORT int heaphook_ucm_orig_madvise(void *addr, size_t length, int advice) {
    return (int)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_madvise, addr, length, advice, 0, 0, 0));
}
EXPORT void *heaphook_ucm_orig_shmat(int shmid, const void *shmaddr, int shmflg) {
    return (void *)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_shmat, shmid, shmaddr, shmflg, 0, 0, 0));
}
EXPORT int heaphook_ucm_orig_shmdt(const void *shmaddr) {
    return (int)heaphook_os_unobserved_libc(
        HEAPHOOK_OS_UNOBSERVED(SYS_shmdt, shmaddr, 0, 0, 0, 0, 0));
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

/* ---- Dispatch ------------------------------------------------------------------------------ */

static size_t ucm_page_size;
static __attribute__((noinline, cold)) size_t ucm_page_init(void) {
    ucm_page_size = (size_t)sysconf(_SC_PAGESIZE);
    return ucm_page_size;
}
UCM_INLINE size_t ucm_page(void) {
    size_t page = ucm_page_size;
    return UCM_LIKELY(page != 0) ? page : ucm_page_init();
}
UCM_INLINE size_t ucm_page_round(size_t size) {
    size_t page = ucm_page();
    return (size + page - 1) & ~(page - 1);
}

UCM_INLINE void ucm_run(const struct ucm_list *list, unsigned from, unsigned to,
                        heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event) {
    for (unsigned i = from; i < to; ++i) {
        list->entries[i].callback(type, event, list->entries[i].arg);
    }
}

/* A VM_MAPPED / VM_UNMAPPED event: every handler of it, in chain order. */
UCM_INLINE void ucm_vm_call(const struct ucm_list *list, heaphook_ucm_event_type_t type,
                            void *address, size_t size) {
    heaphook_ucm_event_t event;
    event.vm_mapped.address = address;
    event.vm_mapped.size = size;
    ucm_run(list, 0, list->count, type, &event);
}
UCM_INLINE void ucm_vm(struct ucm_thread *self, const struct ucm_table *table, int kind,
                       void *address, size_t size) {
    heaphook_ucm_event_type_t type = (heaphook_ucm_event_type_t)ucm_kind_event(kind);
    if (size == 0) return;
    if (UCM_UNLIKELY(self->testing)) self->test_seen |= type;
    const struct ucm_list *list = &table->lists[kind];
    if (list->count != 0) ucm_vm_call(list, type, address, size);
}

/* A native event: the handlers before the real call (priority < 0)... */
UCM_INLINE void ucm_before(struct ucm_thread *self, const struct ucm_table *table, int kind,
                           heaphook_ucm_event_t *event) {
    heaphook_ucm_event_type_t type = (heaphook_ucm_event_type_t)ucm_kind_event(kind);
    if (UCM_UNLIKELY(self->testing)) self->test_seen |= type;
    const struct ucm_list *list = &table->lists[kind];
    if (UCM_UNLIKELY(list->before != 0)) ucm_run(list, 0, list->before, type, event);
}
/* ... and after it (priority >= 0). */
UCM_INLINE void ucm_after(const struct ucm_table *table, int kind, heaphook_ucm_event_t *event) {
    const struct ucm_list *list = &table->lists[kind];
    if (list->count != list->before) {
        ucm_run(list, list->before, list->count, (heaphook_ucm_event_type_t)ucm_kind_event(kind),
                event);
    }
}

#define UCM_VM_UNMAPPED HEAPHOOK_UCM_EVENT_VM_UNMAPPED
#define UCM_VM_MAPPED HEAPHOOK_UCM_EVENT_VM_MAPPED

/* ---- The hooks -----------------------------------------------------------------------------
 *
 * Each hook is one function, exported under the C library's name and as heaphook_ucm_<name>
 * (aliases: no PLT hop inside the library). Without a handler for its events it makes the
 * system call and returns. Otherwise it builds the native event once; in a first read-side
 * section (only when there is something to run before the call) raises VM_UNMAPPED and runs
 * the handlers with priority < 0; makes the real call outside any section, unless a handler set
 * the result; and in a second section runs the handlers with priority >= 0 and raises
 * VM_MAPPED, with errno of the real call kept across them. */

static void *ucm_hook_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
    struct ucm_thread *self = &ucm_self;
    int unmaps = (flags & MAP_FIXED) ? UCM_VM_UNMAPPED : 0;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_MMAP | UCM_VM_MAPPED | unmaps)) {
        return (void *)heaphook_os_unobserved_libc(
            HEAPHOOK_OS_UNOBSERVED(SYS_mmap, addr, length, prot, flags, fd, offset));
    }
    heaphook_ucm_event_t event;
    event.mmap.result = MAP_FAILED;
    event.mmap.address = addr;
    event.mmap.size = length;
    event.mmap.prot = prot;
    event.mmap.flags = flags;
    event.mmap.fd = fd;
    event.mmap.offset = offset;
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_MMAP, unmaps)) {
        const struct ucm_table *t = ucm_enter(self);
        if (unmaps) ucm_vm(self, t, UCM_K_VM_UNMAPPED, addr, ucm_page_round(length));
        ucm_before(self, t, UCM_K_MMAP, &event);
        ucm_leave(self);
    }
    if (event.mmap.result == MAP_FAILED) {
        event.mmap.result = (void *)heaphook_os_unobserved_libc(
            HEAPHOOK_OS_UNOBSERVED(SYS_mmap, event.mmap.address, event.mmap.size, event.mmap.prot,
                                   event.mmap.flags, event.mmap.fd, event.mmap.offset));
    }
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_MMAP, UCM_VM_MAPPED)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_MMAP, &event);
        *self->err = saved;
        if (event.mmap.result != MAP_FAILED) {
            ucm_vm(self, t, UCM_K_VM_MAPPED, event.mmap.result, ucm_page_round(event.mmap.size));
        }
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.mmap.result;
}

static int ucm_hook_munmap(void *addr, size_t length) {
    struct ucm_thread *self = &ucm_self;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_MUNMAP | UCM_VM_UNMAPPED)) {
        return (int)heaphook_os_unobserved_libc(
            HEAPHOOK_OS_UNOBSERVED(SYS_munmap, addr, length, 0, 0, 0, 0));
    }
    heaphook_ucm_event_t event;
    event.munmap.result = -1;
    event.munmap.address = addr;
    event.munmap.size = length;
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_MUNMAP, UCM_VM_UNMAPPED)) {
        const struct ucm_table *t = ucm_enter(self);
        ucm_vm(self, t, UCM_K_VM_UNMAPPED, addr, ucm_page_round(length));
        ucm_before(self, t, UCM_K_MUNMAP, &event);
        ucm_leave(self);
    }
    if (event.munmap.result == -1) {
        event.munmap.result = (int)heaphook_os_unobserved_libc(HEAPHOOK_OS_UNOBSERVED(
            SYS_munmap, event.munmap.address, event.munmap.size, 0, 0, 0, 0));
    }
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_MUNMAP, 0)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_MUNMAP, &event);
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.munmap.result;
}

UCM_INLINE void *ucm_mremap_impl(void *old, size_t old_size, size_t new_size, int flags,
                                 void *new_address) {
    if (!(flags & MREMAP_FIXED)) new_address = NULL;
    struct ucm_thread *self = &ucm_self;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_MREMAP | UCM_VM_MAPPED | UCM_VM_UNMAPPED)) {
        return (void *)heaphook_os_unobserved_libc(
            HEAPHOOK_OS_UNOBSERVED(SYS_mremap, old, old_size, new_size, flags, new_address, 0));
    }
    heaphook_ucm_event_t event;
    event.mremap.result = MAP_FAILED;
    event.mremap.address = old;
    event.mremap.old_size = old_size;
    event.mremap.new_size = new_size;
    event.mremap.flags = flags;
    event.mremap.new_address = new_address;
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_MREMAP, UCM_VM_UNMAPPED)) {
        const struct ucm_table *t = ucm_enter(self);
        ucm_vm(self, t, UCM_K_VM_UNMAPPED, old, ucm_page_round(old_size));
        if (flags & MREMAP_FIXED) {
            ucm_vm(self, t, UCM_K_VM_UNMAPPED, new_address, ucm_page_round(new_size));
        }
        ucm_before(self, t, UCM_K_MREMAP, &event);
        ucm_leave(self);
    }
    if (event.mremap.result == MAP_FAILED) {
        event.mremap.result = (void *)heaphook_os_unobserved_libc(HEAPHOOK_OS_UNOBSERVED(
            SYS_mremap, event.mremap.address, event.mremap.old_size, event.mremap.new_size,
            event.mremap.flags, event.mremap.new_address, 0));
    }
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_MREMAP, UCM_VM_MAPPED)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_MREMAP, &event);
        *self->err = saved;
        if (event.mremap.result != MAP_FAILED) {
            ucm_vm(self, t, UCM_K_VM_MAPPED, event.mremap.result,
                   ucm_page_round(event.mremap.new_size));
        }
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.mremap.result;
}

static size_t ucm_shm_size(int shmid) {
    struct shmid_ds ds;
    if (HEAPHOOK_OS_UNOBSERVED(SYS_shmctl, shmid, IPC_STAT, &ds, 0, 0, 0) != 0) return 0;
    return ucm_page_round(ds.shm_segsz);
}

static void *ucm_hook_shmat(int shmid, const void *shmaddr, int shmflg) {
    struct ucm_thread *self = &ucm_self;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_SHMAT | UCM_VM_MAPPED | UCM_VM_UNMAPPED)) {
        long result = HEAPHOOK_OS_UNOBSERVED(SYS_shmat, shmid, shmaddr, shmflg, 0, 0, 0);
        if (heaphook_os_unobserved_failed(result))
            return (void *)heaphook_os_unobserved_set_errno(result);
        ucm_shm_forget((void *)result); /* a recorded entry there is stale */
        return (void *)result;
    }
    size_t size = ucm_shm_size(shmid);
    heaphook_ucm_event_t event;
    event.shmat.result = (void *)-1;
    event.shmat.shmid = shmid;
    event.shmat.shmaddr = shmaddr;
    event.shmat.shmflg = shmflg;
    int unmaps = shmaddr != NULL && (shmflg & SHM_REMAP) ? UCM_VM_UNMAPPED : 0;
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_SHMAT, unmaps)) {
        const struct ucm_table *t = ucm_enter(self);
        if (unmaps) ucm_vm(self, t, UCM_K_VM_UNMAPPED, (void *)shmaddr, size);
        ucm_before(self, t, UCM_K_SHMAT, &event);
        ucm_leave(self);
    }
    if (event.shmat.result == (void *)-1) {
        event.shmat.result = (void *)heaphook_os_unobserved_libc(HEAPHOOK_OS_UNOBSERVED(
            SYS_shmat, event.shmat.shmid, event.shmat.shmaddr, event.shmat.shmflg, 0, 0, 0));
    }
    if (event.shmat.result != (void *)-1) {
        if (event.shmat.shmid != shmid) size = ucm_shm_size(event.shmat.shmid);
        ucm_shm_remember(event.shmat.result, size);
    }
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_SHMAT, UCM_VM_MAPPED)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_SHMAT, &event);
        *self->err = saved;
        if (event.shmat.result != (void *)-1) {
            ucm_vm(self, t, UCM_K_VM_MAPPED, event.shmat.result, size);
        }
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.shmat.result;
}

static int ucm_hook_shmdt(const void *shmaddr) {
    struct ucm_thread *self = &ucm_self;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_SHMDT | UCM_VM_UNMAPPED)) {
        long result = HEAPHOOK_OS_UNOBSERVED(SYS_shmdt, shmaddr, 0, 0, 0, 0, 0);
        ucm_shm_forget(shmaddr);
        return (int)heaphook_os_unobserved_libc(result);
    }
    heaphook_ucm_event_t event;
    event.shmdt.result = -1;
    event.shmdt.shmaddr = shmaddr;
    size_t size = ucm_shm_forget(shmaddr);
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_SHMDT, UCM_VM_UNMAPPED)) {
        if (size == 0 && (atomic_load(&ucm_active_events) & UCM_VM_UNMAPPED || self->testing)) {
            size = ucm_mapping_size(shmaddr);
        }
        const struct ucm_table *t = ucm_enter(self);
        ucm_vm(self, t, UCM_K_VM_UNMAPPED, (void *)shmaddr, size);
        ucm_before(self, t, UCM_K_SHMDT, &event);
        ucm_leave(self);
    }
    if (event.shmdt.result == -1) {
        event.shmdt.result = (int)heaphook_os_unobserved_libc(
            HEAPHOOK_OS_UNOBSERVED(SYS_shmdt, event.shmdt.shmaddr, 0, 0, 0, 0, 0));
    }
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_SHMDT, 0)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_SHMDT, &event);
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.shmdt.result;
}

UCM_INLINE void *(*ucm_sbrk_fn(void))(intptr_t) {
    if (UCM_UNLIKELY(ucm_real_sbrk == NULL)) ucm_resolve_brk();
    return ucm_real_sbrk;
}
UCM_INLINE int (*ucm_brk_fn(void))(void *) {
    if (UCM_UNLIKELY(ucm_real_brk == NULL)) ucm_resolve_brk();
    return ucm_real_brk;
}

/* The real sbrk/brk inside a dispatching hook: glibc's own code, inline (the break it caches in
 * __curbrk, moved with the brk system call, __curbrk updated, ENOMEM when the kernel did not
 * move it far enough), without the calls into the C library; glibc's functions when __curbrk is
 * not known (see ucm_init) or not read yet. libucm writes __curbrk the same way. */
static void **ucm_curbrk;
UCM_INLINE char *ucm_break(void) {
    void **curbrk = ucm_curbrk;
    if (UCM_LIKELY(curbrk != NULL && *curbrk != NULL)) return *curbrk;
    return ucm_sbrk_fn()(0);
}
UCM_INLINE void *ucm_real_sbrk_call(intptr_t increment) {
    void **curbrk = ucm_curbrk;
    if (UCM_UNLIKELY(curbrk == NULL || *curbrk == NULL || increment == 0)) {
        return ucm_sbrk_fn()(increment);
    }
    char *old = *curbrk;
    if (increment > 0 ? (uintptr_t)old + (uintptr_t)increment < (uintptr_t)old
                      : (uintptr_t)old < (uintptr_t)-increment) {
        return (void *)heaphook_os_unobserved_set_errno(-ENOMEM);
    }
    char *want = old + increment;
    char *now = (char *)HEAPHOOK_OS_UNOBSERVED(SYS_brk, want, 0, 0, 0, 0, 0);
    *curbrk = now;
    if (now < want) return (void *)heaphook_os_unobserved_set_errno(-ENOMEM);
    return old;
}
UCM_INLINE int ucm_real_brk_call(void *addr) {
    void **curbrk = ucm_curbrk;
    if (UCM_UNLIKELY(curbrk == NULL)) return ucm_brk_fn()(addr);
    char *now = (char *)HEAPHOOK_OS_UNOBSERVED(SYS_brk, addr, 0, 0, 0, 0, 0);
    *curbrk = now;
    if (now < (char *)addr) return (int)heaphook_os_unobserved_set_errno(-ENOMEM);
    return 0;
}

static void *ucm_hook_sbrk(intptr_t increment) {
    struct ucm_thread *self = &ucm_self;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_SBRK | UCM_VM_MAPPED | UCM_VM_UNMAPPED)) {
        return ucm_sbrk_fn()(increment);
    }
    heaphook_ucm_event_t event;
    event.sbrk.result = (void *)-1;
    event.sbrk.increment = increment;
    int unmaps = increment < 0 ? UCM_VM_UNMAPPED : 0;
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_SBRK, unmaps)) {
        char *current = unmaps ? ucm_break() : NULL;
        const struct ucm_table *t = ucm_enter(self);
        if (unmaps) ucm_vm(self, t, UCM_K_VM_UNMAPPED, current + increment, (size_t)-increment);
        ucm_before(self, t, UCM_K_SBRK, &event);
        ucm_leave(self);
    }
    if (event.sbrk.result == (void *)-1)
        event.sbrk.result = ucm_real_sbrk_call(event.sbrk.increment);
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_SBRK, increment > 0 ? UCM_VM_MAPPED : 0)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_SBRK, &event);
        *self->err = saved;
        if (event.sbrk.result != (void *)-1 && event.sbrk.increment > 0) {
            ucm_vm(self, t, UCM_K_VM_MAPPED, event.sbrk.result, (size_t)event.sbrk.increment);
        }
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.sbrk.result;
}

static int ucm_hook_brk(void *addr) {
    struct ucm_thread *self = &ucm_self;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_BRK | UCM_VM_MAPPED | UCM_VM_UNMAPPED)) {
        return ucm_brk_fn()(addr);
    }
    char *before = ucm_break();
    heaphook_ucm_event_t event;
    event.brk.result = -1;
    event.brk.addr = addr;
    int unmaps = (char *)addr < before ? UCM_VM_UNMAPPED : 0;
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_BRK, unmaps)) {
        const struct ucm_table *t = ucm_enter(self);
        if (unmaps) ucm_vm(self, t, UCM_K_VM_UNMAPPED, addr, (size_t)(before - (char *)addr));
        ucm_before(self, t, UCM_K_BRK, &event);
        ucm_leave(self);
    }
    if (event.brk.result == -1) event.brk.result = ucm_real_brk_call(event.brk.addr);
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_BRK, (char *)addr > before ? UCM_VM_MAPPED : 0)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_BRK, &event);
        *self->err = saved;
        if (event.brk.result == 0 && (char *)event.brk.addr > before) {
            ucm_vm(self, t, UCM_K_VM_MAPPED, before, (size_t)((char *)event.brk.addr - before));
        }
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.brk.result;
}

static int ucm_hook_madvise(void *addr, size_t length, int advice) {
    struct ucm_thread *self = &ucm_self;
    int unmaps = advice == MADV_DONTNEED || advice == MADV_REMOVE || advice == MADV_FREE
                     ? UCM_VM_UNMAPPED
                     : 0;
    if (!ucm_begin(self, HEAPHOOK_UCM_EVENT_MADVISE | unmaps)) {
        return (int)heaphook_os_unobserved_libc(
            HEAPHOOK_OS_UNOBSERVED(SYS_madvise, addr, length, advice, 0, 0, 0));
    }
    heaphook_ucm_event_t event;
    event.madvise.result = -1;
    event.madvise.addr = addr;
    event.madvise.length = length;
    event.madvise.advice = advice;
    if (ucm_has_before(self, HEAPHOOK_UCM_EVENT_MADVISE, unmaps)) {
        const struct ucm_table *t = ucm_enter(self);
        if (unmaps) ucm_vm(self, t, UCM_K_VM_UNMAPPED, addr, ucm_page_round(length));
        ucm_before(self, t, UCM_K_MADVISE, &event);
        ucm_leave(self);
    }
    if (event.madvise.result == -1) {
        event.madvise.result = (int)heaphook_os_unobserved_libc(HEAPHOOK_OS_UNOBSERVED(
            SYS_madvise, event.madvise.addr, event.madvise.length, event.madvise.advice, 0, 0, 0));
    }
    if (ucm_has_after(self, HEAPHOOK_UCM_EVENT_MADVISE, 0)) {
        const struct ucm_table *t = ucm_enter(self);
        int saved = *self->err;
        ucm_after(t, UCM_K_MADVISE, &event);
        ucm_leave(self);
        *self->err = saved;
    }
    ucm_end(self);
    return event.madvise.result;
}

/* Exported under the C library's names and as heaphook_ucm_*, as aliases: the addresses this
 * file takes are the local functions, not whatever the process binds "mmap" to. */
#define UCM_ALIAS(name, hook) EXPORT __typeof__(hook) name __attribute__((alias(#hook)))
/* The C library's names. A test program that links this file under a sanitizer defines
 * HEAPHOOK_UCM_NO_LIBC_NAMES (test/sanitize): the sanitizer's runtime maps its own memory
 * through mmap before anything here is ready, so there only the heaphook_ucm_* names exist. */
#ifndef HEAPHOOK_UCM_NO_LIBC_NAMES
#define UCM_LIBC_ALIAS(name, hook) UCM_ALIAS(name, hook)
#else
#define UCM_LIBC_ALIAS(name, hook) _Static_assert(1, "no " #name)
#endif
UCM_LIBC_ALIAS(mmap, ucm_hook_mmap);
UCM_LIBC_ALIAS(mmap64, ucm_hook_mmap);
UCM_ALIAS(heaphook_ucm_mmap, ucm_hook_mmap);
UCM_LIBC_ALIAS(munmap, ucm_hook_munmap);
UCM_ALIAS(heaphook_ucm_munmap, ucm_hook_munmap);
UCM_LIBC_ALIAS(shmat, ucm_hook_shmat);
UCM_ALIAS(heaphook_ucm_shmat, ucm_hook_shmat);
UCM_LIBC_ALIAS(shmdt, ucm_hook_shmdt);
UCM_ALIAS(heaphook_ucm_shmdt, ucm_hook_shmdt);
UCM_LIBC_ALIAS(sbrk, ucm_hook_sbrk);
UCM_ALIAS(heaphook_ucm_sbrk, ucm_hook_sbrk);
UCM_LIBC_ALIAS(brk, ucm_hook_brk);
UCM_ALIAS(heaphook_ucm_brk, ucm_hook_brk);
UCM_LIBC_ALIAS(madvise, ucm_hook_madvise);
UCM_ALIAS(heaphook_ucm_madvise, ucm_hook_madvise);
/* mremap is variadic: new_address only with MREMAP_FIXED. */
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
UCM_LIBC_ALIAS(mremap, ucm_hook_mremap);
UCM_ALIAS(heaphook_ucm_mremap, ucm_hook_mremap);

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
/* Fork (native/fork.c, lock 1): the child gets the install state whole. */
void ucm_install_prefork(void) {
    pthread_mutex_lock(&ucm_install_lock);
}
void ucm_install_postfork_parent(void) {
    pthread_mutex_unlock(&ucm_install_lock);
}
void ucm_install_postfork_child(void) {
    pthread_mutex_init(&ucm_install_lock, NULL);
}
static const char *ucm_mode = "none";
static bool ucm_events_enabled = true, ucm_reloc_enabled = true, ucm_malloc_hooks = true;
static bool ucm_libc_patched; /* the C library's entries jump to the hooks (ucm_libc_patches) */
static int ucm_failed;

/* HEAPHOOK_MEM_MMAP_HOOK_MODE: how the hooks are installed. */
enum { UCM_HOOK_AUTO, UCM_HOOK_PRELOAD, UCM_HOOK_RELOC, UCM_HOOK_BISTRO };
static int ucm_hook_mode = UCM_HOOK_AUTO;
/* HEAPHOOK_MEM_ALLOC_ALIGN (libucm's UCX_MEM_ALLOC_ALIGN): checked, and reported as having no
 * effect when set, since there is no heap of ours to align (see the README). */
#define UCM_DEFAULT_ALLOC_ALIGN 16
static size_t ucm_alloc_align = UCM_DEFAULT_ALLOC_ALIGN;

static void ucm_resolve_brk(void) {
    if (ucm_sbrk_trampoline != NULL) {
        ucm_real_sbrk = (void *(*)(intptr_t))ucm_sbrk_trampoline;
        ucm_real_brk = (int (*)(void *))ucm_brk_trampoline;
        return;
    }
    void *s = dlsym(RTLD_NEXT, "sbrk");
    if (s == NULL || s == (void *)ucm_hook_sbrk) s = dlsym(RTLD_DEFAULT, "__sbrk");
    void *b = dlsym(RTLD_NEXT, "brk");
    if (b == NULL || b == (void *)ucm_hook_brk) b = dlsym(RTLD_DEFAULT, "__brk");
    ucm_real_sbrk = (void *(*)(intptr_t))s;
    ucm_real_brk = (int (*)(void *))b;
}

/* ---- Code patching of the C library's entries (native/bistro.c) ----------------------------
 *
 * The first six are the calls glibc's malloc makes to map, unmap and trim its heap, through
 * its internal names, which reach these same entries and never a GOT: patched in every mode
 * unless HEAPHOOK_MEM_MALLOC_HOOKS=no. bistro mode patches all eight instead of the GOTs. */
#define UCM_MALLOC_PATCHES 6
static ucm_bistro_patch ucm_libc_patches[] = {
    {.name = "mmap", .hook = (void *)ucm_hook_mmap},
    {.name = "munmap", .hook = (void *)ucm_hook_munmap},
    {.name = "mremap", .hook = (void *)ucm_hook_mremap},
    {.name = "madvise", .hook = (void *)ucm_hook_madvise},
    {.name = "sbrk", .hook = (void *)ucm_hook_sbrk},
    {.name = "brk", .hook = (void *)ucm_hook_brk},
    {.name = "shmat", .hook = (void *)ucm_hook_shmat},
    {.name = "shmdt", .hook = (void *)ucm_hook_shmdt},
};
#define UCM_LIBC_PATCHES (sizeof ucm_libc_patches / sizeof ucm_libc_patches[0])

/* The C library's own definition of name (not an interposed one). */
static void *ucm_libc_function(const char *name) {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc == NULL) return NULL;
    void *function = dlsym(libc, name);
    dlclose(libc);
    return function;
}

/* Patches the first count entries of ucm_libc_patches. Install lock held. */
static bool ucm_patch_libc(size_t count) {
    char why[256];
    if (!ucm_libc_patches[0].prepared) {
        for (size_t i = 0; i < UCM_LIBC_PATCHES; ++i) {
            ucm_libc_patches[i].function = ucm_libc_function(ucm_libc_patches[i].name);
            if (ucm_libc_patches[i].function == NULL) {
                ucm_log_error("code patching: the C library's %s was not found",
                              ucm_libc_patches[i].name);
                return false;
            }
        }
        if (ucm_bistro_prepare(ucm_libc_patches, UCM_LIBC_PATCHES, why, sizeof why) != 0) {
            ucm_log_error("code patching refused: %s", why);
            return false;
        }
        /* From now on glibc's sbrk/brk may lead to the hooks: the real ones are the
         * trampolines (the same code, callable whether or not the entries are patched). */
        ucm_sbrk_trampoline = ucm_libc_patches[4].trampoline;
        ucm_brk_trampoline = ucm_libc_patches[5].trampoline;
        ucm_resolve_brk();
    }
    if (ucm_bistro_apply(ucm_libc_patches, count, true, why, sizeof why) != 0) {
        ucm_log_error("code patching refused: %s", why);
        return false;
    }
    ucm_libc_patched = true;
    return true;
}

/* The definition the process's global scope binds symbol to (dlsym(RTLD_DEFAULT) from a
 * library searches that library's own scope too). */
static void *ucm_global_symbol(const char *symbol) {
    void *program = dlopen(NULL, RTLD_NOW | RTLD_NOLOAD);
    void *address = program ? dlsym(program, symbol) : NULL;
    if (program) dlclose(program);
    return address;
}

static heaphook_ucm_status_t ucm_install(void);
/* The GOT patches of reloc mode, undone by heaphook_ucm_uninstall. Install lock held. */
static heaphook_reloc_handle *ucm_got_patches[UCM_SYMBOL_COUNT];
static void ucm_patch_gots(void) {
    static bool skipped;
    if (!skipped) skipped = heaphook_reloc_skip((void *)ucm_install) == HEAPHOOK_RELOC_OK;
    for (size_t i = 0; i < UCM_SYMBOL_COUNT; ++i) {
        int error = heaphook_reloc_patch(ucm_symbols[i].name, ucm_symbols[i].hook, NULL,
                                         &ucm_got_patches[i]);
        if (error != HEAPHOOK_RELOC_OK && error != HEAPHOOK_RELOC_NO_ORIGINAL) {
            ucm_log_warn("patching %s: %s", ucm_symbols[i].name, heaphook_reloc_strerror(error));
        }
    }
}

static void ucm_ensure_init(void);
static heaphook_ucm_status_t ucm_install(void) {
    ucm_ensure_init();
    if (!ucm_events_enabled) return HEAPHOOK_UCM_ERR_UNSUPPORTED;
    pthread_mutex_lock(&ucm_install_lock);
    heaphook_ucm_status_t status = HEAPHOOK_UCM_OK;
    if (strcmp(ucm_mode, "none") == 0) {
        bool first = ucm_global_symbol("mmap") == (void *)ucm_hook_mmap;
        if (ucm_hook_mode == UCM_HOOK_BISTRO) {
            if (ucm_patch_libc(UCM_LIBC_PATCHES)) {
                ucm_mode = "bistro";
            } else {
                status = HEAPHOOK_UCM_ERR_UNSUPPORTED;
            }
        } else if (first && ucm_hook_mode != UCM_HOOK_RELOC) {
            ucm_mode = "preload";
        } else if (ucm_hook_mode == UCM_HOOK_PRELOAD) {
            ucm_log_error(
                "HEAPHOOK_MEM_MMAP_HOOK_MODE=preload but libheaphook_ucm.so is not loaded "
                "first: no memory events (LD_PRELOAD it, or use reloc or bistro)");
            status = HEAPHOOK_UCM_ERR_UNSUPPORTED;
        } else if (!ucm_reloc_enabled) {
            ucm_log_error(
                "not loaded first and HEAPHOOK_MEM_RELOC_HOOKS=no: no memory events "
                "(preload libheaphook_ucm.so, or allow relocation hooks)");
            status = HEAPHOOK_UCM_ERR_UNSUPPORTED;
        } else {
            ucm_patch_gots();
            ucm_mode = "reloc";
        }
        if (status == HEAPHOOK_UCM_OK && ucm_malloc_hooks && !ucm_libc_patched &&
            !ucm_patch_libc(UCM_MALLOC_PATCHES)) {
            ucm_log_warn(
                "glibc malloc's own mappings raise no events (HEAPHOOK_MEM_MALLOC_HOOKS=no "
                "silences this)");
        }
        if (status == HEAPHOOK_UCM_OK) {
            ucm_log_info("memory events installed (%s mode)", ucm_mode);
            if (ucm_alloc_align != UCM_DEFAULT_ALLOC_ALIGN) {
                ucm_log_warn(
                    "HEAPHOOK_MEM_ALLOC_ALIGN=%zu has no effect: the process keeps its own "
                    "malloc (libucm applies it to the heap it replaces malloc with)",
                    ucm_alloc_align);
            }
            if (ucm_libc_patched && strcmp(ucm_mode, "bistro") != 0) {
                ucm_log_info(
                    "the C library's mmap, munmap, mremap, madvise, sbrk and brk entries "
                    "patched: glibc malloc's own mappings raise events");
            }
        }
    }
    pthread_mutex_unlock(&ucm_install_lock);
    return status;
}

/* The function the process calls for symbol: in preload mode the global definition; in reloc
 * mode what the main program's GOT entry leads to (so a patch that did not take, or was undone,
 * shows), or our hook when the program has no entry for it; in bistro mode the C library's
 * entry (patched). */
static void *ucm_process_function(size_t index) {
    const char *name = ucm_symbols[index].name;
    if (strcmp(ucm_mode, "preload") == 0) return ucm_global_symbol(name);
    if (strcmp(ucm_mode, "bistro") == 0) {
        void *libc = ucm_libc_function(name);
        return libc != NULL ? libc : ucm_symbols[index].hook;
    }
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
    ucm_self.testing = 1;
    ucm_self.test_seen = 0;
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
    ucm_self.testing = 0;
    int wanted = events & (HEAPHOOK_UCM_NATIVE_EVENTS | HEAPHOOK_UCM_VM_EVENTS);
    if (shmid < 0) wanted &= ~(HEAPHOOK_UCM_EVENT_SHMAT | HEAPHOOK_UCM_EVENT_SHMDT);
    ucm_failed = wanted & ~ucm_self.test_seen;
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
    ucm_log_error("self-test (%s mode): these events do not fire:%s", ucm_mode, list);
    return HEAPHOOK_UCM_ERR_UNSUPPORTED;
}

EXPORT int heaphook_ucm_failed_events(void) {
    return ucm_failed;
}

EXPORT const char *heaphook_ucm_install_mode(void) {
    return ucm_mode;
}

EXPORT heaphook_ucm_status_t heaphook_ucm_uninstall(void) {
    pthread_mutex_lock(&ucm_install_lock);
    int handlers = ucm_handlers_count();
    if (handlers != 0) {
        pthread_mutex_unlock(&ucm_install_lock);
        return HEAPHOOK_UCM_ERR_BUSY;
    }
    heaphook_ucm_status_t status = HEAPHOOK_UCM_OK;
    if (ucm_libc_patched) {
        char why[256];
        if (ucm_bistro_apply(ucm_libc_patches, UCM_LIBC_PATCHES, false, why, sizeof why) == 0) {
            ucm_libc_patched = false;
        } else {
            ucm_log_error("removing the code patches failed: %s", why);
            status = HEAPHOOK_UCM_ERR_UNSUPPORTED;
        }
    }
    for (size_t i = 0; i < UCM_SYMBOL_COUNT; ++i) {
        if (ucm_got_patches[i] == NULL) continue;
        int error = heaphook_reloc_unpatch(ucm_got_patches[i]);
        if (error != HEAPHOOK_RELOC_OK) {
            ucm_log_error("restoring the GOT entries of %s: %s", ucm_symbols[i].name,
                          heaphook_reloc_strerror(error));
            status = HEAPHOOK_UCM_ERR_UNSUPPORTED;
        }
        ucm_got_patches[i] = NULL;
    }
    if (status == HEAPHOOK_UCM_OK) {
        ucm_log_info("memory events uninstalled (%s mode)", ucm_mode);
        ucm_mode = "none";
    }
    pthread_mutex_unlock(&ucm_install_lock);
    return status;
}

static _Atomic int ucm_external_events;

EXPORT void heaphook_ucm_set_external_event(int events) {
    atomic_fetch_or(&ucm_external_events, events);
}
EXPORT void heaphook_ucm_unset_external_event(int events) {
    atomic_fetch_and(&ucm_external_events, ~events);
}

static void ucm_vm_external(int kind, void *addr, size_t length) {
    struct ucm_thread *self = &ucm_self;
    if (!ucm_begin(self, ucm_kind_event(kind))) return;
    const struct ucm_table *t = ucm_enter(self);
    ucm_vm(self, t, kind, addr, length);
    ucm_leave(self);
    ucm_end(self);
}
EXPORT void heaphook_ucm_vm_mmap(void *addr, size_t length) {
    ucm_vm_external(UCM_K_VM_MAPPED, addr, length);
}
EXPORT void heaphook_ucm_vm_munmap(void *addr, size_t length) {
    ucm_vm_external(UCM_K_VM_UNMAPPED, addr, length);
}

EXPORT heaphook_ucm_status_t heaphook_ucm_set_event_handler(int events, int priority,
                                                            heaphook_ucm_event_callback_t callback,
                                                            void *arg) {
    if (callback == NULL) return HEAPHOOK_UCM_ERR_INVALID_PARAM;
    ucm_ensure_init();
    if (!ucm_events_enabled) return HEAPHOOK_UCM_ERR_UNSUPPORTED;
    if (!(events & (HEAPHOOK_UCM_EVENT_FLAG_NO_INSTALL | atomic_load(&ucm_external_events)))) {
        heaphook_ucm_status_t status = ucm_install();
        if (status != HEAPHOOK_UCM_OK) return status;
    }
    events &= HEAPHOOK_UCM_NATIVE_EVENTS | HEAPHOOK_UCM_VM_EVENTS;
    return ucm_handlers_add(events, priority, callback, arg);
}

EXPORT void heaphook_ucm_unset_event_handler(int events, heaphook_ucm_event_callback_t callback,
                                             void *arg) {
    ucm_handlers_remove(events, callback, arg);
}

/* Reads the configuration and resolves what the hooks need, once: from this library's
 * constructor, or earlier, when another library's constructor registers a handler before it
 * runs (initialisers of preloaded libraries run in reverse order: heaptrack's before ours). */
static void ucm_init_once(void);
static pthread_once_t ucm_init_control = PTHREAD_ONCE_INIT;
static void ucm_ensure_init(void) {
    pthread_once(&ucm_init_control, ucm_init_once);
}
__attribute__((constructor)) static void ucm_init(void) {
    ucm_ensure_init();
}

static void ucm_init_once(void) {
    /* Every variable is checked now, before main: the core's HEAPHOOK_LOG_LEVEL and
     * HEAPHOOK_LOG_FILE too (read with the report fd), not at the first line logged. */
    (void)heaphook_report_fd();
    static const char *const levels[] = {"error", "warn", "info", "debug", "trace"};
    ucm_log_channel.level = heaphook_env_choice("HEAPHOOK_MEM_LOG_LEVEL", "UCX_MEM_LOG_LEVEL",
                                                levels, 5, HEAPHOOK_LOG_WARN);
    ucm_events_enabled = heaphook_env_bool("HEAPHOOK_MEM_EVENTS", "UCX_MEM_EVENTS", true);
    ucm_reloc_enabled = heaphook_env_bool("HEAPHOOK_MEM_RELOC_HOOKS", "UCX_MEM_RELOC_HOOKS", true);
    ucm_malloc_hooks = heaphook_env_bool("HEAPHOOK_MEM_MALLOC_HOOKS", "UCX_MEM_MALLOC_HOOKS", true);
    static const char *const modes[] = {"auto", "preload", "reloc", "bistro"};
    ucm_hook_mode = heaphook_env_choice("HEAPHOOK_MEM_MMAP_HOOK_MODE", "UCX_MEM_MMAP_HOOK_MODE",
                                        modes, 4, UCM_HOOK_AUTO);
    ucm_alloc_align = heaphook_env_size("HEAPHOOK_MEM_ALLOC_ALIGN", "UCX_MEM_ALLOC_ALIGN",
                                        UCM_DEFAULT_ALLOC_ALIGN);
    if (ucm_alloc_align == 0 || (ucm_alloc_align & (ucm_alloc_align - 1)) != 0) {
        const char *name = heaphook_env_get("HEAPHOOK_MEM_ALLOC_ALIGN", NULL)
                               ? "HEAPHOOK_MEM_ALLOC_ALIGN"
                               : "UCX_MEM_ALLOC_ALIGN";
        heaphook_config_fail(name, heaphook_env_get(name, NULL), "a power of two", "64");
    }
    ucm_page();
    ucm_resolve_brk();
    /* glibc's __curbrk is the break of the initial namespace's C library: used only when this
     * library is in that namespace (not dlmopen'ed elsewhere, where glibc's sbrk refuses). */
    Dl_info info;
    struct link_map *self = NULL;
    Lmid_t lmid = -1;
    if (dladdr1((void *)ucm_init, &info, (void **)&self, RTLD_DL_LINKMAP) && self != NULL &&
        dlinfo(self, RTLD_DI_LMID, &lmid) == 0 && lmid == LM_ID_BASE) {
        ucm_curbrk = (void **)dlsym(RTLD_DEFAULT, "__curbrk");
    }
    ucm_log_debug("sbrk/brk in hooks: %s",
                  ucm_curbrk ? "inline, glibc's __curbrk" : "the C library's");
    ucm_readers_init();
    ucm_fork_register();
}
