/*
 * transport.c — how the tracer's records leave the process (tracer.c, "Transports"): standalone,
 * a ring and a drain thread writing heaplog.<pid>.log; under a collector, the ring it hands over
 * at the handshake. Also the one-line errors of both when they cannot start.
 */
#include "tracer.h"
#include "vm.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "attach.h"
#include "fork.h"
#include "format/heaplog.h"
#include "heaphook/config.h"
#include "heaphook/log.h"
#include "leaks/leaks.h"
#include "modules.h"
#include "ring.h"
#include "stacks.h"
#include "unwinder.h"
#include "tracer_internal.h"
#include "writer.h"

/* ---- 4. Transports ----------------------------------------------------------------------- */

static int hh_high_fd(int fd) {
    if (fd < 0) return fd;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 200);
    if (high < 0) return fd;
    close(fd);
    return high;
}

static void hh_discard(void *arg, uint64_t pos, unsigned type, const void *record, uint32_t len) {
    (void)arg, (void)pos, (void)type, (void)record, (void)len;
}

/* errno's text, without allocating or translating (strerror may do both). */
const char *hh_error_text(int error) {
    const char *text = strerrordesc_np(error);
    return text != NULL ? text : "unknown error";
}

/* Tracing that cannot start for want of a descriptor (RLIMIT_NOFILE, `ulimit -n 4`) says
 * so, with the limit, rather than blaming the collector, the ring's size or the log's folder.
 * True when that was the cause (EMFILE, ENFILE). */
static bool hh_fd_limit_failed(const char *what, int error) {
    if (error != EMFILE && error != ENFILE) return false;
    struct rlimit limit;
    unsigned long long soft =
        getrlimit(RLIMIT_NOFILE, &limit) == 0 ? (unsigned long long)limit.rlim_cur : 0;
    heaphook_log_error(
        "heaptrack: cannot %s: no file descriptor left (%s; RLIMIT_NOFILE allows "
        "%llu open files); not tracing. Raise the limit (ulimit -n 1024)",
        what, hh_error_text(error), soft);
    errno = error;
    return true;
}

/* Tracing that cannot start says why, once (a process starts its tracer once; a fork child
 * of a process that is not tracing does not start again). */
static void hh_ring_failed(const char *what, int error) {
    if (hh_fd_limit_failed("create its ring buffer", error)) return;
    uint64_t size = hh_cfg.buffer_size;
    const char *unit = size >= (1u << 30) ? "GiB" : size >= (1u << 20) ? "MiB" : "KiB";
    uint64_t scale = size >= (1u << 30) ? 1u << 30 : size >= (1u << 20) ? 1u << 20 : 1u << 10;
    const char *value = heaphook_env_get("HEAPHOOK_BUFFER_SIZE", NULL);
    heaphook_log_error(
        "heaptrack: cannot %s a %llu %s ring (HEAPHOOK_BUFFER_SIZE=%s): %s; not "
        "tracing. Try HEAPHOOK_BUFFER_SIZE=%s",
        what, (unsigned long long)(size / scale), unit, value != NULL ? value : "8MiB, the default",
        hh_error_text(error), size > (8u << 20) ? "8MiB" : "64KiB");
    errno = error;
}

int hh_setup_standalone(void) {
    if (g_ring.hdr != NULL && g_ring_pid != getpid()) {
        /* a parent's ring and socket pair (forked while not tracing): not ours to read */
        hh_ring_unmap(&g_ring);
        close(g_drain_rd);
        close(g_notify_fd);
        g_notify_fd = -1;
    }
    if (g_ring.hdr == NULL) {
        int fd = hh_ring_create_fd(hh_cfg.buffer_size);
        if (fd < 0) {
            hh_ring_failed("create (memfd)", errno);
            return -1;
        }
        int rc = hh_ring_map(&g_ring, fd);
        int error = errno;
        close(fd);
        if (rc != 0) {
            hh_ring_failed("map", error);
            return -1;
        }
        int p[2]; /* the drain's wake-ups: p[1] -> p[0] (see hh_wake) */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p) != 0) {
            error = errno;
            if (!hh_fd_limit_failed("create the drain thread's socket pair", error))
                heaphook_log_error(
                    "heaptrack: cannot create the drain thread's socket pair: %s; not tracing.",
                    hh_error_text(error));
            hh_ring_unmap(&g_ring);
            errno = error;
            return -1;
        }
        g_drain_rd = hh_high_fd(p[0]);
        g_notify_fd = hh_high_fd(p[1]);
        g_ring_pid = getpid();
    } else {
        /* An attach after a detach writes through the same ring (a thread still inside a hook
         * may hold a pointer into it, so it is never unmapped): what a straggler of the
         * previous log left in it is skipped. */
        while (hh_ring_read(&g_ring, hh_discard, NULL, NULL, true) > 0) {
        }
        hh_ring_reopen(&g_ring);
        hh_cfg.buffer_size = g_ring.capacity;
    }
    if (g_attach_file[0] != '\0' && !g_fork_child) {
        g_writer = hh_writer_open_file(g_attach_file, g_log_path, sizeof g_log_path);
    } else {
        g_writer = hh_writer_open(g_log_dir, getpid(), g_log_path, sizeof g_log_path);
    }
    g_write_error_said = false;
    if (g_writer == NULL) {
        int error = errno;
        if (hh_fd_limit_failed("open its log", error)) return -1;
        heaphook_log_error(
            "heaptrack: cannot create a log %s %s (errno %d); set HEAPHOOK_LOG_DIR "
            "to a writable directory. Not tracing.",
            g_attach_file[0] != '\0' && !g_fork_child ? "at" : "in",
            g_attach_file[0] != '\0' && !g_fork_child ? g_attach_file : g_log_dir, error);
        errno = error;
        return -1;
    }
    return 0;
}

/* The collector cannot be used: says why (once, see hh_ring_failed). */
static int hh_collector_failed(const char *what, int error) {
    if (hh_fd_limit_failed("use the collector (a socket and the ring buffer it sends)", error))
        return -1;
    heaphook_log_error(
        "heaptrack: %s the collector at HEAPHOOK_COLLECTOR=%s: %s; is `heaphook "
        "record` still running? Not tracing.",
        what, g_collector, hh_error_text(error));
    errno = error;
    return -1;
}

int hh_setup_collector(void) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t n = strlen(g_collector);
    if (n >= sizeof addr.sun_path) return hh_collector_failed("cannot reach", ENAMETOOLONG);
    memcpy(addr.sun_path, g_collector, n);
    if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return hh_collector_failed("cannot reach", errno);
    if (connect(s, (struct sockaddr *)&addr,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0) {
        int error = errno;
        close(s);
        return hh_collector_failed("cannot reach", error);
    }
    hh_hello hello = {HH_HELLO_MAGIC,
                      HH_HELLO_VERSION,
                      (uint32_t)getpid(),
                      (uint32_t)getppid(),
                      g_fork_child ? HH_PF_FORK_CHILD : 0u,
                      0,
                      hh_cfg.buffer_size};
    if (send(s, &hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello) {
        int error = errno;
        close(s);
        return hh_collector_failed("lost the connection to", error);
    }
    char status = 0;
    struct iovec iov = {&status, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    ssize_t got;
    do {
        got = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (got != 1 || status != HH_HELLO_READY || c == NULL || c->cmsg_type != SCM_RIGHTS) {
        /* MSG_CTRUNC: the kernel had no descriptor to give the ring's memfd (RLIMIT_NOFILE). */
        int error = got < 0 ? errno : (msg.msg_flags & MSG_CTRUNC) != 0 ? EMFILE : EPROTO;
        close(s);
        return hh_collector_failed("got no ring buffer from", error);
    }
    int memfd;
    memcpy(&memfd, CMSG_DATA(c), sizeof memfd);
    int rc = hh_ring_map(&g_ring, memfd);
    int error = errno;
    close(memfd);
    if (rc != 0) {
        close(s);
        hh_ring_failed("map", error);
        return -1;
    }
    s = hh_high_fd(s);
    fcntl(s, F_SETFL, O_NONBLOCK);
    g_notify_fd = s;
    return 0;
}
