/*
 * hostile_client.c — a client of heaphook-heaptrack-collector that breaks its protocol, for
 * test/integration/collector-trust.test.ts. SOCKET is the collector's socket name
 * ("@heaphook-..."), or "-" for $HEAPHOOK_COLLECTOR. Every wait has a watchdog that names what it
 * waited for.
 *
 *   hh_test_hostile SOCKET event-first    a 48-byte EVENT record before any PROCESS record
 *   hh_test_hostile SOCKET giant-exe      a PROCESS record that claims a 3 GB exe path
 *   hh_test_hostile SOCKET big-exe        a PROCESS record with a real 8 MB exe path (16 MiB ring)
 *   hh_test_hostile SOCKET ok             a PROCESS record, 10 malloc events, the exit
 *   hh_test_hostile SOCKET claim PID      hello and PROCESS record claim pid PID, 10 events,
 *                                         then stays connected until the collector closes
 *   hh_test_hostile SOCKET stall FILE     connects, sends nothing; the program returns at once
 *                                         and a child of it keeps the connection, then writes
 *                                         "<the connecting pid> disconnected" (or "... still
 * connected") to FILE when the collector closed it (or after 30 s) hh_test_hostile SOCKET fuzz SEED
 * MS   socket-level fuzz for MS ms: random hello frames, stalled and half-sent hellos, disconnects
 * in the handshake, random bytes after a good hello and random records in the ring, many
 * connections at once hh_test_hostile target                prints "ready <pid>", then reads lines
 * from stdin:
 *                                         "<socket> <pid>" starts `hh_test_hostile <socket>
 *                                         claim <pid>` (posix_spawn: no fork handlers run) and
 *                                         prints "spawned <its pid>"; ends at the end of stdin
 *                                         (a record -p target: heaphook-inject attaches to it)
 *   hh_test_hostile churn MS [CMD]        allocates and frees for MS ms (traced: the test
 *                                         preloads the tracer); after the first 100 ms, runs
 *                                         `sh -c CMD` without LD_PRELOAD; prints "churned N"
 *
 * The protocol modes print "refused" when the collector gave no ring, else "eof <close_error>"
 * once the collector closed the connection (close_error: the ring's, EPROTO = 71 for a record
 * that broke the format).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "format/heaplog.h"
#include "ring.h"
#include "trace.h"

extern char **environ;

static const char *g_socket;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int connect_collector(void) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t n = strlen(g_socket);
    memcpy(addr.sun_path, g_socket, n);
    if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&addr,
                         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0) {
        perror("hostile: connect");
        exit(3);
    }
    return s;
}

/* The hello and the answer: the ring's memfd, or -1 when refused. */
static int handshake(int s, uint32_t pid, uint64_t capacity) {
    hh_hello hello = {HH_HELLO_MAGIC, HH_HELLO_VERSION, pid, (uint32_t)getppid(), 0, 0, capacity};
    if (send(s, &hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello) return -1;
    struct pollfd pfd = {s, POLLIN, 0};
    if (poll(&pfd, 1, 30000) != 1) {
        fprintf(stderr, "hostile: watchdog: no answer to the hello in 30 s\n");
        exit(4);
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
    ssize_t got = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (got != 1 || status != HH_HELLO_READY || c == NULL || c->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static hh_ring g_ring;

static void *reserve(uint32_t len) {
    void *r = hh_ring_reserve(&g_ring, (uint32_t)hh_round8(len), false, NULL, NULL);
    if (r == NULL) {
        fprintf(stderr, "hostile: the ring is full\n");
        exit(5);
    }
    memset((uint8_t *)r + 8, 0, hh_round8(len) - 8);
    return r;
}

static void process_record(uint32_t pid, uint32_t exe_len, uint32_t real_exe) {
    hh_rec_process *p = reserve((uint32_t)sizeof *p + real_exe);
    p->pid = pid;
    p->ppid = (uint32_t)getppid();
    p->mono_start = now_ns();
    p->time_unit = 1000;
    p->compress = HH_CODEC_ZSTD;
    p->exe_len = exe_len;
    memset(p + 1, 'x', real_exe);
    hh_ring_commit(&g_ring, p, HH_REC_PROCESS);
}

static void malloc_event(uint64_t addr) {
    hh_rec_event *e = reserve(sizeof *e);
    e->time = now_ns();
    e->tid = (uint32_t)getpid();
    e->addr = addr;
    e->size = 32;
    e->op = HH_OP_MALLOC;
    hh_ring_commit(&g_ring, e, HH_REC_EVENT);
}

/* Waits until the collector closes the connection; prints "eof <close_error>". */
static int wait_eof(int s) {
    for (uint64_t start = now_ms(); now_ms() - start < 60000;) {
        struct pollfd pfd = {s, POLLIN, 0};
        if (poll(&pfd, 1, 1000) == 1) {
            char b[64];
            ssize_t n = read(s, b, sizeof b);
            if (n <= 0) {
                printf("eof %u\n", (unsigned)atomic_load(&g_ring.hdr->close_error));
                return 0;
            }
        }
    }
    fprintf(stderr, "hostile: watchdog: the collector did not close the connection in 60 s\n");
    return 6;
}

static int protocol_mode(const char *mode, char **argv) {
    int s = connect_collector();
    uint32_t pid = (uint32_t)getpid();
    if (strcmp(mode, "claim") == 0) pid = (uint32_t)atoi(argv[3]);
    uint64_t capacity = strcmp(mode, "big-exe") == 0 ? 16u << 20 : 1u << 20;
    int fd = handshake(s, pid, capacity);
    if (fd < 0) {
        printf("refused\n");
        return 0;
    }
    if (hh_ring_map(&g_ring, fd) != 0) {
        perror("hostile: map");
        return 3;
    }
    close(fd);
    if (strcmp(mode, "event-first") == 0) {
        malloc_event(0x10000);
    } else if (strcmp(mode, "giant-exe") == 0) {
        process_record(pid, 3u << 30, 64);
    } else if (strcmp(mode, "big-exe") == 0) {
        process_record(pid, 8u << 20, 8u << 20);
    } else {
        process_record(pid, 4, 4);
        for (int i = 0; i < 10; i++) malloc_event(0x10000 + 64 * (uint64_t)i);
        if (strcmp(mode, "ok") == 0) {
            hh_rec_exit *x = reserve(sizeof *x);
            x->time = now_ns();
            hh_ring_commit(&g_ring, x, HH_REC_EXIT);
            char m[2] = {HH_MSG_WAKE, HH_MSG_EXIT};
            send(s, m, 2, MSG_NOSIGNAL);
            close(s);
            printf("sent\n");
            return 0;
        }
    }
    char wake = HH_MSG_WAKE;
    send(s, &wake, 1, MSG_NOSIGNAL);
    return wait_eof(s);
}

static int stall(const char *file) {
    int s = connect_collector();
    pid_t connector = getpid(); /* the pid the kernel gives the collector for this connection */
    pid_t child = fork();
    if (child != 0) return child < 0 ? 3 : 0; /* connected: the caller goes on */
    const char *result = "still connected after 30 s";
    struct pollfd pfd = {s, POLLIN, 0};
    if (poll(&pfd, 1, 30000) == 1) {
        char b;
        if (read(s, &b, 1) <= 0) result = "disconnected";
    }
    FILE *f = fopen(file, "w");
    if (f != NULL) {
        fprintf(f, "%d %s\n", (int)connector, result);
        fclose(f);
    }
    _exit(0);
}

/* ---- socket-level fuzz --------------------------------------------------------------------- */

static uint64_t g_rng;
static uint64_t rnd(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

static int fuzz(uint64_t seed, int ms) {
    g_rng = seed ? seed : 1;
    printf("fuzz seed %llu\n", (unsigned long long)seed);
    fflush(stdout);
    int open_fds[32];
    int nopen = 0;
    int rounds = 0;
    for (uint64_t start = now_ms(); now_ms() - start < (uint64_t)ms; rounds++) {
        int s = connect_collector();
        hh_hello hello = {HH_HELLO_MAGIC,          HH_HELLO_VERSION,       (uint32_t)rnd(),
                          (uint32_t)rnd(),         (uint32_t)rnd() & 0xff, 0,
                          1ull << (16 + rnd() % 4)};
        switch (rnd() % 7) {
            case 0: /* random bytes, random length */
            {
                uint8_t b[64];
                for (size_t i = 0; i < sizeof b; i++) b[i] = (uint8_t)rnd();
                send(s, b, rnd() % sizeof b, MSG_NOSIGNAL);
                break;
            }
            case 1: /* a hello with random fields */
                hello.magic = rnd() % 2 ? HH_HELLO_MAGIC : (uint32_t)rnd();
                hello.capacity = rnd() % 2 ? rnd() : 1ull << (rnd() % 40);
                if (hello.capacity > (1ull << 22)) hello.capacity = 1ull << 22;
                send(s, &hello, sizeof hello, MSG_NOSIGNAL);
                break;
            case 2: /* half a hello, then gone */
                send(s, &hello, rnd() % sizeof hello, MSG_NOSIGNAL);
                close(s);
                s = -1;
                break;
            case 3: /* nothing: kept open (stalled) */
                break;
            case 4: /* half a hello, kept open */
                send(s, &hello, 1 + rnd() % (sizeof hello - 1), MSG_NOSIGNAL);
                break;
            default: { /* a good hello, then random records and messages */
                hello.magic = HH_HELLO_MAGIC;
                int fd = handshake(s, (uint32_t)getpid(), 1u << 16);
                if (fd < 0) break;
                hh_ring ring;
                if (hh_ring_map(&ring, fd) == 0) {
                    g_ring = ring;
                    int records = (int)(rnd() % 8);
                    if (rnd() % 2) process_record((uint32_t)rnd(), (uint32_t)rnd() % 64, 64);
                    for (int i = 0; i < records; i++) {
                        uint32_t len = 8 + 8 * (uint32_t)(rnd() % 16);
                        uint64_t *r = hh_ring_reserve(&ring, len, false, NULL, NULL);
                        if (r == NULL) break;
                        for (uint32_t w = 1; w < len / 8; w++)
                            r[w] = rnd() % 3 ? rnd() : rnd() % 256;
                        hh_ring_commit(&ring, r, (unsigned)(1 + rnd() % 9));
                    }
                    if (rnd() % 4 == 0) /* a write position the reader must not believe */
                        atomic_store(&ring.hdr->write_pos, rnd());
                    uint8_t m[8];
                    for (size_t i = 0; i < sizeof m; i++)
                        m[i] = rnd() % 2 ? (uint8_t)rnd() : (uint8_t)HH_MSG_WAKE;
                    send(s, m, 1 + rnd() % sizeof m, MSG_NOSIGNAL);
                    hh_ring_unmap(&ring);
                }
                close(fd);
                if (rnd() % 2) {
                    close(s);
                    s = -1;
                }
                break;
            }
        }
        if (s >= 0) {
            if (nopen == 32) {
                close(open_fds[0]);
                memmove(open_fds, open_fds + 1, 31 * sizeof *open_fds);
                nopen--;
            }
            open_fds[nopen++] = s;
        }
        if (rnd() % 8 == 0) {
            struct timespec pause = {0, 2000000};
            nanosleep(&pause, NULL);
        }
    }
    for (int i = 0; i < nopen; i++) close(open_fds[i]);
    printf("fuzz rounds %d\n", rounds);
    return 0;
}

/* ---- the traced program of the stall test --------------------------------------------------- */

static volatile void *g_sink;

static int churn(int ms, const char *cmd) {
    uint64_t start = now_ms(), n = 0;
    bool spawned = cmd == NULL;
    pid_t helper = 0;
    while (now_ms() - start < (uint64_t)ms) {
        for (int i = 0; i < 256; i++) {
            void *p = malloc(16 + (n++ % 200));
            g_sink = p;
            free(p);
        }
        if (!spawned && now_ms() - start >= 100) {
            spawned = true;
            unsetenv("LD_PRELOAD");
            char *args[] = {"sh", "-c", (char *)cmd, NULL};
            if (posix_spawn(&helper, "/bin/sh", NULL, NULL, args, environ) != 0) return 3;
        }
    }
    if (helper > 0) waitpid(helper, NULL, 0);
    printf("churned %llu\n", (unsigned long long)n);
    return 0;
}

static int target(const char *self) {
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[256];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(0, line + len, sizeof line - 1 - len);
        if (n < 0 && errno == EINTR) continue; /* heaphook-inject stopped us */
        if (n <= 0) break;
        len += (size_t)n;
        line[len] = '\0';
        char *nl = strchr(line, '\n');
        if (nl == NULL) continue;
        *nl = '\0';
        char sock[200], claimed[32];
        if (sscanf(line, "%199s %31s", sock, claimed) == 2) {
            char *args[] = {(char *)self, sock, "claim", claimed, NULL};
            pid_t child;
            if (posix_spawn(&child, self, NULL, NULL, args, environ) == 0)
                printf("spawned %d\n", (int)child);
            fflush(stdout);
        }
        len = 0;
    }
    while (waitpid(-1, NULL, 0) > 0) {
    }
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc == 2 && strcmp(argv[1], "target") == 0) return target("/proc/self/exe");
    if (argc >= 3 && strcmp(argv[1], "churn") == 0)
        return churn(atoi(argv[2]), argc > 3 ? argv[3] : NULL);
    if (argc < 3) {
        fprintf(stderr, "usage: hh_test_hostile SOCKET MODE [ARG...] | churn MS [CMD]\n");
        return 2;
    }
    g_socket = strcmp(argv[1], "-") == 0 ? getenv("HEAPHOOK_COLLECTOR") : argv[1];
    if (g_socket == NULL || strlen(g_socket) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        fprintf(stderr, "hostile: no socket\n");
        return 2;
    }
    const char *mode = argv[2];
    if (strcmp(mode, "stall") == 0 && argc > 3) return stall(argv[3]);
    if (strcmp(mode, "fuzz") == 0 && argc > 4)
        return fuzz(strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (strcmp(mode, "claim") == 0 && argc < 4) return 2;
    return protocol_mode(mode, argv);
}
