/*
 * attach.c — heaphook_heaptrack_attach / _detach (heaphook/heaptrack.h): the tracer installed
 * into a running process by GOT patching, and taken out again.
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

static void hh_unpatch_all(void) {
    for (int i = HH_HOOK_COUNT - 1; i >= 0; i--) {
        if (g_patches[i] != NULL) heaphook_reloc_unpatch(g_patches[i]);
        g_patches[i] = NULL;
    }
}

HH_EXPORT int heaphook_heaptrack_attach(const char *log_path_or_dir) {
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
    if (!hh_tracer_attach_start(log_path_or_dir)) {
        rc = HEAPHOOK_HEAPTRACK_NO_LOG;
        goto out;
    }
    hh_busy++; /* the patcher's own allocations, once malloc is redirected, are not traced */
    for (int i = 0; i < HH_HOOK_COUNT; i++) {
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
