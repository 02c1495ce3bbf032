/*
 * attach.c — heaphook_heaptrack_attach / _attach_collector / _detach (heaphook/heaptrack.h): the
 * tracer installed into a running process by GOT patching, and taken out again.
 *
 * Order of an attach: the log and its drain thread first, then the forwarding targets (the
 * functions the GOTs lead to now, as heaphook_reloc_patch reports them), then the patches, so
 * that the first call reaching a hook finds everything ready. Detach undoes the patches in the
 * reverse order before the log is finished; a thread that read a GOT entry just before it was
 * restored still runs a hook, which forwards the call and records nothing once the tracer has
 * finished (tracer.c's state), so the library is never unloaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "attach.h"
#include "heaphook/heaptrack.h"
#include "heaphook/log.h"
#include "heaphook/reloc.h"
#include "trace.h"
#include "tracer.h"
#include "vm.h"

static pthread_mutex_t g_attach_lock = PTHREAD_MUTEX_INITIALIZER;
static heaphook_reloc_handle *g_patches[HH_HOOK_COUNT];
static bool g_attached;

/* Fork (fork.c's lock order: this lock first, the GOT patcher's after it): a fork waits for an
 * attach or detach in progress to finish, so the child sees the tracer attached or not. */
void hh_attach_prefork(void) {
    pthread_mutex_lock(&g_attach_lock);
}

void hh_attach_postfork_parent(void) {
    pthread_mutex_unlock(&g_attach_lock);
}

void hh_attach_postfork_child(void) {
    pthread_mutex_init(&g_attach_lock, NULL);
}

/* The order of the patches (indices into hh_hooks): the functions that free first, those that
 * only allocate last; the unpatching goes in reverse. So a block allocated while traced has its
 * free traced too, as long as it is freed before the detach, and a free traced of a block the
 * log never saw allocated is one of before the attach (the report counts those apart). */
static const int g_patch_order[HH_HOOK_COUNT] = {1, 10, 3, 4, 0, 2, 5, 6, 7, 8, 9};
_Static_assert(HH_HOOK_COUNT == 11, "g_patch_order lists every hook of hooks.c once");

static void hh_unpatch_all(void) {
    for (int k = HH_HOOK_COUNT - 1; k >= 0; k--) {
        int i = g_patch_order[k];
        if (g_patches[i] != NULL) heaphook_reloc_unpatch(g_patches[i]);
        g_patches[i] = NULL;
    }
}

/* attach and attach_collector: one of where (standalone) or collector is used. */
static int hh_attach(const char *where, const char *collector) {
    if (hh_hooks_interposed()) return HEAPHOOK_HEAPTRACK_PRELOADED;
    pthread_mutex_lock(&g_attach_lock);
    int rc = HEAPHOOK_HEAPTRACK_OK;
    if (g_attached) {
        rc = HEAPHOOK_HEAPTRACK_ATTACHED;
        goto out;
    }
    /* The hooks forward to what the process calls now: glibc, or a preloaded backend. Our own
     * object is never patched (its calls to malloc must not come back to its hooks). */
    heaphook_reloc_skip((const void *)hh_unpatch_all);
    void *originals[HH_HOOK_COUNT];
    for (int i = 0; i < HH_HOOK_COUNT; i++) {
        if (heaphook_reloc_resolve(hh_hooks[i].name, &originals[i]) != HEAPHOOK_RELOC_OK) {
            originals[i] = dlsym(RTLD_DEFAULT, hh_hooks[i].name);
        }
        if (originals[i] == NULL || originals[i] == hh_hooks[i].function) {
            /* our own hooks serve the process already (loaded RTLD_GLOBAL before libc?) */
            rc = HEAPHOOK_HEAPTRACK_PRELOADED;
            goto out;
        }
    }
    hh_hooks_forward_to(originals);
    if (!hh_tracer_attach_start(where, collector)) {
        rc = collector != NULL ? HEAPHOOK_HEAPTRACK_NO_COLLECTOR : HEAPHOOK_HEAPTRACK_NO_LOG;
        goto out;
    }
    hh_busy++; /* the patcher's own allocations, once malloc is redirected, are not traced */
    for (int k = 0; k < HH_HOOK_COUNT; k++) {
        int i = g_patch_order[k];
        int error =
            heaphook_reloc_patch(hh_hooks[i].name, hh_hooks[i].function, NULL, &g_patches[i]);
        if (error != HEAPHOOK_RELOC_OK) {
            heaphook_log_error("heaptrack: cannot redirect %s: %s", hh_hooks[i].name,
                               heaphook_reloc_strerror(error));
            hh_unpatch_all();
            hh_busy--;
            hh_tracer_attach_finish();
            rc = HEAPHOOK_HEAPTRACK_PATCH_FAILED;
            goto out;
        }
    }
    hh_vm_start(); /* mapped memory, when ucm-hooks is loaded (hh_busy still held) */
    hh_busy--;
    g_attached = true;
out:
    pthread_mutex_unlock(&g_attach_lock);
    return rc;
}

HH_EXPORT int heaphook_heaptrack_attach(const char *log_path_or_dir) {
    return hh_attach(log_path_or_dir, NULL);
}

HH_EXPORT int heaphook_heaptrack_attach_collector(const char *collector_socket) {
    if (collector_socket == NULL || collector_socket[0] == '\0') {
        errno = EINVAL;
        return HEAPHOOK_HEAPTRACK_NO_COLLECTOR;
    }
    return hh_attach(NULL, collector_socket);
}

HH_EXPORT int heaphook_heaptrack_detach(void) {
    pthread_mutex_lock(&g_attach_lock);
    int rc = HEAPHOOK_HEAPTRACK_NOT_ATTACHED;
    if (g_attached) {
        hh_busy++;
        hh_vm_stop();
        hh_unpatch_all();
        hh_busy--;
        hh_tracer_attach_finish();
        g_attached = false;
        rc = HEAPHOOK_HEAPTRACK_OK;
    }
    pthread_mutex_unlock(&g_attach_lock);
    return rc;
}

HH_EXPORT const char *heaphook_heaptrack_log_path(void) {
    return hh_tracer_log_path();
}
