/*
 * collector.c — heaphook-heaptrack-collector, the out-of-process side of `heaphook record`.
 *
 *   heaphook-heaptrack-collector --record [--dir DIR] [--manifest FILE] [--quiet]
 *   heaphook-heaptrack-collector --attach PID [--dir DIR] [--manifest FILE] [--quiet]
 *
 * Listens on an abstract Unix socket, prints "socket <name>" on stdout, and serves every
 * traced process that connects to it: it creates the process's ring buffer (a memfd), hands it
 * over with SCM_RIGHTS, drains it when woken (one byte per batch) or every 50 ms while records
 * come in, and writes DIR/heaplog.<pid>.log. After a round that found every ring empty it
 * sleeps until a byte, a connection or a signal wakes it (the sleep handshake of ring.h: the
 * first record after it fell asleep sends one byte), so an idle traced program costs it no
 * wake-up; a block the writer still holds, or a handshake under way, bounds that sleep. When a
 * connection closes — exit, crash, _exit, exec — it reads what the ring still holds, skipping only
 * records left half-written, and closes the log. Each log opened is announced on stdout ("log <pid>
 * <path>"), each one closed too ("closed <pid> <events> <reason> <path>": the events in the log,
 * the END reason exit, lost, collector, detach or write_error).
 *
 * A write of a log that fails (a full disk, an I/O error) ends that log at its last whole block
 * (END reason write_error, writer.c) and stops recording that process, which runs on: its ring
 * is closed (its threads no longer wait for room) with the errno, for its tracer to say.
 *
 * --record (`heaphook record -- CMD`): the command is not ours. heaphook record starts it, with
 * LD_PRELOAD and HEAPHOOK_COLLECTOR=<name>, as its own child, so that the command's parent and
 * status do not depend on this process: a collector that dies (killed, out of memory) leaves
 * the command running under heaphook record, which still gets its status. Standard input is the
 * lifeline: its end (heaphook record closes it when the command has exited, or heaphook record
 * is gone) means the command is done; the collector then exits once every traced process is
 * gone (background processes included). Signals: see forward_signal; a signal meant for the
 * command is asked of heaphook record on stdout ("signal <number>"), which holds the command's
 * handle; when signals stop the collector it says "stopped" before exiting.
 *
 * --attach PID (`heaphook record -p`): serves the processes that connect: PID, after
 * heaphook-inject made it call heaphook_heaptrack_attach_collector(<name>), and its fork
 * children. A process that detaches sends HH_MSG_DETACH before closing: its log ends
 * with END reason detach. SIGTERM stops it (the logs still open end with reason collector);
 * SIGINT and SIGHUP are ignored, since the terminal's Ctrl-C is heaphook's to handle: it
 * detaches first. A pipe (or socket) on standard input is heaphook record's lifeline here too:
 * its end means heaphook record is gone (killed: SIGKILL, the OOM killer, a cancelled job),
 * and the collector stops as on SIGTERM, so no orphan keeps writing; each traced process sees
 * the connection end and detaches itself (attach.c in the tracer).
 *
 * Trust: every byte from a traced process is hostile. The socket is abstract, so any local
 * process can connect; the collector believes only what the kernel says of a peer
 * (SO_PEERCRED, read at accept): --record accepts a peer with the command's uid and gid (its
 * own), --attach one with PID's uid and gid that is PID or a descendant of it (/proc, by the
 * kernel's pid). The pid a hello claims is never used: the log's name, its PROCESS record and
 * the "log"/"closed" lines give the kernel's. Handshakes never block the loop: a connection is
 * one more descriptor in the poll until its 32-byte hello is whole, and is closed when that
 * takes HELLO_TIMEOUT_MS. Every ring record is checked (hh_writer_check) before the writer uses
 * it: the first that breaks the format ends that log with END reason protocol ("closed <pid>
 * <events> protocol <path>", and one line on stderr naming the pid and the reason), its ring is
 * closed with EPROTO (its threads stop waiting, its tracer says so) and the others are served
 * as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "format/heaplog.h"
#include "track/ring.h"
#include "track/trace.h"
#include "track/writer.h"

typedef struct client {
    int fd;
    int pid;
    hh_ring ring;
    hh_writer *writer;
    bool saw_exit;
    bool saw_detach;
    char path[4096];
} client;

static client **clients;
static size_t nclients, capclients;

/* A connection whose hello is not whole yet (accepted, its peer trusted). */
/* From the accept. The tracer sends its hello right after connect, but a loaded machine can
 * deschedule it in between, and a refused process runs untraced: half a second, not the
 * 100 ms first chosen. Waiting costs the others nothing (a pending handshake never blocks). */
#define HELLO_TIMEOUT_MS 500
#define PENDING_MAX 64 /* handshakes at once; more connections are refused */
typedef struct pending {
    int fd;
    pid_t pid; /* SO_PEERCRED: the kernel's */
    uint64_t deadline;
    size_t got;
    hh_hello hello;
} pending;
static pending pendings[PENDING_MAX];
static size_t npending;
static uid_t target_uid; /* the credentials a peer must have (--attach: PID's, else ours) */
static gid_t target_gid;
static const char *dir = ".";
static const char *manifest;
static bool quiet;
static long pending_forks;
static pid_t attach_pid;  /* --attach: the process served (0: --record) */
static int lifeline = -1; /* standard input, until its end: --record, the command is done;
                           * --attach, heaphook record is gone */
static volatile sig_atomic_t stop_requested;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static volatile sig_atomic_t signals_seen, own_signals, relayed_signals, command_done;

/* The signal handlers' wake-up: one byte in this pipe ends a round's wait. The collector may
 * wait with no timeout (round_timeout), so a signal that came between the main loop's look at
 * its flags and the poll would otherwise be seen only at the next wake-up, maybe never. */
static int signal_pipe[2] = {-1, -1};

static void wake_from_signal(void) {
    int saved = errno;
    if (signal_pipe[1] >= 0) (void)!write(signal_pipe[1], "s", 1);
    errno = saved;
}
static volatile sig_atomic_t pass_on, pass_on_signal; /* signals to ask heaphook record to pass */

/* The first signal goes to the command; a second one, or one after the command is gone
 * (processes it left behind are still traced), stops the collector itself.
 *
 * A terminal's Ctrl-C reaches its whole process group: `heaphook record`, which relays it
 * here, this collector and the command. So a signal from anyone but our parent is taken as
 * the command's already, and the parent's relay of it is the same press, not a second one:
 * presses are the larger of the two counts. A signal only our parent got (a kill of its pid:
 * relays outnumber our own) is passed on to the command: the main loop asks heaphook record,
 * the command's parent, to send it ("signal <number>" on stdout). */
static void forward_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    if (info->si_code == SI_USER && info->si_pid == getppid()) {
        relayed_signals++;
        if (relayed_signals > own_signals && !command_done) {
            pass_on_signal = sig;
            pass_on++;
        }
    } else {
        own_signals++;
    }
    signals_seen = own_signals > relayed_signals ? own_signals : relayed_signals;
    wake_from_signal();
}

static void usage(void) {
    fprintf(stderr,
            "usage: heaphook-heaptrack-collector --record | --attach PID [--dir DIR] "
            "[--manifest FILE] [--quiet]\n");
    exit(2);
}

/* One pass: what the ring holds now. A final drain repeats until the ring is empty; a
 * regular one does not, so busy writers cannot starve the other clients and new ones. Returns
 * the records read by a regular pass. */
static uint64_t drain(client *c, bool final) {
    uint64_t read = 0;
    if (hh_writer_violation(c->writer) != NULL) return 0; /* its input ended there */
    if (final) {
        /* A process that is gone writes nothing more: a few passes empty its ring. More would
         * be a live process writing on after it closed its connection. */
        for (int pass = 0; pass < 16; pass++) {
            if (hh_ring_read(&c->ring, hh_writer_record_checked, hh_writer_prefetch, c->writer,
                             true) == 0)
                break;
        }
    } else {
        read =
            hh_ring_read(&c->ring, hh_writer_record_checked, hh_writer_prefetch, c->writer, false);
    }
    if (final) {
        hh_writer_flush(c->writer);
    } else {
        hh_writer_tick(c->writer);
    }
    return read;
}

/* Ends a client's log (and says so: "closed ..." on stdout, a line on stderr, the manifest).
 * With stopped, the process is still running: what it has published is written, the rest is
 * dropped from now on (its writers no longer wait). A log whose write failed ends with END
 * write_error: its process is told (the ring's close_error) and runs on untraced. */
static void finish(client *c, bool stopped) {
    int error = hh_writer_error(c->writer);
    const char *violation = hh_writer_violation(c->writer);
    if (violation != NULL) {
        stopped = true;
        hh_ring_close_error(&c->ring, EPROTO);
    } else if (error != 0) {
        stopped = true;
        hh_ring_close_error(&c->ring, error);
    } else if (stopped) {
        hh_ring_close(&c->ring);
    }
    drain(c, !stopped);
    if (stopped) drain(c, false);
    error = hh_writer_error(c->writer);         /* the last writes may have failed too */
    violation = hh_writer_violation(c->writer); /* the last records may have broken it */
    if (violation != NULL && atomic_load(&c->ring.hdr->close_error) == 0)
        hh_ring_close_error(&c->ring, EPROTO);
    if (error != 0 && atomic_load(&c->ring.hdr->close_error) == 0)
        hh_ring_close_error(&c->ring, error);
    bool exited = c->saw_exit || hh_writer_saw_exit(c->writer);
    /* the detach byte, or the ring's header when the socket was too full for that byte */
    bool detached =
        (c->saw_detach || atomic_load(&c->ring.hdr->ending) == HH_RING_ENDING_DETACH) && !stopped;
    hh_ring_close(&c->ring);
    /* events in the log: after a failed write, those in its whole blocks */
    uint64_t events = hh_writer_close(c->writer,
                                      violation  ? HH_END_PROTOCOL
                                      : stopped  ? HH_END_COLLECTOR
                                      : detached ? HH_END_DETACH
                                      : exited   ? HH_END_EXIT
                                                 : HH_END_LOST,
                                      atomic_load(&c->ring.hdr->dropped), &error);
    c->writer = NULL;
    const char *reason = error != 0  ? "write_error"
                         : violation ? "protocol"
                         : stopped   ? "collector"
                         : detached  ? "detach"
                         : exited    ? "exit"
                                     : "lost";
    hh_ring_unmap(&c->ring);
    close(c->fd);
    if (violation != NULL && error == 0) { /* said even with --quiet, as a failed write */
        fprintf(stderr,
                "heaphook record: process %d broke the collector's protocol (%s); its log %s "
                "ends after %llu events, and it runs on untraced\n",
                c->pid, violation, c->path, (unsigned long long)events);
    } else if (error != 0) { /* said even with --quiet: the log is not what the run was */
        fprintf(stderr,
                "heaphook record: cannot write %s: %s; the log ends after %llu events, and "
                "process %d runs on untraced\n",
                c->path, strerror(error), (unsigned long long)events, c->pid);
    } else if (!quiet) {
        fprintf(stderr, "heaphook record: wrote %s (%llu events%s)\n", c->path,
                (unsigned long long)events,
                stopped    ? ", stopped while the process ran"
                : detached ? ", detached"
                : exited   ? ""
                           : ", process ended without exit");
    }
    printf("closed %d %llu %s %s\n", c->pid, (unsigned long long)events, reason, c->path);
    fflush(stdout);
    if (manifest != NULL) {
        FILE *m = fopen(manifest, "a");
        if (m != NULL) {
            fprintf(m, "%s\t%d\t%llu\t%s\n", c->path, c->pid, (unsigned long long)events, reason);
            fclose(m);
        }
    }
}

/* A line on stderr for a connection refused, said even with --quiet (which only leaves out
 * the list of logs written: heaphook record prints its own). */
static void refuse(int fd, pid_t pid, const char *why) {
    close(fd);
    fprintf(stderr, "heaphook record: refused a connection from process %d: %s\n", (int)pid, why);
}

/* The parent of pid and its effective uid and gid (from /proc/<pid>/status); false when the
 * process is gone. */
static bool proc_status(pid_t pid, pid_t *parent, uid_t *uid, gid_t *gid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    int found = 0;
    unsigned real, effective;
    while (fgets(line, sizeof line, f) != NULL) {
        int p;
        if (sscanf(line, "PPid: %d", &p) == 1) {
            if (parent != NULL) *parent = p;
            found |= 1;
        } else if (sscanf(line, "Uid: %u %u", &real, &effective) == 2) {
            if (uid != NULL) *uid = effective;
            found |= 2;
        } else if (sscanf(line, "Gid: %u %u", &real, &effective) == 2) {
            if (gid != NULL) *gid = effective;
            found |= 4;
        }
    }
    fclose(f);
    return found == 7;
}

/* Whether pid is attach_pid or one of its descendants (by the kernel's parent links). */
static bool in_attached_tree(pid_t pid) {
    for (int depth = 0; depth < 4096 && pid > 1; depth++) {
        if (pid == attach_pid) return true;
        pid_t parent = 0;
        if (!proc_status(pid, &parent, NULL, NULL)) return false;
        pid = parent;
    }
    return false;
}

/* Whether the kernel's view of a peer is in the collector's trust domain; why says not. */
static bool peer_trusted(const struct ucred *peer, char *why, size_t why_cap) {
    uid_t uid = target_uid;
    gid_t gid = target_gid;
    /* --attach: PID's credentials now (a service may drop privileges), else as at start */
    if (attach_pid > 0) proc_status(attach_pid, NULL, &uid, &gid);
    if (peer->uid != uid || peer->gid != gid) {
        snprintf(why, why_cap, "it runs as uid %u gid %u, not as %s (uid %u gid %u)",
                 (unsigned)peer->uid, (unsigned)peer->gid,
                 attach_pid > 0 ? "the traced process" : "the command", (unsigned)uid,
                 (unsigned)gid);
        return false;
    }
    if (attach_pid > 0 && !in_attached_tree(peer->pid)) {
        snprintf(why, why_cap, "it is not process %d or a descendant of it", (int)attach_pid);
        return false;
    }
    return true;
}

/* Accepts the connections waiting: each one whose peer is trusted waits for its hello beside
 * the clients (handshake()); nothing here blocks. */
static void accept_clients(int listener) {
    for (int n = 0; n < 16; n++) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        struct ucred peer;
        socklen_t peer_len = sizeof peer;
        char why[160];
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) != 0) {
            close(fd);
            continue;
        }
        if (!peer_trusted(&peer, why, sizeof why)) {
            refuse(fd, peer.pid, why);
            continue;
        }
        if (npending == PENDING_MAX) {
            refuse(fd, peer.pid, "too many handshakes at once");
            continue;
        }
        pendings[npending++] = (pending){fd, peer.pid, now_ms() + HELLO_TIMEOUT_MS, 0, {0}};
    }
}

/* A whole hello: the process gets its ring and becomes a client (or is refused). */
static void start_client(int fd, pid_t pid, const hh_hello *hello) {
    if (hello->magic != HH_HELLO_MAGIC || hello->capacity < HH_RING_MIN_CAPACITY ||
        (hello->capacity & (hello->capacity - 1)) != 0) {
        refuse(fd, pid, "its hello is not heaphook's");
        return;
    }
    client *c = calloc(1, sizeof *c);
    int memfd = hh_ring_create_fd(hello->capacity);
    if (c == NULL || memfd < 0 || hh_ring_map(&c->ring, memfd) != 0) {
        fprintf(stderr, "heaphook record: cannot create a %llu-byte buffer for pid %d: %s\n",
                (unsigned long long)hello->capacity, (int)pid, strerror(errno));
        if (memfd >= 0) close(memfd);
        free(c);
        close(fd);
        return;
    }
    /* the kernel's pid names the log, never the one the hello claims */
    c->writer = hh_writer_open(dir, (int)pid, c->path, sizeof c->path);
    if (c->writer == NULL) {
        fprintf(stderr, "heaphook record: cannot create a log in %s: %s\n", dir, strerror(errno));
        hh_ring_unmap(&c->ring);
        close(memfd);
        free(c);
        close(fd);
        return;
    }
    hh_writer_set_pid(c->writer, (uint32_t)pid);
    char status = HH_HELLO_READY;
    struct iovec iov = {&status, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &memfd, sizeof memfd);
    ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
    close(memfd);
    c->fd = fd;
    c->pid = (int)pid;
    if ((hello->flags & HH_PF_FORK_CHILD) && pending_forks > 0) pending_forks--;
    if (nclients == capclients) {
        capclients = capclients ? capclients * 2 : 16;
        clients = realloc(clients, capclients * sizeof *clients);
    }
    clients[nclients++] = c;
    if (sent == 1) {
        printf("log %d %s\n", c->pid, c->path);
        fflush(stdout);
    }
    if (sent != 1) { /* the process went away during the handshake */
        finish(c, false);
        clients[--nclients] = NULL;
        free(c);
    }
}

/* Reads what the pending handshakes sent (those polled ready: ready[k]), starts the clients
 * whose hello is whole, and closes the connections that ended or took too long. */
static void handshake(const bool *ready) {
    uint64_t now = now_ms();
    size_t kept = 0;
    for (size_t k = 0; k < npending; k++) {
        pending *p = &pendings[k];
        bool done = false;
        if (ready[k]) {
            ssize_t n = read(p->fd, (char *)&p->hello + p->got, sizeof p->hello - p->got);
            if (n > 0) p->got += (size_t)n;
            if (p->got == sizeof p->hello) {
                start_client(p->fd, p->pid, &p->hello);
                done = true;
            } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                refuse(p->fd, p->pid, "it closed the connection during the handshake");
                done = true;
            }
        }
        if (!done && now >= p->deadline) {
            char why[64];
            snprintf(why, sizeof why, "it sent no whole hello within %d ms", HELLO_TIMEOUT_MS);
            refuse(p->fd, p->pid, why);
            done = true;
        }
        if (!done) pendings[kept++] = *p;
    }
    npending = kept;
}

static char name[108]; /* the listening socket, "@heaphook-<pid>-<random>" (abstract) */

/* Listens on a new abstract socket (name); exits with status 2 when it cannot. */
static int listen_socket(void) {
    snprintf(name, sizeof name, "@heaphook-%d-%llx", (int)getpid(),
             (unsigned long long)now_ms() ^ ((unsigned long long)rand() << 20));
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t name_len = strlen(name);
    memcpy(addr.sun_path, name, name_len);
    addr.sun_path[0] = '\0';
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener < 0 ||
        bind(listener, (struct sockaddr *)&addr,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + name_len)) != 0 ||
        listen(listener, 128) != 0) {
        fprintf(stderr, "heaphook record: cannot listen on a Unix socket: %s\n", strerror(errno));
        exit(2);
    }
    return listener;
}

/* Reads what a client sent; false when its connection closed. */
static bool read_messages(client *c) {
    char buf[512];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n > 0) {
            for (ssize_t b = 0; b < n; b++) {
                if (buf[b] == HH_MSG_FORK) pending_forks++;
                if (buf[b] == HH_MSG_EXIT) c->saw_exit = true;
                if (buf[b] == HH_MSG_DETACH) c->saw_detach = true;
            }
            continue;
        }
        return !(n == 0 || (errno != EAGAIN && errno != EINTR));
    }
}

/* The lifeline (--record): its end, or an error, means the command is done. */
static void read_lifeline(void) {
    char buf[64];
    ssize_t n = read(lifeline, buf, sizeof buf);
    if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN))) return;
    close(lifeline);
    lifeline = -1;
    command_done = 1;
}

#define AWAKE_POLL_MS \
    50 /* a round's wait while records come in (then a batch byte may come first) */
static unsigned idle_rounds; /* rounds in a row that read no record from any ring */

/* Tells every ring that the collector is going to sleep (ring.h, the sleep handshake). False,
 * with every ring told it is awake again, when one holds records (published or not yet): the
 * round must then wait with a timeout. */
static bool rings_sleep(void) {
    for (size_t k = 0; k < nclients; k++) {
        if (hh_ring_reader_sleep(&clients[k]->ring)) continue;
        while (k-- > 0) hh_ring_reader_awake(&clients[k]->ring);
        return false;
    }
    return true;
}

static void rings_awake(void) {
    for (size_t k = 0; k < nclients; k++) hh_ring_reader_awake(&clients[k]->ring);
}

/* The nearer of two poll timeouts (-1: none). */
static int sooner(int a, int b) {
    if (a < 0) return b;
    if (b < 0) return a;
    return a < b ? a : b;
}

/* How long this round may wait: AWAKE_POLL_MS while records come in; after a round that read
 * none, no timeout at all once every ring has been told (*asleep), but no later than a block a
 * writer holds is due (hh_writer_due_ms: the log follows the process as closely as when the
 * collector polled). A command that is done with no client left keeps the timer (serve_command
 * waits a little for late children). */
static int round_timeout(bool *asleep) {
    *asleep = false;
    bool timed = command_done && nclients == 0;
    if (idle_rounds == 0 || timed || !rings_sleep()) return AWAKE_POLL_MS;
    *asleep = true;
    int timeout = -1;
    for (size_t k = 0; k < nclients; k++)
        timeout = sooner(timeout, hh_writer_due_ms(clients[k]->writer));
    return timeout;
}

/* One round of the collector: waits for a wake-up (round_timeout; less when a handshake's
 * deadline comes first), reads the messages of the clients, ends the logs of those whose connection
 * closed, moves the handshakes on, accepts new connections, drains every ring and ends the logs
 * that could not be written or whose process broke the protocol. Returns -1 when poll fails, else 1
 * when a client came or went, 0 otherwise. */
static int serve_once(int listener) {
    static struct pollfd *pfds;
    static size_t pcap;
    if (pcap < nclients + 3 + PENDING_MAX) {
        pcap = (nclients + 3) * 2 + PENDING_MAX;
        pfds = realloc(pfds, pcap * sizeof *pfds);
    }
    pfds[0] = (struct pollfd){listener, POLLIN, 0};
    for (size_t k = 0; k < nclients; k++) pfds[k + 1] = (struct pollfd){clients[k]->fd, POLLIN, 0};
    pfds[nclients + 1] = (struct pollfd){lifeline, POLLIN, 0}; /* -1: ignored by poll */
    /* the handshakes under way, after the clients: the nearest deadline bounds the wait */
    size_t polled = nclients, handshakes = npending;
    bool asleep;
    int timeout = round_timeout(&asleep);
    uint64_t now = now_ms();
    for (size_t k = 0; k < handshakes; k++) {
        pfds[polled + 2 + k] = (struct pollfd){pendings[k].fd, POLLIN, 0};
        uint64_t left = pendings[k].deadline > now ? pendings[k].deadline - now : 0;
        timeout = sooner(timeout, (int)left);
    }
    /* last: the signal handlers' pipe */
    pfds[polled + 2 + handshakes] = (struct pollfd){signal_pipe[0], POLLIN, 0};
    int ready = poll(pfds, polled + 3 + handshakes, timeout);
    /* Awake before anything else: a record published from now on sends no byte. */
    if (asleep) rings_awake();
    if (ready < 0 && errno != EINTR) return -1;
    int activity = 0;
    if (ready > 0 && pfds[polled + 1].revents != 0) read_lifeline();
    if (ready > 0 && pfds[polled + 2 + handshakes].revents != 0) {
        char bytes[64]; /* the callers look at the signals' flags after the round */
        while (read(signal_pipe[0], bytes, sizeof bytes) > 0) {
        }
    }
    bool hello_ready[PENDING_MAX];
    for (size_t k = 0; k < handshakes; k++)
        hello_ready[k] = ready > 0 && pfds[polled + 2 + k].revents != 0;
    if (ready <= 0) polled = 0;
    for (size_t k = 0; k < polled && k < nclients; k++) {
        client *c = clients[k];
        if (pfds[k + 1].fd != c->fd || pfds[k + 1].revents == 0) continue;
        if (read_messages(c)) continue;
        finish(c, false);
        free(c);
        clients[k] = clients[--nclients];
        pfds[k + 1] = pfds[nclients + 1];
        k--;
        activity = 1;
    }
    /* then the handshakes (a hello made whole starts a client) and new connections */
    size_t before = nclients;
    handshake(hello_ready); /* also ends those past their deadline */
    if (nclients != before) activity = 1;
    if (ready > 0 && (pfds[0].revents & POLLIN)) {
        accept_clients(listener);
        activity = 1;
    }
    uint64_t read = 0;
    for (size_t k = 0; k < nclients; k++) {
        read += drain(clients[k], false);
        if (hh_writer_error(clients[k]->writer) == 0 &&
            hh_writer_violation(clients[k]->writer) == NULL)
            continue;
        /* a failed write, or a record that broke the format: the process runs on untraced */
        finish(clients[k], true);
        free(clients[k]);
        clients[k] = clients[--nclients];
        k--;
        activity = 1;
    }
    idle_rounds = read > 0 || activity ? 0 : idle_rounds + 1;
    return activity;
}

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
    wake_from_signal();
}

/* --attach: serves PID and its children until SIGTERM. */
static int serve_attached(int listener) {
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    struct stat in;
    if (fstat(STDIN_FILENO, &in) == 0 && (S_ISFIFO(in.st_mode) || S_ISSOCK(in.st_mode)))
        lifeline = STDIN_FILENO;
    printf("socket %s\n", name);
    fflush(stdout);
    while (!stop_requested && !command_done && serve_once(listener) >= 0) {
    }
    if (command_done && !quiet)
        fprintf(stderr,
                "heaphook-heaptrack-collector: heaphook record is gone (its pipe closed); "
                "ending the logs of process %d\n",
                (int)attach_pid);
    /* Stopped: a process that detached just now has its log closed as a detach. */
    for (size_t k = 0; k < nclients; k++) {
        bool open = read_messages(clients[k]);
        finish(clients[k], open);
        free(clients[k]);
    }
    nclients = 0;
    fflush(stdout);
    return 0;
}

/* --record: serves the command's processes until the command is done (the lifeline ended)
 * and every traced process is gone, or until signals stop it. */
static int serve_command(int listener) {
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    lifeline = STDIN_FILENO;
    printf("socket %s\n", name);
    fflush(stdout);

    bool said_first = false, stopping = false;
    sig_atomic_t passed = 0;
    uint64_t last_activity = now_ms();
    bool was_done = false;
    for (;;) {
        int served = serve_once(listener);
        if (served < 0) break;
        if (served > 0) last_activity = now_ms();
        if (command_done && !was_done) {
            was_done = true;
            last_activity = now_ms();
        }
        while (passed != pass_on) { /* a signal for the command: heaphook record sends it */
            passed++;
            printf("signal %d\n", (int)pass_on_signal);
            fflush(stdout);
        }
        if (signals_seen == 1 && !command_done && !said_first) { /* even with --quiet */
            said_first = true;
            fprintf(stderr,
                    "heaphook record: the signal went to the command; another one stops "
                    "recording (the logs are closed, the programs go on)\n");
        }
        if (signals_seen >= 2 || (signals_seen >= 1 && command_done)) {
            /* One more pass first: a process that ended just now (the command's own children
             * end before it) has its log closed as an exit, not as stopped while running. */
            if (!stopping) {
                stopping = true;
                continue;
            }
            for (size_t k = 0; k < nclients; k++) {
                finish(clients[k], true);
                free(clients[k]);
            }
            nclients = 0;
            printf("stopped\n");
            fflush(stdout);
            break;
        }
        if (command_done && nclients == 0) {
            uint64_t quiet_for = now_ms() - last_activity;
            /* A child announced by a fork may still be connecting; wait for it a little. */
            if (quiet_for >= (pending_forks > 0 ? 2000u : 100u)) break;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    bool record = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--manifest") == 0 && i + 1 < argc) {
            manifest = argv[++i];
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = true;
        } else if (strcmp(argv[i], "--record") == 0) {
            record = true;
        } else if (strcmp(argv[i], "--attach") == 0 && i + 1 < argc) {
            attach_pid = (pid_t)atoi(argv[++i]);
            if (attach_pid <= 0) usage();
        } else {
            usage();
        }
    }
    if (record == (attach_pid > 0)) usage();
    if (pipe2(signal_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        fprintf(stderr, "heaphook record: cannot create a pipe: %s\n", strerror(errno));
        return 2;
    }
    /* The credentials a peer must have: the command's (ours: heaphook record starts it as
     * itself), or PID's, as it is now (peer_trusted reads them again at every connection). */
    target_uid = geteuid();
    target_gid = getegid();
    if (attach_pid > 0 && !proc_status(attach_pid, NULL, &target_uid, &target_gid)) {
        fprintf(stderr, "heaphook record: no process with pid %d\n", (int)attach_pid);
        return 2;
    }
    /* A log over the file size limit fails with EFBIG (and ends, writer.c) instead of killing
     * the collector. */
    signal(SIGXFSZ, SIG_IGN);
    if (attach_pid > 0) return serve_attached(listen_socket());
    return serve_command(listen_socket());
}
