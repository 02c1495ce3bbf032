/*
 * stream.c — a process's memory events streamed to a watcher (heaphook/ucm_watch.h).
 *
 * Inside the hooks, the stream's handler only copies the event into a lock-free ring (a
 * bounded multi-producer queue, one sequence number per slot, after Vyukov): no allocation, no
 * lock, no stdio, no write to the socket. A full ring drops the event and counts it. The
 * library's own thread ("heaphook-watch") drains the ring to the socket every 10 ms while it
 * stays empty, every 1 ms while events come, at once while a batch fills, and reports the drops.
 *
 * Threads and locks: the stream's state changes under watch_lock (start, stop, the thread's
 * setup and end, never in a hook). The thread is created before the handler is registered, so
 * its stack's mapping raises no event; it blocks every signal but the heaphook stop-the-world
 * ones (code patching stops threads with one) and the synchronous faults, so the program's
 * handlers never run on it. Its own calls raise no recorded event (watch_is_drainer).
 *
 * Fork: watch_lock is held across fork. A child gets no thread and no connection: the child
 * handler turns recording off and closes the child's copy of the socket. The handler stays
 * registered there, and the hooks and the ring with it, recording nothing (a later stream in
 * the child unsets it first). A child that execs starts afresh: under
 * HEAPHOOK_MEM_WATCH_SOCKET (inherited) it connects on its own.
 *
 * Exit: the library's destructor turns recording off and lets the thread send what is left
 * and END (waiting at most 2 s for a watcher that does not read); the hooks are not removed.
 */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/ucm.h"
#include "heaphook/ucm_watch.h"

#include "ucm_internal.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(struct heaphook_ucm_watch_hello) == 64, "hello is 64 bytes");
_Static_assert(sizeof(struct heaphook_ucm_watch_config) == 16, "config is 16 bytes");
_Static_assert(sizeof(struct heaphook_ucm_watch_record) == 56, "a record is 56 bytes");

#define WATCH_ALL_EVENTS (HEAPHOOK_UCM_NATIVE_EVENTS | HEAPHOOK_UCM_VM_EVENTS)
#define WATCH_PRIORITY 1000 /* after the call: the native events see its result */
#define WATCH_DRAIN_MS 10   /* between drains while the ring stays empty */
#define WATCH_BUSY_MS 1     /* while events keep coming */
#define WATCH_BATCH 128

/* ---- The ring ------------------------------------------------------------------------------ */

struct watch_slot {
    _Atomic uint64_t seq; /* == position: free for the producer of that position; == position
                             + 1: holds its record for the consumer */
    struct heaphook_ucm_watch_record record;
} __attribute__((aligned(64)));

struct watch_ring {
    struct watch_slot *slots;
    uint64_t mask;             /* capacity - 1 */
    size_t bytes;              /* of the mapping */
    _Atomic uint64_t tail;     /* next position to produce */
    uint64_t head;             /* next position to consume (the thread only) */
    _Atomic uint64_t dropped;  /* events lost to a full ring */
    _Atomic uint64_t recorded; /* events put into the ring */
};

/* Maps and initialises a ring of capacity slots (a power of two). The mapping is made with the
 * raw system call (no event). */
static bool watch_ring_init(struct watch_ring *ring, uint32_t capacity) {
    assert(capacity >= HEAPHOOK_UCM_WATCH_RING_MIN && (capacity & (capacity - 1)) == 0);
    size_t bytes = (size_t)capacity * sizeof(struct watch_slot);
    void *p = heaphook_ucm_orig_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    ring->slots = p;
    ring->mask = capacity - 1;
    ring->bytes = bytes;
    for (uint64_t i = 0; i < capacity; ++i) atomic_init(&ring->slots[i].seq, i);
    atomic_init(&ring->tail, 0);
    ring->head = 0;
    atomic_init(&ring->dropped, 0);
    atomic_init(&ring->recorded, 0);
    return true;
}

static void watch_ring_free(struct watch_ring *ring) {
    if (ring->slots != NULL) heaphook_ucm_orig_munmap(ring->slots, ring->bytes);
    ring->slots = NULL;
}

/* Any thread, inside a hook: lock-free; false (and counted) when the ring is full. */
static bool watch_ring_push(struct watch_ring *ring, const struct heaphook_ucm_watch_record *r) {
    uint64_t pos = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    for (;;) {
        struct watch_slot *slot = &ring->slots[pos & ring->mask];
        uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&ring->tail, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                slot->record = *r;
                atomic_store_explicit(&slot->seq, pos + 1, memory_order_release);
                atomic_fetch_add_explicit(&ring->recorded, 1, memory_order_relaxed);
                return true;
            }
        } else if (diff < 0) {
            atomic_fetch_add_explicit(&ring->dropped, 1, memory_order_relaxed);
            return false;
        } else {
            pos = atomic_load_explicit(&ring->tail, memory_order_relaxed);
        }
    }
}

/* The draining thread only: up to max records, in the order they were produced. */
static size_t watch_ring_pop(struct watch_ring *ring, struct heaphook_ucm_watch_record *out,
                             size_t max) {
    size_t n = 0;
    while (n < max) {
        struct watch_slot *slot = &ring->slots[ring->head & ring->mask];
        uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if (seq != ring->head + 1) break; /* empty, or its producer is still writing */
        out[n++] = slot->record;
        atomic_store_explicit(&slot->seq, ring->head + ring->mask + 1, memory_order_release);
        ++ring->head;
    }
    return n;
}

/* ---- The stream's state ------------------------------------------------------------------ */

enum { WATCH_IDLE, WATCH_RUNNING, WATCH_ENDING };

static struct {
    int state;           /* WATCH_*, under watch_lock */
    int fd;              /* the connection, -1 when none */
    int origin;          /* HEAPHOOK_UCM_WATCH_ORIGIN_* */
    int events;          /* the handler's mask, 0 while not registered */
    bool installed_here; /* the install mode was "none" before this stream */
    uint64_t start_ns;
    uint64_t dropped_reported; /* the thread only */
    struct watch_ring ring;
    _Atomic int recording;   /* the handler records (off in a forked child, at exit) */
    _Atomic int stop_reason; /* HEAPHOOK_UCM_WATCH_END_* asked for, 0 none */
    _Atomic int thread_done; /* the thread has sent END and will not touch the state */
} watch = {.fd = -1};
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread uint32_t watch_tid __attribute__((tls_model("initial-exec")));
static __thread int watch_is_drainer __attribute__((tls_model("initial-exec")));

static uint64_t watch_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- The handler (inside the hooks) ----------------------------------------------------- */

static void watch_handler(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *ev, void *arg) {
    (void)arg;
    if (!atomic_load_explicit(&watch.recording, memory_order_relaxed) || watch_is_drainer) return;
    int saved_errno = errno;
    struct heaphook_ucm_watch_record r;
    memset(&r, 0, sizeof r);
    r.type = (uint32_t)type;
    bool failed = false;
    switch (type) {
        case HEAPHOOK_UCM_EVENT_MMAP:
            failed = ev->mmap.result == MAP_FAILED;
            r.address = (uintptr_t)(failed ? ev->mmap.address : ev->mmap.result);
            r.size = ev->mmap.size;
            r.arg[0] = (uint32_t)ev->mmap.prot | (uint64_t)(uint32_t)ev->mmap.flags << 32;
            r.arg[1] = (uint64_t)(int64_t)ev->mmap.fd;
            break;
        case HEAPHOOK_UCM_EVENT_MUNMAP:
            failed = ev->munmap.result == -1;
            r.address = (uintptr_t)ev->munmap.address;
            r.size = ev->munmap.size;
            break;
        case HEAPHOOK_UCM_EVENT_MREMAP:
            failed = ev->mremap.result == MAP_FAILED;
            r.address = (uintptr_t)ev->mremap.result;
            r.size = ev->mremap.new_size;
            r.arg[0] = (uintptr_t)ev->mremap.address;
            r.arg[1] = ev->mremap.old_size;
            break;
        case HEAPHOOK_UCM_EVENT_SHMAT:
            failed = ev->shmat.result == (void *)-1;
            r.address = (uintptr_t)ev->shmat.result;
            r.arg[0] = (uint64_t)(int64_t)ev->shmat.shmid;
            r.arg[1] = (uint64_t)(int64_t)ev->shmat.shmflg;
            break;
        case HEAPHOOK_UCM_EVENT_SHMDT:
            failed = ev->shmdt.result == -1;
            r.address = (uintptr_t)ev->shmdt.shmaddr;
            break;
        case HEAPHOOK_UCM_EVENT_SBRK:
            failed = ev->sbrk.result == (void *)-1;
            r.address = (uintptr_t)ev->sbrk.result;
            r.size = (uint64_t)(int64_t)ev->sbrk.increment;
            break;
        case HEAPHOOK_UCM_EVENT_BRK:
            failed = ev->brk.result == -1;
            r.address = (uintptr_t)ev->brk.addr;
            break;
        case HEAPHOOK_UCM_EVENT_MADVISE:
            failed = ev->madvise.result == -1;
            r.address = (uintptr_t)ev->madvise.addr;
            r.size = ev->madvise.length;
            r.arg[0] = (uint64_t)(int64_t)ev->madvise.advice;
            break;
        default: /* VM_MAPPED, VM_UNMAPPED */
            r.address = (uintptr_t)ev->vm_mapped.address;
            r.size = ev->vm_mapped.size;
            break;
    }
    r.error = failed ? saved_errno : 0;
    if (watch_tid == 0) watch_tid = (uint32_t)HEAPHOOK_OS_UNOBSERVED(SYS_gettid, 0, 0, 0, 0, 0, 0);
    r.tid = watch_tid;
    r.time_ns = watch_now();
    watch_ring_push(&watch.ring, &r);
    errno = saved_errno;
}

/* ---- The thread --------------------------------------------------------------------------- */

/* Sends all of buf; false when the connection failed. MSG_NOSIGNAL: a watcher that went away
 * must not kill the process with SIGPIPE. */
static bool watch_send(const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(watch.fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

static bool watch_send_control(uint32_t type, uint64_t address, uint64_t size, uint64_t arg0,
                               uint64_t arg1) {
    struct heaphook_ucm_watch_record r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.time_ns = watch_now();
    r.address = address;
    r.size = size;
    r.arg[0] = arg0;
    r.arg[1] = arg1;
    return watch_send(&r, sizeof r);
}

static int watch_mode_code(void) {
    const char *mode = heaphook_ucm_install_mode();
    if (strcmp(mode, "preload") == 0) return HEAPHOOK_UCM_WATCH_MODE_PRELOAD;
    if (strcmp(mode, "reloc") == 0) return HEAPHOOK_UCM_WATCH_MODE_RELOC;
    if (strcmp(mode, "bistro") == 0) return HEAPHOOK_UCM_WATCH_MODE_BISTRO;
    return HEAPHOOK_UCM_WATCH_MODE_NONE;
}

/* The handshake, the ring and the handler: 0, or the END reason to finish with. On the
 * constructor's thread (HEAPHOOK_MEM_WATCH_SOCKET) or the stream's own. */
static int watch_setup(void) {
    struct heaphook_ucm_watch_hello hello;
    memset(&hello, 0, sizeof hello);
    memcpy(hello.magic, HEAPHOOK_UCM_WATCH_MAGIC, sizeof hello.magic);
    hello.version = HEAPHOOK_UCM_WATCH_VERSION;
    hello.hello_size = sizeof hello;
    hello.record_size = sizeof(struct heaphook_ucm_watch_record);
    hello.pid = (uint32_t)getpid();
    hello.start_ns = watch.start_ns;
    hello.origin = (uint32_t)watch.origin;
    if (!watch_send(&hello, sizeof hello)) return HEAPHOOK_UCM_WATCH_END_IO;
    struct heaphook_ucm_watch_config config;
    size_t have = 0;
    while (have < sizeof config) {
        ssize_t n = recv(watch.fd, (char *)&config + have, sizeof config - have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ucm_log_warn("watch: the watcher sent no configuration (%s)",
                         n == 0 ? "it closed the connection" : "timed out");
            return HEAPHOOK_UCM_WATCH_END_IO;
        }
        have += (size_t)n;
    }
    uint32_t capacity =
        config.ring_records == 0 ? HEAPHOOK_UCM_WATCH_RING_DEFAULT : config.ring_records;
    int events = (int)config.events & WATCH_ALL_EVENTS;
    if (memcmp(config.magic, HEAPHOOK_UCM_WATCH_CONFIG_MAGIC, 4) != 0 || events == 0 ||
        capacity < HEAPHOOK_UCM_WATCH_RING_MIN || capacity > HEAPHOOK_UCM_WATCH_RING_MAX ||
        (capacity & (capacity - 1)) != 0) {
        ucm_log_error("watch: the watcher's configuration is invalid (events 0x%x, ring %u)",
                      (unsigned)config.events, (unsigned)capacity);
        watch_send_control(HEAPHOOK_UCM_WATCH_STARTED,
                           (uint64_t)(int64_t)HEAPHOOK_UCM_ERR_INVALID_PARAM, 0, 0, 0);
        return HEAPHOOK_UCM_WATCH_END_FAILED;
    }
    if (watch.events != 0) {
        /* Registered by the parent before a fork, inert since (see watch_fork_child). */
        heaphook_ucm_unset_event_handler(WATCH_ALL_EVENTS, watch_handler, NULL);
        watch.events = 0;
    }
    watch_ring_free(&watch.ring);
    if (!watch_ring_init(&watch.ring, capacity)) {
        watch_send_control(HEAPHOOK_UCM_WATCH_STARTED,
                           (uint64_t)(int64_t)HEAPHOOK_UCM_ERR_NO_MEMORY, 0, 0, 0);
        return HEAPHOOK_UCM_WATCH_END_FAILED;
    }
    watch.installed_here = strcmp(heaphook_ucm_install_mode(), "none") == 0;
    atomic_store(&watch.recording, 1);
    heaphook_ucm_status_t status =
        heaphook_ucm_set_event_handler(events, WATCH_PRIORITY, watch_handler, NULL);
    if (status != HEAPHOOK_UCM_OK) {
        atomic_store(&watch.recording, 0);
        watch_send_control(HEAPHOOK_UCM_WATCH_STARTED, (uint64_t)(int64_t)status,
                           HEAPHOOK_UCM_WATCH_MODE_NONE, (uint64_t)events, capacity);
        return HEAPHOOK_UCM_WATCH_END_FAILED;
    }
    watch.events = events;
    if (!watch_send_control(HEAPHOOK_UCM_WATCH_STARTED, HEAPHOOK_UCM_OK,
                            (uint64_t)watch_mode_code(), (uint64_t)events, capacity)) {
        return HEAPHOOK_UCM_WATCH_END_IO;
    }
    return 0;
}

/* Sends what the ring holds, at most max records, and a DROPPED record for drops not yet
 * reported. Returns the records sent, or -1 when the connection failed. The thread's loop
 * passes the ring's capacity: busy threads refill the ring as fast as a slow watcher reads it,
 * and an unbounded drain would never come back to see the watcher's half-close. */
static long watch_drain(uint64_t max) {
    static struct heaphook_ucm_watch_record batch[WATCH_BATCH]; /* the thread only */
    long total = 0;
    while ((uint64_t)total < max) {
        size_t want =
            max - (uint64_t)total < WATCH_BATCH ? (size_t)(max - (uint64_t)total) : WATCH_BATCH;
        size_t n = watch_ring_pop(&watch.ring, batch, want);
        if (n == 0) break;
        if (!watch_send(batch, n * sizeof batch[0])) return -1;
        total += (long)n;
        if (n < want) break;
    }
    uint64_t dropped = atomic_load_explicit(&watch.ring.dropped, memory_order_relaxed);
    if (dropped != watch.dropped_reported) {
        if (!watch_send_control(HEAPHOOK_UCM_WATCH_DROPPED, 0, dropped - watch.dropped_reported, 0,
                                0)) {
            return -1;
        }
        watch.dropped_reported = dropped;
    }
    return total;
}

/* Has the watcher half-closed its side (or closed, or failed)? Waits up to timeout_ms. */
static bool watch_peer_done(int timeout_ms) {
    struct pollfd p = {.fd = watch.fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n <= 0) return false;
    if (p.revents & (POLLERR | POLLNVAL)) return true;
    char byte;
    ssize_t got = recv(watch.fd, &byte, 1, MSG_DONTWAIT);
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR);
}

/* Ends the stream from its thread: handler off, hooks removed when this stream installed them
 * (not at exit), the rest drained, END, connection closed. */
static void watch_finish(int reason) {
    assert(watch.state != WATCH_IDLE && watch.fd >= 0);
    bool exiting = reason == HEAPHOOK_UCM_WATCH_END_EXIT;
    bool restored = false;
    if (watch.events != 0 && !exiting) {
        heaphook_ucm_unset_event_handler(WATCH_ALL_EVENTS, watch_handler, NULL);
        watch.events = 0;
        /* Preloaded, the hooks stay first in the process (no handler: a plain system call);
         * the C library's patched entries are restored all the same. */
        if (watch.installed_here) restored = heaphook_ucm_uninstall() == HEAPHOOK_UCM_OK;
    }
    atomic_store(&watch.recording, 0);
    uint64_t recorded = 0, dropped = 0;
    if (watch.ring.slots != NULL) {
        /* Unbounded: with the handler off, only what is in the ring (and a few records of
         * calls in flight) is left. */
        if (reason != HEAPHOOK_UCM_WATCH_END_IO) watch_drain(UINT64_MAX);
        recorded = atomic_load(&watch.ring.recorded);
        dropped = atomic_load(&watch.ring.dropped);
    }
    if (reason != HEAPHOOK_UCM_WATCH_END_IO) {
        watch_send_control(HEAPHOOK_UCM_WATCH_END, recorded, dropped, (uint64_t)reason,
                           restored ? 1 : 0);
    }
    pthread_mutex_lock(&watch_lock);
    close(watch.fd);
    watch.fd = -1;
    /* At exit (handler still registered, other threads may still be recording) the ring stays. */
    if (watch.events == 0) watch_ring_free(&watch.ring);
    watch.state = WATCH_IDLE;
    atomic_store(&watch.stop_reason, 0);
    atomic_store(&watch.thread_done, 1);
    pthread_mutex_unlock(&watch_lock);
    ucm_log_info("watch: stream ended (%s), %llu events, %llu dropped%s",
                 reason == HEAPHOOK_UCM_WATCH_END_DETACH ? "detached"
                 : exiting                               ? "exit"
                 : reason == HEAPHOOK_UCM_WATCH_END_IO   ? "connection lost"
                                                         : "install failed",
                 (unsigned long long)recorded, (unsigned long long)dropped,
                 restored ? ", hooks removed" : "");
}

static void *watch_thread(void *setup_done) {
    watch_is_drainer = 1;
    int reason = setup_done != NULL ? 0 : watch_setup();
    while (reason == 0) {
        long sent = watch_drain(watch.ring.mask + 1);
        if (sent < 0) {
            reason = HEAPHOOK_UCM_WATCH_END_IO;
            break;
        }
        int asked = atomic_load(&watch.stop_reason);
        if (asked != 0) {
            reason = asked;
            break;
        }
        if (watch_peer_done(sent == 0 ? WATCH_DRAIN_MS : sent < WATCH_BATCH ? WATCH_BUSY_MS : 0)) {
            reason = HEAPHOOK_UCM_WATCH_END_DETACH;
        }
    }
    if (reason == HEAPHOOK_UCM_WATCH_END_IO) {
        /* The watcher is gone: stop recording all the same. */
        watch_finish(HEAPHOOK_UCM_WATCH_END_IO);
    } else {
        watch_finish(reason);
    }
    return NULL;
}

/* Creates the thread with every signal blocked but the stop-the-world ones and the faults. */
static int watch_spawn(bool setup_done) {
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGRTMAX - 3); /* code patching (bistro.h) */
    sigdelset(&all, SIGRTMAX - 2); /* heaptrack's leak check */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    int error = pthread_create(&thread, &attr, watch_thread, setup_done ? (void *)1 : NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (error == 0) pthread_setname_np(thread, "heaphook-watch");
    return error;
}

/* Connects to path: the fd, or -errno. */
static int watch_connect(const char *path) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (path == NULL || path[0] == '\0' || strlen(path) >= sizeof addr.sun_path) return -EINVAL;
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    /* The handshake must not hang the process on a watcher that never answers. */
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

/* Takes the stream for a new connection: 0, or -EBUSY. watch_lock held. */
static int watch_claim(int fd, int origin) {
    if (watch.state != WATCH_IDLE) return -EBUSY;
    watch.state = WATCH_RUNNING;
    watch.fd = fd;
    watch.origin = origin;
    watch.installed_here = false;
    watch.dropped_reported = 0;
    watch.start_ns = watch_now();
    atomic_store(&watch.stop_reason, 0);
    atomic_store(&watch.thread_done, 0);
    return 0;
}

EXPORT int heaphook_ucm_stream_start(const char *socket_path) {
    pthread_mutex_lock(&watch_lock);
    if (watch.state != WATCH_IDLE) {
        pthread_mutex_unlock(&watch_lock);
        return -EBUSY;
    }
    int fd = watch_connect(socket_path);
    if (fd < 0) {
        pthread_mutex_unlock(&watch_lock);
        return fd;
    }
    watch_claim(fd, HEAPHOOK_UCM_WATCH_ORIGIN_CALL);
    int error = watch_spawn(false);
    if (error != 0) {
        close(fd);
        watch.fd = -1;
        watch.state = WATCH_IDLE;
        pthread_mutex_unlock(&watch_lock);
        return -EAGAIN;
    }
    pthread_mutex_unlock(&watch_lock);
    return 0;
}

/* Waits until the thread has finished, at most timeout_ms: true when it did. */
static bool watch_wait_done(int timeout_ms) {
    for (int waited = 0; !atomic_load(&watch.thread_done); ++waited) {
        if (waited >= timeout_ms) return false;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return true;
}

EXPORT int heaphook_ucm_stream_stop(const char *argument) {
    pthread_mutex_lock(&watch_lock);
    if (watch.state != WATCH_RUNNING) {
        pthread_mutex_unlock(&watch_lock);
        return -ESRCH;
    }
    watch.state = WATCH_ENDING;
    atomic_store(&watch.stop_reason, HEAPHOOK_UCM_WATCH_END_DETACH);
    pthread_mutex_unlock(&watch_lock);
    if (argument != NULL && strcmp(argument, "wait") == 0 && !watch_wait_done(10000)) {
        return -ETIMEDOUT;
    }
    return 0;
}

/* ---- Fork, load and exit ------------------------------------------------------------------- */

/* watch_lock is held across fork (native/fork.c, lock 2), so the child never inherits a
 * half-changed state. */
void ucm_watch_prefork(void) {
    pthread_mutex_lock(&watch_lock);
}
void ucm_watch_postfork_parent(void) {
    pthread_mutex_unlock(&watch_lock);
}
void ucm_watch_postfork_child(void) {
    pthread_mutex_init(&watch_lock, NULL);
    if (watch.state == WATCH_IDLE) return;
    atomic_store(&watch.recording, 0);
    if (watch.fd >= 0) close(watch.fd);
    watch.fd = -1;
    /* The handler stays registered in the child (unsetting it here would wait for readers the
     * child does not have), so the ring stays too; it records nothing. */
    watch.state = WATCH_IDLE;
    atomic_store(&watch.thread_done, 1);
}

__attribute__((constructor(200))) static void watch_init(void) {
    ucm_fork_register();
    const char *path = heaphook_env_get_unless_secure("HEAPHOOK_MEM_WATCH_SOCKET", NULL);
    if (path == NULL || path[0] == '\0') return;
    pthread_mutex_lock(&watch_lock);
    int fd = watch_connect(path);
    if (fd < 0) {
        pthread_mutex_unlock(&watch_lock);
        ucm_log_info("watch: cannot connect to HEAPHOOK_MEM_WATCH_SOCKET=%s (errno %d)", path, -fd);
        return;
    }
    watch_claim(fd, HEAPHOOK_UCM_WATCH_ORIGIN_ENV);
    pthread_mutex_unlock(&watch_lock);
    /* Synchronously here, so the events of the whole program are seen from main on. */
    watch_is_drainer = 1;
    int reason = watch_setup();
    watch_is_drainer = 0;
    if (reason != 0) {
        watch_finish(reason);
        return;
    }
    watch_is_drainer = 1; /* the thread's stack is no event of the program's */
    int error = watch_spawn(true);
    watch_is_drainer = 0;
    if (error != 0) watch_finish(HEAPHOOK_UCM_WATCH_END_IO);
}

__attribute__((destructor)) static void watch_fini(void) {
    pthread_mutex_lock(&watch_lock);
    bool running = watch.state == WATCH_RUNNING;
    if (running) {
        watch.state = WATCH_ENDING;
        atomic_store(&watch.stop_reason, HEAPHOOK_UCM_WATCH_END_EXIT);
    }
    bool ending = watch.state == WATCH_ENDING;
    pthread_mutex_unlock(&watch_lock);
    if (ending) watch_wait_done(2000);
}
