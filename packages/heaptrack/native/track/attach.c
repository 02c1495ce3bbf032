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
 *
 * Attached with a collector (heaphook record -p), the process watches its connection on a
 * thread of its own: when the collector hangs up (killed, or ended because heaphook record was
 * killed), recording stops at once and the process detaches itself, so nothing stays traced
 * and the next attach is accepted. That thread ends at the next detach or attach.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "fork.h"
#include "heaphook/heaptrack.h"
#include "heaphook/log.h"
#include "heaphook/reloc.h"
#include "trace.h"
#include "tracer.h"
#include "vm.h"

static pthread_mutex_t g_attach_lock = PTHREAD_MUTEX_INITIALIZER;
static heaphook_reloc_handle *g_patches[HH_HOOK_COUNT];
static bool g_attached;

/* The collector's watch: its thread, the descriptor that wakes it to end, and whether it is to
 * end (set before the wake-up; read by the thread between polls and while it waits for the
 * lock). The thread polls the tracer's socket itself: the socket is closed only by a detach,
 * which ends the thread first (hh_watch_end), or by a fork child, which has no such thread. */
static pthread_t g_watch;
static bool g_watching;
static int g_watch_wake = -1;
static atomic_bool g_watch_ending;

/* Milliseconds between tries of the attach lock, while a detach or attach may hold it. */
#define HH_WATCH_LOCK_RETRY_MS 1

/* Fork (fork.c's lock order: this lock first, the GOT patcher's after it): a fork waits for an
 * attach or detach in progress to finish, so the child sees the tracer attached or not. */
#define HH_ATTACH_LOCK_NAME "the attach lock (track/attach.c)"

/* Its rank (track/fork.h) is checked in a debug build. */
static void hh_attach_lock_take(void) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HEAPHOOK_LOCK_RANK_ATTACH, HH_ATTACH_LOCK_NAME);
    pthread_mutex_lock(&g_attach_lock);
}

static void hh_attach_lock_give(void) {
    pthread_mutex_unlock(&g_attach_lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HEAPHOOK_LOCK_RANK_ATTACH);
}

void hh_attach_prefork(void) {
    hh_attach_lock_take();
}

void hh_attach_postfork_parent(void) {
    hh_attach_lock_give();
}

void hh_attach_postfork_child(void) {
    pthread_mutex_init(&g_attach_lock, NULL);
    HEAPHOOK_LOCK_RANK_RELEASE(
        HEAPHOOK_LOCK_RANK_ATTACH); /* the forking thread's prefork took it */
    if (g_watching) {               /* the parent's watch; the child has no such thread */
        close(g_watch_wake);
        g_watch_wake = -1;
        g_watching = false;
    }
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

/* Detaches a process whose collector hung up, as heaphook_heaptrack_detach would; with the
 * attach lock held. */
static void hh_detach_locked(void) {
    hh_busy++;
    hh_vm_stop();
    hh_unpatch_all();
    hh_busy--;
    hh_tracer_attach_finish();
    g_attached = false;
}

static void *hh_watch_main(void *arg) {
    int socket_fd = (int)(intptr_t)arg;
    prctl(PR_SET_NAME, "heaphook-watch"); /* what it is, in ps and /proc/PID/task */
    struct pollfd fds[2] = {{socket_fd, POLLRDHUP, 0}, {g_watch_wake, POLLIN, 0}};
    for (;;) {
        int n = poll(fds, 2, -1);
        if (atomic_load(&g_watch_ending)) return NULL;
        if (n < 0) continue; /* EINTR (signals are blocked: only a stop) */
        if (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) break;
        if (fds[0].revents & POLLIN) { /* a collector never writes after the hello: drop it */
            char junk[64];
            if (recv(socket_fd, junk, sizeof junk, MSG_DONTWAIT) == 0) break;
        }
    }
    hh_tracer_collector_hung_up();
    /* A detach in progress holds the lock and ends this thread: it is tried, never waited for. */
    while (!atomic_load(&g_watch_ending)) {
        if (pthread_mutex_trylock(&g_attach_lock) == 0) {
            HEAPHOOK_LOCK_RANK_ACQUIRED(HEAPHOOK_LOCK_RANK_ATTACH, HH_ATTACH_LOCK_NAME);
            if (g_attached && !atomic_load(&g_watch_ending)) {
                hh_detach_locked();
                heaphook_log_error(
                    "heaptrack: detached (the collector is gone); a new heaphook record -p may "
                    "attach again");
                heaphook_log_release_stderr(); /* the last line of this attach */
            }
            hh_attach_lock_give();
            return NULL;
        }
        struct timespec pause = {0, HH_WATCH_LOCK_RETRY_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* Starts the collector's watch, with the attach lock held and hh_busy raised (pthread_create
 * allocates). Without it (no thread or descriptor left) the attach stands: only the self-detach
 * is missing, and a send that fails still stops recording. */
static void hh_watch_start(void) {
    int socket_fd = hh_tracer_collector_socket();
    if (socket_fd < 0) return;
    g_watch_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (g_watch_wake < 0) return;
    atomic_store(&g_watch_ending, false);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the program's threads */
    g_watching = pthread_create(&g_watch, NULL, hh_watch_main, (void *)(intptr_t)socket_fd) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!g_watching) {
        close(g_watch_wake);
        g_watch_wake = -1;
    }
}

/* Ends the collector's watch (it may have detached the process already), with the attach lock
 * held: the thread never waits for the lock, so the join cannot wait for us. */
static void hh_watch_end(void) {
    if (!g_watching) return;
    atomic_store(&g_watch_ending, true);
    uint64_t one = 1;
    ssize_t wrote = write(g_watch_wake, &one, sizeof one);
    (void)wrote;
    pthread_join(g_watch, NULL);
    close(g_watch_wake);
    g_watch_wake = -1;
    g_watching = false;
}

/* attach and attach_collector: one of where (standalone) or collector is used. */
static int hh_attach(const char *where, const char *collector) {
    if (hh_hooks_interposed()) return HEAPHOOK_HEAPTRACK_PRELOADED;
    hh_attach_lock_take();
    int rc = HEAPHOOK_HEAPTRACK_OK;
    hh_watch_end(); /* a watch that detached the process has ended, or ends now */
    if (g_attached) {
        rc = HEAPHOOK_HEAPTRACK_ATTACHED;
        goto out;
    }
    heaphook_log_retake_stderr(); /* let go of at the last detach: this attach may report */
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
    if (collector != NULL) hh_watch_start();
    hh_busy--;
    g_attached = true;
out:
    if (!g_attached) heaphook_log_release_stderr(); /* a refused attach holds nothing either */
    hh_attach_lock_give();
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
    hh_attach_lock_take();
    int rc = HEAPHOOK_HEAPTRACK_NOT_ATTACHED;
    hh_busy++;
    hh_watch_end();
    hh_busy--;
    if (g_attached) {
        hh_detach_locked();
        rc = HEAPHOOK_HEAPTRACK_OK;
    }
    /* The library stays loaded: it keeps no copy of stderr (unless preloaded: the exit report) */
    if (!hh_hooks_interposed()) heaphook_log_release_stderr();
    hh_attach_lock_give();
    return rc;
}

HH_EXPORT const char *heaphook_heaptrack_log_path(void) {
    return hh_tracer_log_path();
}
