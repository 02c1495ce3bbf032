/*
 * extras.c — figures of other heaphook libraries in the process, sent with STATS when they are
 * loaded: the bytes ucm-hooks sees mapped and unmapped (its VM_MAPPED / VM_UNMAPPED events:
 * what the process maps beside its heap: python's arenas, V8's pages, a backend's pool
 * growth), and heaptrack's last leak check.
 *
 * Both are found, not linked (dlsym(RTLD_DEFAULT)), so the client depends on neither. The VM
 * handler runs inside the process's mmap calls: two relaxed atomic additions, nothing else.
 * The leak figures are read with heaphook_leak_get_summary, which never waits for a check in
 * progress (that round then sends the previous figures).
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "../frames.h"
#include "client.h"

/* ---- The part of ucm-hooks' ABI used here (heaphook/ucm.h; the values are libucm's) ------ */
#define HH_UCM_EVENT_VM_MAPPED (1 << 16)
#define HH_UCM_EVENT_VM_UNMAPPED (1 << 17)
#define HH_UCM_OK 0
/* Handlers of VM events all run whatever their priority: last, after any other handler. */
#define HH_VM_PRIORITY 1000

typedef struct hh_ucm_vm_event { /* heaphook_ucm_event_t's vm_mapped / vm_unmapped */
    void *address;
    size_t size;
} hh_ucm_vm_event;
typedef void (*hh_ucm_callback)(int type, hh_ucm_vm_event *event, void *arg);
typedef int (*hh_ucm_set_handler_fn)(int events, int priority, hh_ucm_callback cb, void *arg);

/* ---- The part of heaptrack's leak API used here (heaphook/leaks.h) ------------------------ */
typedef struct hh_leak_summary {
    unsigned long long checks, live_blocks, reachable_blocks, reachable_bytes, leaked_blocks,
        leaked_bytes;
} hh_leak_summary;
typedef int (*hh_leak_summary_fn)(hh_leak_summary *out);

static _Atomic uint64_t g_vm_mapped, g_vm_unmapped;
static bool g_vm_counted;
static hh_leak_summary_fn g_leak_summary;
static hh_leak_summary g_last_leaks; /* the keeper thread's: the last figures read */

static void hh_count_vm(int type, hh_ucm_vm_event *event, void *arg) {
    (void)arg;
    _Atomic uint64_t *total = type == HH_UCM_EVENT_VM_MAPPED ? &g_vm_mapped : &g_vm_unmapped;
    atomic_fetch_add_explicit(total, event->size, memory_order_relaxed);
}

void hh_agent_extras_start(void) {
    hh_ucm_set_handler_fn set_handler =
        (hh_ucm_set_handler_fn)dlsym(RTLD_DEFAULT, "heaphook_ucm_set_event_handler");
    if (set_handler != NULL)
        g_vm_counted = set_handler(HH_UCM_EVENT_VM_MAPPED | HH_UCM_EVENT_VM_UNMAPPED,
                                   HH_VM_PRIORITY, hh_count_vm, NULL) == HH_UCM_OK;
    g_leak_summary = (hh_leak_summary_fn)dlsym(RTLD_DEFAULT, "heaphook_leak_get_summary");
}

void hh_agent_extras_fill(hh_agent_stats *f) {
    if (g_vm_counted) {
        f->extras |= HH_AGENT_EXTRA_VM;
        f->vm_mapped_bytes_total = atomic_load_explicit(&g_vm_mapped, memory_order_relaxed);
        f->vm_unmapped_bytes_total = atomic_load_explicit(&g_vm_unmapped, memory_order_relaxed);
    }
    if (g_leak_summary != NULL) {
        hh_leak_summary now;
        int r = g_leak_summary(&now);
        if (r < 0) return; /* leak checking is off */
        if (r == 0) g_last_leaks = now;
        f->extras |= HH_AGENT_EXTRA_LEAKS;
        f->leak_checks_total = g_last_leaks.checks;
        f->leaked_blocks = g_last_leaks.leaked_blocks;
        f->leaked_bytes = g_last_leaks.leaked_bytes;
    }
}
