/*
 * link.c — the connection to `heaphook agent`.
 *
 * HEAPHOOK_AGENT=unix:PATH names the agent's socket (start.c reads it). hh_agent_link_start
 * connects and starts the keeper thread, which connects, says HELLO, sends the process's
 * counters and its allocator's figures (STATS) every HH_STATS_PERIOD_MS, and reconnects
 * when the agent went away (killed, restarted): the program never notices.
 *
 * The hooks send on one descriptor number for the life of the process: a new connection is
 * put in place with dup2, so a hook that races a reconnection sends to the old connection or
 * the new one, never to a descriptor the program opened meanwhile.
 *
 * Return addresses are sent as they are: the agent names them from /proc/PID/maps and the
 * modules' files (addr2line), off the program's path. (dladdr here cost a linear scan of a
 * module's dynamic symbols per new address: a quarter more CPU for node, whose binary exports
 * tens of thousands.)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/futex.h>
#include <time.h>
#include <unistd.h>

#include "../frames.h"
#include "client.h"
#include "heaphook/core.h"

bool hh_agent_enabled;

#define HH_STATS_PERIOD_MS 1000u

static struct sockaddr_un g_address;
static socklen_t g_address_len;
static _Atomic int g_fd = -1;           /* the descriptor the hooks send on */
static _Atomic bool g_connected;        /* the agent took our HELLO on g_fd */
static _Atomic uint64_t g_socket_inode; /* of the socket g_fd should be */
static _Atomic uint64_t g_dropped;      /* samples not delivered */
static _Atomic uint64_t g_samples;      /* samples delivered */
static _Atomic uint64_t g_reconnects;   /* connections made after the first */
static _Atomic bool g_thread_running;
static _Atomic uint32_t g_keeper_stop; /* futex word: 1 asks the keeper thread to end */
static pthread_t g_keeper;
static pid_t g_owner; /* the process the connection and the thread belong to */

typedef int (*hh_get_stats_fn)(heaphook_stats *);
typedef const char *(*hh_backend_name_fn)(void);

/* ---- sending ----------------------------------------------------------------------------- */

/* True when fd is still the client's socket: a program may close descriptors it does not know
 * (a daemon closing everything) and open its own at the same number, which must never receive
 * a frame. One fstat per frame: frames are rare (one per sample). */
static bool hh_fd_is_ours(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
           (uint64_t)st.st_ino == atomic_load_explicit(&g_socket_inode, memory_order_acquire);
}

static bool hh_send_frame(const void *frame, size_t len) {
    int fd = atomic_load_explicit(&g_fd, memory_order_acquire);
    if (fd < 0 || !atomic_load_explicit(&g_connected, memory_order_acquire)) return false;
    int saved = errno;
    if (!hh_fd_is_ours(fd)) { /* the keeper thread finds out too, and reconnects */
        errno = saved;
        return false;
    }
    ssize_t n = send(fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    bool sent = n == (ssize_t)len;
    if (n < 0 && errno != EAGAIN && errno != EINTR)
        atomic_store(&g_connected, false); /* the keeper thread reconnects */
    errno = saved;
    return sent;
}

void hh_agent_count_dropped(void) {
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
}

static size_t hh_copy_bounded(char *to, const char *from, size_t cap) {
    size_t n = 0;
    if (from != NULL)
        while (n < cap && from[n] != '\0') n++;
    memcpy(to, from, n);
    return n;
}

bool hh_agent_send_alloc(uintptr_t address, size_t size, const uintptr_t *pcs, int depth) {
    if (!atomic_load_explicit(&g_connected, memory_order_acquire)) return false;
    union {
        hh_agent_alloc a;
        uint8_t bytes[sizeof(hh_agent_alloc) + HH_AGENT_MAX_DEPTH * sizeof(uint64_t)];
    } f;
    if (depth > (int)HH_AGENT_MAX_DEPTH) depth = HH_AGENT_MAX_DEPTH;
    size_t len = sizeof f.a + (size_t)depth * sizeof(uint64_t);
    f.a.h.type = HH_AGENT_ALLOC;
    f.a.h.reserved = 0;
    f.a.h.length = (uint32_t)len;
    f.a.address = address;
    f.a.size = size;
    f.a.depth = (uint32_t)depth;
    f.a.reserved = 0;
    for (int i = 0; i < depth; i++) f.a.pcs[i] = pcs[i];
    bool sent = hh_send_frame(&f, len);
    if (sent) atomic_fetch_add_explicit(&g_samples, 1, memory_order_relaxed);
    return sent;
}

bool hh_agent_send_free(uintptr_t address) {
    hh_agent_free f = {{HH_AGENT_FREE, 0, sizeof f}, address};
    return hh_send_frame(&f, sizeof f);
}

/* ---- the keeper thread ------------------------------------------------------------------- */

static void hh_read_comm(char *comm) {
    memset(comm, 0, HH_AGENT_COMM_BYTES);
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, comm, HH_AGENT_COMM_BYTES - 1);
    close(fd);
    if (n > 0 && comm[n - 1] == '\n') comm[n - 1] = '\0';
}

static bool hh_connect(void) {
    /* Non-blocking: an agent whose backlog is full refuses (EAGAIN) instead of stalling the
     * constructor; it is tried again a second later. */
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return false;
    if (connect(s, (struct sockaddr *)&g_address, g_address_len) != 0) {
        close(s);
        return false;
    }
    hh_agent_hello hello;
    memset(&hello, 0, sizeof hello);
    hello.h.type = HH_AGENT_HELLO;
    hello.h.length = sizeof hello;
    hello.version = HH_AGENT_VERSION;
    hello.sample_bytes = hh_agent_sample_bytes;
    hh_read_comm(hello.comm);
    hh_backend_name_fn backend = (hh_backend_name_fn)dlsym(RTLD_DEFAULT, "heaphook_active_backend");
    hh_copy_bounded(hello.backend, backend != NULL ? backend() : "glibc",
                    HH_AGENT_BACKEND_BYTES - 1);
    if (send(s, &hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof hello) {
        close(s);
        return false;
    }
    struct stat st;
    if (fstat(s, &st) != 0) {
        close(s);
        return false;
    }
    int fd = atomic_load(&g_fd);
    if (fd >= 0 && hh_fd_is_ours(fd)) {
        /* The hooks' descriptor number now reaches the new agent: a hook racing this sends to
         * the old connection or the new one, never to another file. */
        atomic_store(&g_socket_inode, (uint64_t)st.st_ino);
        dup3(s, fd, O_CLOEXEC);
        close(s);
    } else {
        /* First connection, or the program closed our descriptor (its number may be the
         * program's now): a number of our own. */
        atomic_store(&g_socket_inode, (uint64_t)st.st_ino);
        atomic_store(&g_fd, s);
    }
    atomic_store(&g_connected, true);
    return true;
}

static void hh_send_stats(void) {
    hh_agent_stats f;
    memset(&f, 0, sizeof f);
    f.h.type = HH_AGENT_STATS;
    f.h.length = sizeof f;
    f.allocs_total = hh_agent_allocs_total();
    f.frees_total = hh_agent_frees_total();
    f.samples_total = atomic_load(&g_samples);
    f.dropped_samples_total = atomic_load(&g_dropped);
    f.reconnects_total = atomic_load(&g_reconnects);
    static hh_get_stats_fn get_stats;
    static bool looked_up;
    if (!looked_up) { /* the backend is loaded before main: looking once is enough */
        get_stats = (hh_get_stats_fn)dlsym(RTLD_DEFAULT, "heaphook_get_stats");
        looked_up = true;
    }
    heaphook_stats st;
    if (get_stats != NULL && get_stats(&st) == 0) {
        f.has_backend_stats = 1;
        f.pool_bytes = st.pool_bytes;
        f.used_bytes = st.used_bytes;
        f.free_bytes = st.free_bytes;
        f.used_blocks = st.used_blocks;
        f.free_blocks = st.free_blocks;
        f.largest_free_block = st.largest_free_block;
        f.mmapped_bytes = st.mmapped_bytes;
        f.mmapped_blocks = st.mmapped_blocks;
        f.growth_count = st.growth_count;
        f.peak_used_bytes = st.peak_used_bytes;
        f.largest_request = st.largest_request;
    }
    hh_agent_extras_fill(&f);
    hh_send_frame(&f, sizeof f);
}

/* Sleeps up to ms, or until hh_agent_keeper_pause asks the thread to end. */
static void hh_wait_ms(unsigned ms) {
    struct timespec ts = {ms / 1000u, (long)(ms % 1000u) * 1000000L};
    syscall(SYS_futex, &g_keeper_stop, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
}

static void *hh_keeper(void *arg) {
    (void)arg;
    hh_agent_busy = 1; /* nothing this thread allocates is the program's */
    bool ever = atomic_load(&g_connected);
    while (!atomic_load(&g_keeper_stop)) {
        if (getpid() != g_owner) return NULL; /* a fork child's copy of this thread: none */
        if (!atomic_load(&g_connected)) {
            if (hh_connect()) {
                if (ever) atomic_fetch_add(&g_reconnects, 1);
                ever = true;
            }
        }
        int fd = atomic_load(&g_fd);
        if (atomic_load(&g_connected) && (fd < 0 || !hh_fd_is_ours(fd)))
            atomic_store(&g_connected, false); /* the program closed it: reconnect next round */
        if (atomic_load(&g_connected)) hh_send_stats();
        hh_wait_ms(HH_STATS_PERIOD_MS);
    }
    return NULL;
}

void hh_agent_link_ensure_thread(void) {
    if (HH_LIKELY(atomic_load_explicit(&g_thread_running, memory_order_relaxed))) return;
    bool expected = false;
    if (!atomic_compare_exchange_strong(&g_thread_running, &expected, true)) return;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64u * 1024u);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not for this thread */
    int busy = hh_agent_busy;
    hh_agent_busy = 1;
    if (pthread_create(&g_keeper, &attr, hh_keeper, NULL) != 0)
        atomic_store(&g_thread_running, false);
    hh_agent_busy = busy;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

void hh_agent_keeper_pause(void) {
    if (!atomic_load(&g_thread_running) || getpid() != g_owner) return;
    atomic_store(&g_keeper_stop, 1);
    syscall(SYS_futex, &g_keeper_stop, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(g_keeper, NULL);
    atomic_store(&g_thread_running, false);
}

void hh_agent_keeper_resume(void) {
    atomic_store(&g_keeper_stop, 0);
    if (hh_agent_enabled) hh_agent_link_ensure_thread();
}

void hh_agent_link_fork_child(void) {
    if (!hh_agent_enabled) return;
    /* The parent's connection is the parent's: the child stops using it (the descriptor is
     * closed so the agent's view of the parent is not fed by two processes) and connects on
     * its own from a keeper thread started after fork returns. */
    atomic_store(&g_connected, false);
    int fd = atomic_exchange(&g_fd, -1);
    if (fd >= 0) close(fd);
    atomic_store(&g_thread_running, false); /* the parent's keeper thread is not in the child */
    atomic_store(&g_keeper_stop, 0);
    atomic_store(&g_samples, 0);
    atomic_store(&g_dropped, 0);
    atomic_store(&g_reconnects, 0);
    g_owner = getpid();
}

bool hh_agent_parse_address(const char *value) {
    static const char prefix[] = "unix:";
    if (value == NULL || strncmp(value, prefix, sizeof prefix - 1) != 0) return false;
    size_t path_len = strlen(value) - (sizeof prefix - 1);
    if (path_len == 0 || path_len >= sizeof g_address.sun_path) return false;
    memset(&g_address, 0, sizeof g_address);
    g_address.sun_family = AF_UNIX;
    memcpy(g_address.sun_path, value + sizeof prefix - 1, path_len);
    g_address_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len + 1);
    return true;
}

const char *hh_agent_link_start(uint64_t sample_bytes) {
    hh_agent_sample_bytes = sample_bytes;
    if (hh_agent_sampler_init() != 0) return "no memory for the sampled-address table";
    g_owner = getpid();
    hh_agent_enabled = true;
    /* Connected before main when the agent is up, so start-up's samples are not lost; the
     * keeper thread retries when it is not. */
    hh_connect();
    hh_agent_link_ensure_thread();
    return NULL;
}
