/*
 * heaphook/ucm.h — memory events, with the semantics of UCX's libucm event API.
 *
 * Link with (or preload) libheaphook_ucm.so (`heaphook path ucm-hooks`). Handlers registered
 * for a mask of events form one chain ordered by priority (ascending; equal priorities in order
 * of registration). For the native events (MMAP ... BRK) the real call is made at priority 0:
 * handlers with a negative priority run before it and may change the parameters or set the
 * result (then the real call is not made), handlers with priority >= 0 run after it and see the
 * result. A result is "set" when it differs from the failure value (MAP_FAILED, -1, (void*)-1).
 *
 * Derived events: VM_UNMAPPED is raised before memory goes away (munmap, mmap MAP_FIXED over a
 * range, mremap's old range, shmat SHM_REMAP, shmdt, shrinking sbrk/brk, madvise DONTNEED /
 * REMOVE / FREE); VM_MAPPED after memory exists (mmap, mremap's new range, shmat, growing
 * sbrk/brk). A failed call raises no VM_MAPPED.
 *
 * Events made while a handler runs on the same thread (a handler calling mmap, or malloc that
 * maps) are not raised: the call goes straight to the system, so handlers never recurse.
 */
#ifndef HEAPHOOK_UCM_H
#define HEAPHOOK_UCM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The same bit values as libucm's ucm_event_type_t. */
typedef enum heaphook_ucm_event_type {
    HEAPHOOK_UCM_EVENT_NONE = 0,
    HEAPHOOK_UCM_EVENT_MMAP = 1 << 0,
    HEAPHOOK_UCM_EVENT_MUNMAP = 1 << 1,
    HEAPHOOK_UCM_EVENT_MREMAP = 1 << 2,
    HEAPHOOK_UCM_EVENT_SHMAT = 1 << 3,
    HEAPHOOK_UCM_EVENT_SHMDT = 1 << 4,
    HEAPHOOK_UCM_EVENT_SBRK = 1 << 5,
    HEAPHOOK_UCM_EVENT_MADVISE = 1 << 6,
    HEAPHOOK_UCM_EVENT_BRK = 1 << 7,
    HEAPHOOK_UCM_EVENT_VM_MAPPED = 1 << 16,
    HEAPHOOK_UCM_EVENT_VM_UNMAPPED = 1 << 17,
    /* libucm's GPU memory-type events: accepted in masks, never raised by heaphook. */
    HEAPHOOK_UCM_EVENT_MEM_TYPE_ALLOC = 1 << 20,
    HEAPHOOK_UCM_EVENT_MEM_TYPE_FREE = 1 << 21,
    /* Register without installing the hooks (they may be installed already). */
    HEAPHOOK_UCM_EVENT_FLAG_NO_INSTALL = 1 << 24,
    /* libucm: report existing allocations of MEM_TYPE_ALLOC; accepted and ignored. */
    HEAPHOOK_UCM_EVENT_FLAG_EXISTING_ALLOC = 1 << 25,
} heaphook_ucm_event_type_t;

#define HEAPHOOK_UCM_NATIVE_EVENTS 0xff
#define HEAPHOOK_UCM_VM_EVENTS (HEAPHOOK_UCM_EVENT_VM_MAPPED | HEAPHOOK_UCM_EVENT_VM_UNMAPPED)

/* The same member names and layout as libucm's ucm_event_t. */
typedef union heaphook_ucm_event {
    struct {
        void *result;
        void *address;
        size_t size;
        int prot;
        int flags;
        int fd;
        off_t offset;
    } mmap;
    struct {
        int result;
        void *address;
        size_t size;
    } munmap;
    struct {
        void *result;
        void *address;
        size_t old_size;
        size_t new_size;
        int flags;
        void *new_address;
    } mremap;
    struct {
        void *result;
        int shmid;
        const void *shmaddr;
        int shmflg;
    } shmat;
    struct {
        int result;
        const void *shmaddr;
    } shmdt;
    struct {
        void *result;
        intptr_t increment;
    } sbrk;
    struct {
        int result;
        void *addr;
    } brk;
    struct {
        int result;
        void *addr;
        size_t length;
        int advice;
    } madvise;
    struct {
        void *address;
        size_t size;
    } vm_mapped, vm_unmapped;
} heaphook_ucm_event_t;

typedef void (*heaphook_ucm_event_callback_t)(heaphook_ucm_event_type_t event_type,
                                              heaphook_ucm_event_t *event, void *arg);

/* Status values: the numbers of UCX's ucs_status_t. */
typedef enum heaphook_ucm_status {
    HEAPHOOK_UCM_OK = 0,
    HEAPHOOK_UCM_ERR_NO_MEMORY = -4,
    HEAPHOOK_UCM_ERR_INVALID_PARAM = -5,
    HEAPHOOK_UCM_ERR_NO_ELEM = -12,
    HEAPHOOK_UCM_ERR_BUSY = -15,
    HEAPHOOK_UCM_ERR_UNSUPPORTED = -22,
} heaphook_ucm_status_t;

/* Registers callback for events (a mask), installing the hooks first unless
 * FLAG_NO_INSTALL. UNSUPPORTED when events are disabled (HEAPHOOK_MEM_EVENTS=no) or the hooks
 * cannot be installed; NO_MEMORY beyond 64 handlers. */
heaphook_ucm_status_t heaphook_ucm_set_event_handler(int events, int priority,
                                                     heaphook_ucm_event_callback_t callback,
                                                     void *arg);
/* Removes events from the handlers registered with (callback, arg); once it returns, callback
 * is not called for them any more (do not call it from inside a handler). */
void heaphook_ucm_unset_event_handler(int events, heaphook_ucm_event_callback_t callback,
                                      void *arg);
/* Installs the hooks (if needed) and checks that each of events really fires when the process
 * makes the call. Returns OK, or UNSUPPORTED after one log line naming the ones that do not. */
heaphook_ucm_status_t heaphook_ucm_test_events(int events);
/* The events whose last self-test failed (0 when all fired). */
int heaphook_ucm_failed_events(void);

/* How the hooks are installed: "none" (not yet), "preload" (our definitions come first in the
 * process), "reloc" (GOT patching of every object and of objects dlopen'ed later). */
const char *heaphook_ucm_install_mode(void);

/* Removes the hooks the install put in place, when no handler is registered: the GOT entries
 * of reloc mode and the C library's patched entries get their previous contents back, and the
 * mode is "none" again (the next set_event_handler installs anew). Preloaded definitions stay
 * first in the process: nothing to undo there but the C library's entries. Returns OK, BUSY
 * while handlers remain, UNSUPPORTED (one log line) when a patch could not be undone. A thread
 * already inside a hook finishes its call; the library must stay loaded (it is -z nodelete). */
heaphook_ucm_status_t heaphook_ucm_uninstall(void);

/* Events the caller raises itself (libucm's external events): registering a handler for them
 * installs no hook; the caller reports with heaphook_ucm_vm_mmap / heaphook_ucm_vm_munmap. */
void heaphook_ucm_set_external_event(int events);
void heaphook_ucm_unset_external_event(int events);
/* Raises VM_MAPPED / VM_UNMAPPED for a range (the handlers only; nothing is mapped). */
void heaphook_ucm_vm_mmap(void *addr, size_t length);
void heaphook_ucm_vm_munmap(void *addr, size_t length);

/* The calls with their events (whatever the install mode): what the hooks run. */
void *heaphook_ucm_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset);
int heaphook_ucm_munmap(void *addr, size_t length);
void *heaphook_ucm_mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...);
void *heaphook_ucm_shmat(int shmid, const void *shmaddr, int shmflg);
int heaphook_ucm_shmdt(const void *shmaddr);
void *heaphook_ucm_sbrk(intptr_t increment);
int heaphook_ucm_brk(void *addr);
int heaphook_ucm_madvise(void *addr, size_t length, int advice);

/* The calls themselves, raising no event. */
void *heaphook_ucm_orig_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset);
int heaphook_ucm_orig_munmap(void *addr, size_t length);
void *heaphook_ucm_orig_mremap(void *old_address, size_t old_size, size_t new_size, int flags,
                               void *new_address);
void *heaphook_ucm_orig_shmat(int shmid, const void *shmaddr, int shmflg);
int heaphook_ucm_orig_shmdt(const void *shmaddr);
void *heaphook_ucm_orig_sbrk(intptr_t increment);
int heaphook_ucm_orig_brk(void *addr);
int heaphook_ucm_orig_madvise(void *addr, size_t length, int advice);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_UCM_H */
