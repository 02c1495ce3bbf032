/*
 * vm.c — mapped-memory events: when ucm-hooks (libheaphook_ucm.so) is in the process, the
 * tracer registers a handler for its VM_MAPPED and VM_UNMAPPED events and records each one
 * (time, thread, call stack, address, size) beside the allocation events. The report charts
 * the memory the program has mapped next to its heap: mappings a malloc tracer never sees
 * (python's arenas, V8's pages, a heaphook backend's pool areas).
 *
 * ucm-hooks is found, not linked: dlsym(RTLD_DEFAULT) looks for its registration function, so
 * the tracer has no dependency on it and works the same without it. Preload it first
 * (LD_PRELOAD="libheaphook_ucm.so libheaphook_heaptrack.so", or `heaphook record`, which
 * does this when @heaphook/ucm-hooks is installed) so that its hooks are the process's mmap;
 * attach() loads it RTLD_GLOBAL before attaching (src/record/attach.ts), and it installs itself by
 * GOT patching then. Either way glibc malloc's own mappings are events too (ucm-hooks patches
 * the C library's entries).
 *
 * Which events are the program's: ucm-hooks raises none while a handler runs on the thread,
 * and the tracer's own mappings go straight to the kernel (hh_sys_mmap), so what reaches the
 * handler is the program's, except what the tracer's own allocations make its next allocator
 * map: those come with hh_busy set outside a hook (hh_in_hook clear) and are left out.
 */
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "heaphook/config.h"
#include "heaphook/log.h"
#include "heaphook/ucm.h"
#include "modules.h"
#include "stacks.h"
#include "trace.h"
#include "tracer.h"
#include "unwinder.h"
#include "vm.h"

/* ucm-hooks' ABI is its header, heaphook/ucm.h (its values are libucm's). Its functions are
 * declared there but never linked: they are found with dlsym, so the types below are pointers to
 * functions of those declared types. */

/* Handlers of VM events all run, whatever their priority: last, after any other handler. */
#define HH_VM_PRIORITY 1000
#define HH_VM_EVENTS (HEAPHOOK_UCM_EVENT_VM_MAPPED | HEAPHOOK_UCM_EVENT_VM_UNMAPPED)

static __typeof__(heaphook_ucm_set_event_handler) *g_set_handler;
static __typeof__(heaphook_ucm_unset_event_handler) *g_unset_handler;
static bool g_registered;

/* A failed dl lookup (ours, or ucm-hooks' while it installs) leaves an error message that glibc
 * malloc'ed here, untraced, and frees at the program's next dl call, traced: a free of a block
 * the log never saw. Two dlerror calls release it now (the first reports it, the second frees
 * it and the thread's error state). Called with hh_busy set. */
static void hh_vm_forget_dl_error(void) {
    (void)dlerror();
    (void)dlerror();
}

/* ---- Configuration ------------------------------------------------------------------------ */

enum { HH_VM_AUTO = 0, HH_VM_YES = 1, HH_VM_NO = 2 };

bool hh_vm_configure(bool attaching) {
    static const char *const choices[] = {"auto", "yes", "no"};
    int choice = heaphook_env_choice("HEAPHOOK_TRACE_VM", NULL, choices, 3, HH_VM_AUTO);
    if (choice == HH_VM_NO) return false;
    g_set_handler =
        (__typeof__(g_set_handler))dlsym(RTLD_DEFAULT, "heaphook_ucm_set_event_handler");
    g_unset_handler =
        (__typeof__(g_unset_handler))dlsym(RTLD_DEFAULT, "heaphook_ucm_unset_event_handler");
    if (g_set_handler == NULL && choice == HH_VM_YES && attaching) {
        heaphook_log(HEAPHOOK_LOG_WARN,
                     "heaptrack: HEAPHOOK_TRACE_VM=yes but ucm-hooks is not "
                     "loaded: attach() records no mapped memory");
    } else if (g_set_handler == NULL && choice == HH_VM_YES) {
        heaphook_config_fail("HEAPHOOK_TRACE_VM", "yes",
                             "auto or no: yes needs libheaphook_ucm.so loaded, first in LD_PRELOAD",
                             "LD_PRELOAD=\"libheaphook_ucm.so libheaphook_heaptrack.so\"");
    }
    return g_set_handler != NULL;
}

/* ---- One record --------------------------------------------------------------------------- */

/* One VM record: the time it happened, this thread, the call stack from regs. */
static void hh_vm_write(bool mapped, uintptr_t addr, size_t size, uint64_t time,
                        const hh_regs *regs) {
    uint32_t stack = hh_cfg.stacks ? hh_stack_capture(hh_cfg.depth, regs) : 0;
    hh_rec_vm *r = stack == UINT32_MAX ? NULL : hh_tracer_reserve(sizeof *r);
    if (r == NULL) return;
    r->time = time;
    r->tid = hh_tid();
    r->stack = stack;
    r->mapped = mapped;
    r->pad = 0;
    r->addr = addr;
    r->size = size;
    hh_tracer_commit(r, HH_REC_VM);
}

/* ---- Events inside a hook that holds a record (vm.h) -------------------------------------- */

/* A free unmaps once at most, a realloc maps and unmaps (or remaps) once each, and a trim after
 * either shrinks the heap once: four is room for what one call can raise. One more is counted
 * as dropped (the END record's count), never waited for. */
#define HH_VM_HELD_MAX 4

typedef struct {
    uintptr_t addr;
    size_t size;
    uint64_t time;
    bool mapped;
} hh_vm_held;

HH_TLS bool hh_vm_holding_record;
HH_TLS int hh_vm_held_count;
static HH_TLS hh_vm_held t_held[HH_VM_HELD_MAX];

static void hh_vm_note(bool mapped, uintptr_t addr, size_t size) {
    if (hh_vm_held_count == HH_VM_HELD_MAX) {
        hh_tracer_count_dropped();
        return;
    }
    t_held[hh_vm_held_count++] = (hh_vm_held){addr, size, hh_now(), mapped};
}

void hh_vm_record_held(void) {
    assert(!hh_vm_holding_record);
    hh_regs regs;
    HH_CAPTURE_REGS(regs);
    for (int k = 0; k < hh_vm_held_count; k++)
        hh_vm_write(t_held[k].mapped, t_held[k].addr, t_held[k].size, t_held[k].time, &regs);
    hh_vm_held_count = 0;
}

/* ---- The handler -------------------------------------------------------------------------- */

static void hh_vm_event(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event, void *arg) {
    (void)arg;
    if (hh_busy && !hh_in_hook) return; /* the tracer's own work */
    if (event->vm_mapped.size == 0 || !hh_tracer_active()) return;
    /* vm_unmapped has the same layout */
    const bool mapped = type == HEAPHOOK_UCM_EVENT_VM_MAPPED;
    const uintptr_t addr = (uintptr_t)event->vm_mapped.address;
    if (hh_vm_holding_record) { /* recorded by the hook once its own record is out (vm.h) */
        hh_vm_note(mapped, addr, event->vm_mapped.size);
        return;
    }
    int saved_errno = errno;
    int saved_busy = hh_busy;
    hh_busy = 1; /* the stack walk may allocate: not the program's */
    hh_regs regs;
    HH_CAPTURE_REGS(regs);
    hh_vm_write(mapped, addr, event->vm_mapped.size, hh_now(), &regs);
    hh_busy = saved_busy;
    errno = saved_errno;
}

void hh_vm_start(void) {
    if (!hh_cfg.vm || g_set_handler == NULL) return;
    uintptr_t lo, hi;
    if (hh_modules_range_of((uintptr_t)g_set_handler, &lo, &hi)) hh_unwind_skip_also(lo, hi);
    heaphook_ucm_status_t status = g_set_handler(HH_VM_EVENTS, HH_VM_PRIORITY, hh_vm_event, NULL);
    hh_vm_forget_dl_error();
    g_registered = status == HEAPHOOK_UCM_OK;
    if (status != HEAPHOOK_UCM_OK) {
        heaphook_log(HEAPHOOK_LOG_WARN,
                     "heaptrack: ucm-hooks refused the VM event handler (status %d): mapped "
                     "memory is not recorded",
                     (int)status);
    }
}

void hh_vm_stop(void) {
    if (!g_registered || g_unset_handler == NULL) return;
    g_unset_handler(HH_VM_EVENTS, hh_vm_event, NULL);
    g_registered = false;
}
