/*
 * client_unit.c — the agent client's modules on their own, without its hooks: sampler.c,
 * link.c, extras.c and fork.c are linked into this program (hooks.c, which would be the
 * program's malloc, is not), and this program plays the agent on a socket of its own
 * (test/unit/client-modules.test.ts runs it).
 *
 *   sampler.c   the Poisson sampling by bytes (the fraction of allocations sampled is
 *               1 - exp(-size / mean)), the counts published in steps, and the table of
 *               sampled addresses (probe limit, tombstones reused)
 *   link.c      the agent's address; the frames (HELLO first, ALLOC with its stack clipped to
 *               HH_AGENT_MAX_DEPTH, FREE, STATS counting what was delivered); a descriptor the
 *               program reused never receives a frame, and the link comes back by itself
 *   fork.c      a fork child drops the parent's link and connects on its own (its pid, by
 *               SO_PEERCRED), while the parent's link goes on
 *
 *   hh_agent_client_unit SOCKET-PATH
 * Prints one line per check and "<n> checks, <f> failed"; exits 1 when any failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "frames.h"

/* hooks.c's, which is not linked: set while the client itself runs on a thread. */
HH_TLS int hh_agent_busy;

#define MEAN_BYTES 16384u
#define SMALL_BYTES 1024u
#define SMALL_CALLS 200000
#define LARGE_BYTES (4u * MEAN_BYTES)
#define LARGE_CALLS 10000
#define PROBE_LIMIT 32 /* sampler.c's HH_PROBE_LIMIT */
#define READ_TIMEOUT_S 5
#define RECONNECT_TRIES 300 /* of 10 ms: the keeper thread retries every second */
#define CHILD_MARK 0xc41du
#define PARENT_MARK 0x9a2eu

static int checks, failed;

static void check(int ok, const char *what) {
    checks++;
    if (!ok) failed++;
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
    fflush(stdout);
}

/* ---- sampler.c ---------------------------------------------------------------------------- */

typedef struct sampling_run {
    size_t size;
    int calls;
    int sampled;
    uint64_t published; /* hh_agent_allocs_total's growth */
} sampling_run;

/* On a thread of its own: its countdown and its counts start fresh. */
static void *sample_on_new_thread(void *arg) {
    sampling_run *run = arg;
    uint64_t before = hh_agent_allocs_total();
    for (int i = 0; i < run->calls; i++) run->sampled += hh_agent_sample(run->size);
    run->published = hh_agent_allocs_total() - before;
    return NULL;
}

static sampling_run sample(size_t size, int calls) {
    sampling_run run = {size, calls, 0, 0};
    pthread_t thread;
    pthread_create(&thread, NULL, sample_on_new_thread, &run);
    pthread_join(thread, NULL);
    return run;
}

static void check_sampling(void) {
    hh_agent_sample_bytes = MEAN_BYTES;
    sampling_run small = sample(SMALL_BYTES, SMALL_CALLS);
    double expected = SMALL_CALLS * (1.0 - exp(-(double)SMALL_BYTES / MEAN_BYTES));
    /* 12,118 expected, standard deviation 107: 5 % is more than five of them */
    check(fabs(small.sampled - expected) < 0.05 * expected,
          "allocations much smaller than the mean: 1 - exp(-size/mean) of them are sampled");
    sampling_run large = sample(LARGE_BYTES, LARGE_CALLS);
    expected = LARGE_CALLS * (1.0 - exp(-(double)LARGE_BYTES / MEAN_BYTES));
    check(fabs(large.sampled - expected) < 0.01 * LARGE_CALLS,
          "allocations four times the mean: 98 % of them are sampled");
    check(small.published == SMALL_CALLS / HH_COUNT_STEP * HH_COUNT_STEP,
          "a thread's allocations are published in steps of HH_COUNT_STEP");
    hh_agent_sample_bytes = 1;
    sampling_run every = sample(16, 1000);
    check(every.sampled >= 999, "a mean of one byte samples every allocation but the first");
    hh_agent_sample_bytes = MEAN_BYTES;
}

/* PROBE_LIMIT + 1 addresses whose first slot is the same. */
static void colliding(uintptr_t *out, int count) {
    size_t slot = hh_agent_slot_of(0x10000);
    int n = 0;
    for (uintptr_t a = 0x10000; n < count; a += 16)
        if (hh_agent_slot_of(a) == slot) out[n++] = a;
}

static void check_table(void) {
    check(hh_agent_sampler_init() == 0, "the table is mapped");
    uintptr_t a = 0x7f0000001000u;
    check(!hh_agent_forget(a), "an address never sampled is not in the table");
    check(hh_agent_remember(a) && hh_agent_forget(a), "a sampled address is found once freed");
    check(!hh_agent_forget(a), "and forgotten then");
    uintptr_t same[PROBE_LIMIT + 1];
    colliding(same, PROBE_LIMIT + 1);
    int kept = 0;
    for (int i = 0; i < PROBE_LIMIT; i++) kept += hh_agent_remember(same[i]);
    check(kept == PROBE_LIMIT, "addresses of one slot take the slots after it");
    check(!hh_agent_remember(same[PROBE_LIMIT]), "past the probe limit a sample is refused");
    check(hh_agent_forget(same[PROBE_LIMIT - 1]) && hh_agent_forget(same[3]),
          "every one of them is found past the others");
    check(hh_agent_remember(same[PROBE_LIMIT]), "a forgotten address's slot is used again");
    int found = 0;
    for (int i = 0; i < PROBE_LIMIT + 1; i++)
        if (i != 3 && i != PROBE_LIMIT - 1) found += hh_agent_forget(same[i]);
    check(found == PROBE_LIMIT - 1, "the rest are all found, each once");
}

/* ---- link.c: this program plays the agent --------------------------------------------------- */

typedef union frame {
    hh_agent_frame_header h;
    hh_agent_hello hello;
    hh_agent_alloc alloc;
    hh_agent_free free;
    hh_agent_stats stats;
    uint8_t bytes[HH_AGENT_MAX_FRAME];
} frame;

static bool read_all(int fd, void *to, size_t len) {
    uint8_t *p = to;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* The next frame, or type 0 when the connection ended or stayed silent. */
static frame next_frame(int fd) {
    frame f;
    memset(&f, 0, sizeof f);
    if (!read_all(fd, &f.h, sizeof f.h) || f.h.length < sizeof f.h || f.h.length > sizeof f ||
        !read_all(fd, f.bytes + sizeof f.h, f.h.length - sizeof f.h))
        f.h.type = 0;
    return f;
}

/* The next frame that is not the keeper thread's STATS. */
static frame next_event(int fd) {
    frame f;
    do f = next_frame(fd);
    while (f.h.type == HH_AGENT_STATS);
    return f;
}

static int accept_client(int listener, pid_t *pid) {
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) return -1;
    struct timeval timeout = {READ_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    struct ucred cred;
    socklen_t len = sizeof cred;
    *pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : -1;
    return fd;
}

/* The client's descriptor: the one socket connected to the agent's path. */
static int client_fd(const char *path) {
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_un peer;
        socklen_t len = sizeof peer;
        if (getpeername(fd, (struct sockaddr *)&peer, &len) == 0 && peer.sun_family == AF_UNIX &&
            strcmp(peer.sun_path, path) == 0)
            return fd;
    }
    return -1;
}

static bool send_until_connected(uintptr_t address) {
    uintptr_t pc = address;
    for (int i = 0; i < RECONNECT_TRIES; i++) {
        if (hh_agent_send_alloc(address, 8, &pc, 1)) return true;
        hh_agent_link_ensure_thread();
        usleep(10000);
    }
    return false;
}

static void check_address(const char *path) {
    char long_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
    memset(long_path, 'a', sizeof long_path);
    memcpy(long_path, "unix:", 5);
    long_path[5 + 107] = '\0';
    bool longest = hh_agent_parse_address(long_path);
    long_path[5 + 107] = 'a';
    long_path[5 + 108] = '\0';
    check(longest && !hh_agent_parse_address(long_path),
          "a socket path of 107 bytes is taken, 108 refused");
    check(!hh_agent_parse_address("unix:") && !hh_agent_parse_address("tcp:127.0.0.1:7000") &&
              !hh_agent_parse_address(NULL),
          "an empty path, another scheme or none are refused");
    char address[128];
    snprintf(address, sizeof address, "unix:%s", path);
    check(hh_agent_parse_address(address), "unix:PATH is the agent's address");
}

static void check_frames(int listener, int *conn) {
    check(hh_agent_link_start(MEAN_BYTES) == NULL, "the link starts");
    pid_t pid;
    *conn = accept_client(listener, &pid);
    frame f = next_frame(*conn);
    check(f.h.type == HH_AGENT_HELLO && f.h.length == sizeof f.hello && pid == getpid(),
          "a connection starts with HELLO, from this process");
    check(f.hello.version == HH_AGENT_VERSION && f.hello.sample_bytes == MEAN_BYTES &&
              strcmp(f.hello.comm, "hh_agent_client") == 0 && strcmp(f.hello.backend, "glibc") == 0,
          "HELLO carries the version, the mean, the command's name and the allocator's");

    uintptr_t pcs[HH_AGENT_MAX_DEPTH + 10];
    for (unsigned i = 0; i < HH_AGENT_MAX_DEPTH + 10; i++) pcs[i] = 0x400000u + i;
    bool sent = hh_agent_send_alloc(0x5000, 123, pcs, 3);
    f = next_event(*conn);
    check(sent && f.h.type == HH_AGENT_ALLOC &&
              f.h.length == sizeof f.alloc + 3 * sizeof(uint64_t) && f.alloc.address == 0x5000 &&
              f.alloc.size == 123 && f.alloc.depth == 3 && f.alloc.pcs[0] == 0x400000u &&
              f.alloc.pcs[2] == 0x400002u,
          "ALLOC carries the address, the size and the stack, innermost first");
    sent = hh_agent_send_alloc(0x6000, 1, pcs, HH_AGENT_MAX_DEPTH + 10);
    f = next_event(*conn);
    check(sent && f.alloc.depth == HH_AGENT_MAX_DEPTH &&
              f.h.length == sizeof f.alloc + HH_AGENT_MAX_DEPTH * sizeof(uint64_t) &&
              f.h.length % 8 == 0 && f.h.length <= HH_AGENT_MAX_FRAME,
          "a deeper stack is cut at HH_AGENT_MAX_DEPTH");
    sent = hh_agent_send_free(0x5000);
    f = next_event(*conn);
    check(sent && f.h.type == HH_AGENT_FREE && f.h.length == sizeof f.free &&
              f.free.address == 0x5000,
          "FREE carries the address");
    do f = next_frame(*conn);
    while (f.h.type == HH_AGENT_STATS && f.stats.samples_total < 2);
    check(f.h.type == HH_AGENT_STATS && f.stats.samples_total == 2 &&
              f.stats.dropped_samples_total == 0,
          "STATS, every second, counts the samples delivered");
}

static void check_reused_descriptor(const char *path, int listener, int *conn) {
    int fd = client_fd(path);
    char file[] = "/tmp/hh_agent_client_unit.XXXXXX";
    int other = mkstemp(file);
    unlink(file);
    dup2(other, fd); /* the program closed the client's socket and opened a file there */
    close(other);
    bool sent = hh_agent_send_alloc(0x7000, 1, NULL, 0);
    struct stat st;
    check(!sent && fstat(fd, &st) == 0 && st.st_size == 0,
          "a descriptor the program reused never receives a frame");
    close(*conn);
    pid_t pid;
    *conn = accept_client(listener, &pid);
    frame f = next_frame(*conn);
    check(f.h.type == HH_AGENT_HELLO && pid == getpid() && send_until_connected(0x7000) &&
              next_event(*conn).alloc.address == 0x7000,
          "the keeper thread connects again, on a descriptor of its own");
}

static void check_fork(int listener, int conn) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        /* The parent's link is gone: nothing is sent until the child's own is up. */
        bool sent_on_parents = hh_agent_send_alloc(CHILD_MARK, 1, NULL, 0);
        _exit(!sent_on_parents && send_until_connected(CHILD_MARK) ? 0 : 1);
    }
    pid_t pid;
    int child_conn = accept_client(listener, &pid);
    frame hello = next_frame(child_conn);
    frame first = next_event(child_conn);
    int status;
    waitpid(child, &status, 0);
    check(pid == child && hello.h.type == HH_AGENT_HELLO && first.alloc.address == CHILD_MARK &&
              WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a fork child connects on its own: its pid, HELLO, then its samples");
    close(child_conn);
    bool sent = hh_agent_send_alloc(PARENT_MARK, 1, NULL, 0);
    check(sent && next_event(conn).alloc.address == PARENT_MARK,
          "the parent's link goes on, and no frame of the child reached it");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: hh_agent_client_unit SOCKET-PATH\n");
        return 2;
    }
    const char *path = argv[1];
    check_sampling();
    check_table();

    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(listener, 8) != 0 ||
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){READ_TIMEOUT_S, 0},
                   sizeof(struct timeval)) != 0) {
        perror(path);
        return 2;
    }
    hh_agent_fork_register(); /* as start.c does before the link starts */
    check_address(path);
    int conn;
    check_frames(listener, &conn);
    check_reused_descriptor(path, listener, &conn);
    check_fork(listener, conn);
    hh_agent_keeper_pause();
    printf("%d checks, %d failed\n", checks, failed);
    return failed == 0 ? 0 : 1;
}
