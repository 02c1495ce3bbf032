/*
 * tracer.c — configuration, start-up, transport, fork and exit of the tracer.
 *
 * Two transports share one ring buffer format (ring.h):
 *   standalone  the ring is a memfd of this process; a drain thread writes heaplog.<pid>.log;
 *   collector   HEAPHOOK_COLLECTOR names a Unix socket; at start-up the collector hands over
 *               the ring (SCM_RIGHTS of a memfd) and is woken by one byte per batch. The
 *               collector owns the memory, so nothing written before a crash is lost.
 * A forked child starts over with a ring, a log and (standalone) a drain thread of its own.
 *
 * Contents:
 *   1. Configuration
 *   2. Clock and thread id
 *   3. Ring access and wake-ups
 *   4. Transports
 *   5. Start-up (lazy, from the first hook or the constructor)
 *   6. The drain thread (standalone)
 *   7. Fork, exec, exit
 *   8. Attach and detach (attach.c: installed into a running process, not preloaded)
 */
#include "tracer.h"
#include "fork.h"
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

extern char **environ;

hh_config hh_cfg;
_Atomic int hh_state = HH_STATE_UNINIT;
HH_TLS int hh_busy;

static HH_TLS uint32_t t_tid;

enum { HH_MODE_STANDALONE = 1, HH_MODE_COLLECTOR = 2 };
static int g_mode;
hh_ring g_ring;
int g_notify_fd = -1;             /* standalone: the drain's socket pair; collector: the socket */
static _Atomic bool g_gone;       /* collector mode: the collector went away, tracing stopped */
bool g_write_error_said;          /* standalone: a failed write of the log was said (drain lock) */
static HH_TLS bool t_fork_traced; /* this thread's fork began while recording */
static uint64_t g_batch;
static bool g_use_fast_unwind = true;
const char *g_collector;
char g_log_dir[4096];
static uint64_t g_mono_start, g_real_start, g_tsc_start;
static bool g_use_tsc; /* event times from the invariant TSC (cheaper than clock_gettime) */
bool g_fork_child;
static pid_t g_pid; /* the process the transport belongs to (a vfork child is another) */

/* standalone */
int g_drain_rd = -1;
hh_writer *g_writer;
char g_log_path[4096];
static char g_attach_dir[4096]; /* attach's log folder, when given: wins over HEAPHOOK_LOG_DIR */
char g_attach_file[4096];       /* attach's log file, when given (its folder is g_attach_dir) */
static bool g_attach_mode;      /* installed by heaphook_heaptrack_attach*: standalone, or the
                                 * collector g_attach_collector names */
static char g_attach_collector[108]; /* attach_collector's socket ("" for a standalone log) */
pid_t g_ring_pid;         /* the process that created the standalone ring and socket pair */
static int g_start_errno; /* why the last start failed */
static pthread_t g_drain;
static bool g_drain_started;
static _Atomic int g_drain_stop, g_drain_done, g_drain_lock;
/* The deferred leak table's cursor and lock (tracer.h) */
static _Atomic int g_leak_apply_lock;
static uint64_t g_leak_cursor;

static bool hh_invariant_tsc(void);
static void hh_finish_standalone_log(unsigned reason);

/* ---- 1. Configuration -------------------------------------------------------------------- */

static uint64_t hh_pow2_at_least(uint64_t n) {
    uint64_t p = HH_RING_MIN_CAPACITY;
    while (p < n && p < (1ull << 40)) p <<= 1;
    return p;
}

static void hh_read_config(void) {
    hh_cfg.stacks = heaphook_env_bool("HEAPHOOK_STACKS", NULL, true);
    hh_cfg.depth = (int)heaphook_env_long("HEAPHOOK_STACK_DEPTH", NULL, 64, 1, HH_MAX_DEPTH);
    hh_cfg.timing = heaphook_env_bool("HEAPHOOK_TIMING", NULL, false);
    hh_cfg.free_stacks = heaphook_env_bool("HEAPHOOK_FREE_STACKS", NULL, false);
    hh_cfg.sample_bytes = heaphook_env_size("HEAPHOOK_SAMPLE_BYTES", NULL, 0);
    static const char *const on_full[] = {"block", "drop"};
    hh_cfg.drop = heaphook_env_choice("HEAPHOOK_ON_FULL", NULL, on_full, 2, 0) == 1;
    size_t buffer = heaphook_env_size("HEAPHOOK_BUFFER_SIZE", NULL, 8u << 20);
    if (buffer < HH_RING_MIN_CAPACITY) {
        heaphook_config_fail(
            "HEAPHOOK_BUFFER_SIZE", heaphook_env_get("HEAPHOOK_BUFFER_SIZE", NULL),
            "a ring buffer size of at least 64KiB (65536 bytes: K is 1000, KiB 1024)", "8MiB");
    }
    hh_cfg.buffer_size = hh_pow2_at_least(buffer);
    hh_cfg.time_unit =
        (uint32_t)heaphook_env_long("HEAPHOOK_TIME_RESOLUTION", NULL, 100000, 1, 1000000000);
    static const char *const codecs[] = {"none", "deflate", "zstd"};
    hh_cfg.compress = heaphook_env_choice("HEAPHOOK_COMPRESS", NULL, codecs, 3, HH_CODEC_ZSTD);
    static const char *const clocks[] = {"tsc", "monotonic"};
    g_use_tsc =
        heaphook_env_choice("HEAPHOOK_CLOCK", NULL, clocks, 2, 0) == 0 && hh_invariant_tsc();
    static const char *const unwinders[] = {"fast", "libgcc"};
    g_use_fast_unwind = heaphook_env_choice("HEAPHOOK_UNWIND", NULL, unwinders, 2, 0) == 0;
    g_collector = g_attach_mode ? (g_attach_collector[0] != '\0' ? g_attach_collector : NULL)
                                : heaphook_env_get_unless_secure("HEAPHOOK_COLLECTOR", NULL);
    hh_cfg.vm = hh_vm_configure(g_attach_mode);
    /* Made absolute now: a fork child opens its log later, maybe after a chdir. */
    const char *dir = heaphook_env_get_unless_secure("HEAPHOOK_LOG_DIR", NULL);
    if (g_attach_dir[0] != '\0') dir = g_attach_dir;
    if (dir == NULL) dir = ".";
    size_t at = 0;
    if (dir[0] != '/' && getcwd(g_log_dir, sizeof g_log_dir - 2) != NULL) {
        at = strlen(g_log_dir);
        g_log_dir[at++] = '/';
    }
    size_t n = strlen(dir);
    if (at + n >= sizeof g_log_dir) n = sizeof g_log_dir - 1 - at;
    memcpy(g_log_dir + at, dir, n);
    g_log_dir[at + n] = '\0';
}

/* ---- 2. Clock and thread id -------------------------------------------------------------- */

static uint64_t hh_mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
static bool hh_invariant_tsc(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
}
static inline uint64_t hh_tsc(void) {
    return __rdtsc();
}
#else
static bool hh_invariant_tsc(void) {
    return false;
}
static inline uint64_t hh_tsc(void) {
    return 0;
}
#endif

/* Event times: TSC ticks when the TSC is invariant (the log writer converts them to ns),
 * else CLOCK_MONOTONIC ns. */
uint64_t hh_now(void) {
    return HH_LIKELY(g_use_tsc) ? hh_tsc() : hh_mono_now();
}

uint32_t hh_tid(void) {
    if (HH_UNLIKELY(t_tid == 0)) t_tid = (uint32_t)syscall(SYS_gettid);
    return t_tid;
}

/* ---- 3. Ring access and wake-ups --------------------------------------------------------- */

static void hh_collector_gone(int error);

/* Collector mode: a message to the collector (wake-ups, fork and exit bytes). A collector that
 * is gone (killed, or stopped by `heaphook record` and exited) never raises SIGPIPE in the
 * program: tracing stops (hh_collector_gone). A full socket buffer is no error: the collector
 * is behind, and has bytes to read already. */
static void hh_collector_send(const char *bytes, size_t len) {
    if (g_notify_fd < 0 || atomic_load_explicit(&g_gone, memory_order_relaxed)) return;
    int saved = errno;
    if (send(g_notify_fd, bytes, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
        errno != EINTR)
        hh_collector_gone(errno);
    errno = saved;
}

void hh_wake(void *arg) {
    (void)arg;
    if (g_mode == HH_MODE_COLLECTOR) {
        hh_collector_send(&(char){HH_MSG_WAKE}, 1);
        return;
    }
    if (g_notify_fd < 0) return;
    /* A socket, not a pipe: a program that closed the drain's end (a daemon closing every
     * descriptor it does not know) makes this fail with EPIPE, never raise SIGPIPE; the drain
     * then polls on a timer. */
    int saved = errno;
    char byte = HH_MSG_WAKE;
    ssize_t r = send(g_notify_fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)r;
    errno = saved;
}

void *hh_tracer_reserve(uint32_t len) {
    void *record = hh_ring_reserve(&g_ring, len, !hh_cfg.drop, hh_wake, NULL);
    /* A ring the collector closed (it stopped recording this process) drops when full */
    if (HH_UNLIKELY(record == NULL) && g_mode == HH_MODE_COLLECTOR &&
        atomic_load_explicit(&g_ring.hdr->closed, memory_order_relaxed))
        hh_collector_gone(0);
    return record;
}

void hh_tracer_count_dropped(void) {
    atomic_fetch_add_explicit(&g_ring.hdr->dropped, 1, memory_order_relaxed);
}

static void hh_count_record(void *arg, uint64_t pos, unsigned type, const void *record,
                            uint32_t len) {
    (void)pos, (void)type, (void)record, (void)len;
    ++*(uint64_t *)arg;
}

/* The collector is gone: recording stops for good (every hook forwards from now on), threads
 * waiting for room in the ring stop waiting, and the loss is said once on stderr: the records
 * the collector never read, and the calls dropped because the ring was full. */
static void hh_collector_gone(int error) {
    if (atomic_exchange(&g_gone, true)) return;
    char cause[128]; /* a closed ring: the collector finished this process's log on purpose */
    int write_error = (int)atomic_load(&g_ring.hdr->close_error);
    if (write_error != 0)
        heaphook_formatf(cause, sizeof cause, "it could not write this process's log: %s",
                         hh_error_text(write_error));
    else if (atomic_load(&g_ring.hdr->closed) || error == 0)
        heaphook_formatf(cause, sizeof cause, "heaphook record stopped recording this process");
    else
        heaphook_formatf(cause, sizeof cause, "its connection ended: %s", hh_error_text(error));
    int expected = HH_STATE_ACTIVE;
    atomic_compare_exchange_strong(&hh_state, &expected, HH_STATE_FINISHED);
    uint64_t lost = hh_ring_unpublished(&g_ring) + atomic_load(&g_ring.hdr->dropped);
    hh_ring_walk(&g_ring, atomic_load(&g_ring.hdr->read_pos), UINT64_MAX, true, hh_count_record,
                 &lost);
    hh_ring_close(&g_ring);
    heaphook_log_error("heaptrack: the collector is gone (%s); tracing stopped, %llu events lost",
                       cause, (unsigned long long)lost);
}

void hh_tracer_commit(void *record, unsigned type) {
    hh_ring_commit(&g_ring, record, type);
    /* A collector asleep on an empty ring gets one byte from the first record after it fell
     * asleep (ring.h, the sleep handshake); an awake one, one per batch. */
    if (HH_UNLIKELY(hh_ring_reader_wanted(&g_ring) || hh_ring_should_notify(&g_ring, g_batch)))
        hh_wake(NULL);
}

/* ---- 5. Start-up ------------------------------------------------------------------------- */

static uint32_t hh_read_file(const char *path, char *buf, uint32_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint32_t len = 0;
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n <= 0) break;
        len += (uint32_t)n;
    }
    close(fd);
    return len;
}

static void hh_send_process(void) {
    char exe[4096], cmdline[8192];
    ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe);
    if (exe_len < 0) exe_len = 0;
    uint32_t cmd_len = hh_read_file("/proc/self/cmdline", cmdline, sizeof cmdline);
    uint32_t len = (uint32_t)hh_round8(sizeof(hh_rec_process) + (size_t)exe_len + cmd_len);
    hh_rec_process *p = hh_tracer_reserve(len);
    if (p == NULL) return;
    p->pid = (uint32_t)getpid();
    p->ppid = (uint32_t)getppid();
    p->mono_start = g_mono_start;
    p->real_start = g_real_start;
    p->tsc_start = g_tsc_start;
    p->clock = g_use_tsc ? 1 : 0;
    p->flags = (hh_cfg.stacks ? HH_PF_STACKS : 0) | (hh_cfg.timing ? HH_PF_TIMING : 0) |
               (hh_cfg.sample_bytes ? HH_PF_SAMPLING : 0) | (hh_cfg.drop ? HH_PF_DROP : 0) |
               (hh_cfg.free_stacks ? HH_PF_FREE_STACKS : 0) |
               (g_fork_child ? HH_PF_FORK_CHILD : 0) | (hh_cfg.vm ? HH_PF_VM : 0) |
               (g_attach_mode ? HH_PF_ATTACHED : 0);
    p->stack_depth = (uint32_t)hh_cfg.depth;
    p->sample_bytes = hh_cfg.sample_bytes;
    p->time_unit = hh_cfg.time_unit;
    p->compress = hh_cfg.compress;
    p->exe_len = (uint32_t)exe_len;
    p->cmdline_len = cmd_len;
    memcpy((char *)(p + 1), exe, (size_t)exe_len);
    memcpy((char *)(p + 1) + exe_len, cmdline, cmd_len);
    hh_tracer_commit(p, HH_REC_PROCESS);
}

static void hh_set_start_times(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_real_start = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    uint64_t before = hh_tsc();
    g_mono_start = hh_mono_now();
    uint64_t after = hh_tsc();
    g_tsc_start = before + (after - before) / 2;
}

/* Sets up the transport and sends the process and module records. */
static bool hh_start_transport(void) {
    hh_set_start_times();
    g_pid = getpid();
    int rc;
    if (g_collector != NULL) {
        g_mode = HH_MODE_COLLECTOR;
        rc = hh_setup_collector();
    } else {
        g_mode = HH_MODE_STANDALONE;
        rc = hh_setup_standalone();
    }
    if (rc != 0) return false;
    g_batch = g_ring.capacity / 8;
    hh_send_process();
    hh_modules_sync();
    return true;
}

static void hh_find_self(uintptr_t *lo, uintptr_t *hi) {
    if (!hh_modules_range_of((uintptr_t)&hh_find_self, lo, hi)) *lo = *hi = 0;
}

/* With hh_state INITIALISING (claimed by the caller): configuration, transport, first records;
 * then ACTIVE, or DISABLED with g_start_errno saying why. */
static bool hh_tracer_start(void) {
    int saved = errno;
    hh_read_config();
    hh_leaks_configure();
    bool ok = hh_stacks_init() == 0;
    if (!ok) {
        heaphook_log_error(
            "heaptrack: cannot map the stack table: %s; not tracing. Raise the "
            "address-space limit (ulimit -v).",
            hh_error_text(errno));
    } else {
        uintptr_t lo, hi;
        hh_find_self(&lo, &hi);
        hh_unwind_init(lo, hi, g_use_fast_unwind);
        ok = hh_start_transport() && !atomic_load(&g_gone); /* gone while starting */
    }
    if (!ok) g_start_errno = errno;
    atomic_store_explicit(&hh_state, ok ? HH_STATE_ACTIVE : HH_STATE_DISABLED,
                          memory_order_release);
    errno = saved;
    return ok;
}

/* ---- 5b. Which processes record ----------------------------------------------------------
 *
 * heaphook record --only NAME / --no-follow. HEAPHOOK_TRACE_ONLY names programs (comma-separated
 * base names, matched against the executable's and argv[0]'s): a process of another program
 * records nothing. HEAPHOOK_TRACE_PARENT is a pid (heaphook record's): only its direct children
 * record, through their exec chain (an exec keeps the pid and the parent), and not their forks.
 * A process left out keeps the library loaded, so that what it runs can still match. */

static const char *hh_base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* Whether `name` is one of the comma-separated names of `list` (no allocation). */
static bool hh_name_listed(const char *list, const char *name) {
    size_t len = strlen(name);
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == len && n > 0 && memcmp(p, name, n) == 0) return true;
        if (end == NULL) break;
        p = end + 1;
    }
    return false;
}

static long g_trace_parent; /* HEAPHOOK_TRACE_PARENT, 0 when every process records */

static bool hh_process_selected(void) {
    g_trace_parent = heaphook_env_long("HEAPHOOK_TRACE_PARENT", NULL, 0, 0, 4194304);
    if (g_trace_parent != 0 && (long)getppid() != g_trace_parent) return false;
    const char *only = heaphook_env_get("HEAPHOOK_TRACE_ONLY", NULL);
    if (only == NULL || only[0] == '\0') return true;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        if (hh_name_listed(only, hh_base_name(exe))) return true;
    }
    return hh_name_listed(only, program_invocation_short_name);
}

bool hh_tracer_ensure(void) {
    int state = atomic_load_explicit(&hh_state, memory_order_acquire);
    if (state == HH_STATE_ACTIVE) return true;
    if (state != HH_STATE_UNINIT) return false;
    if (environ == NULL) return false; /* too early: libc has not set up the environment */
    if (!atomic_compare_exchange_strong(&hh_state, &state, HH_STATE_INITIALISING)) return false;
    if (heaphook_secure_execution()) {
        /* Preloaded into a setuid, setgid or capability program: whoever set the environment
         * must not make it write files with its privileges (heaphook/config.h). */
        heaphook_log_debug("heaptrack: secure execution (AT_SECURE): writing no log; not tracing");
        atomic_store_explicit(&hh_state, HH_STATE_DISABLED, memory_order_release);
        return false;
    }
    if (!g_attach_mode && !hh_process_selected()) {
        heaphook_log_debug(
            "heaptrack: %s is not selected (HEAPHOOK_TRACE_ONLY, "
            "HEAPHOOK_TRACE_PARENT); not tracing",
            program_invocation_short_name);
        atomic_store_explicit(&hh_state, HH_STATE_DISABLED, memory_order_release);
        return false;
    }
    return hh_tracer_start();
}

/* ---- 6. The drain thread ----------------------------------------------------------------- */

static void hh_drain_lock(void) {
    hh_spin_lock(&g_drain_lock);
}

static void hh_drain_unlock(void) {
    hh_spin_unlock(&g_drain_lock);
}

/* ---- The deferred leak table's cursor (tracer.h) ---- */

bool hh_tracer_leaks_can_defer(void) {
    return g_mode == HH_MODE_STANDALONE && g_drain_started && !hh_cfg.drop &&
           hh_cfg.sample_bytes == 0;
}

void hh_tracer_leaks_lock(void) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HH_RANK_LEAK_CURSOR, "the leak cursor lock (tracer.c)");
    hh_spin_lock(&g_leak_apply_lock);
}

void hh_tracer_leaks_unlock(void) {
    hh_spin_unlock(&g_leak_apply_lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HH_RANK_LEAK_CURSOR);
}

void hh_tracer_leaks_restart(void) {
    g_leak_cursor = g_ring.hdr != NULL ? atomic_load(&g_ring.hdr->read_pos) : 0;
}

uint64_t hh_tracer_ring_mark(void) {
    return g_ring.hdr != NULL ? atomic_load(&g_ring.hdr->write_pos) : 0;
}

/* The leak table's side of a record (cursor lock held). */
static void hh_leak_apply_record(void *arg, uint64_t pos, unsigned type, const void *record,
                                 uint32_t len) {
    (void)arg, (void)pos, (void)len;
    if (type == HH_REC_EVENT) hh_leaks_apply(record);
}

bool hh_tracer_leaks_catch_up(uint64_t limit) {
    if (g_ring.hdr == NULL) return true;
    uint64_t end = hh_tracer_ring_mark();
    if (limit < end) end = limit;
    g_leak_cursor = hh_ring_walk(&g_ring, g_leak_cursor, end, false, hh_leak_apply_record, NULL);
    return g_leak_cursor >= end;
}

/* ---- Fork: the records a child's leak table still has to apply ----
 * A fork child applies the records the drain thread had not reached when the program forked.
 * It must not read them in the ring: the ring is shared memory, and in the parent the drain
 * thread goes on, frees that space, and the writer threads reuse it while the child reads. A
 * child that read a record half overwritten put a block at address 8 in its table, and its
 * exit check faulted scanning it (the robustness test's forks under load, 1 child in 20). So
 * the forking thread copies those records, cursor lock held, into private memory the child
 * inherits, and the child reads the copy. */
static uint8_t
    *g_fork_copy; /* 2 * the ring's capacity, MAP_NORESERVE: untouched pages cost nothing */
static uint64_t g_fork_copy_capacity;
static uint64_t g_fork_copied_end;

void hh_tracer_leaks_fork_prepare(void) {
    g_fork_copied_end = g_leak_cursor;
    if (g_ring.hdr == NULL) return;
    if (g_fork_copy_capacity != g_ring.capacity) {
        if (g_fork_copy != NULL) hh_sys_munmap(g_fork_copy, 2 * g_fork_copy_capacity);
        void *m = hh_sys_mmap(NULL, 2 * g_ring.capacity, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        g_fork_copy = m == MAP_FAILED ? NULL : m;
        g_fork_copy_capacity = g_fork_copy != NULL ? g_ring.capacity : 0;
    }
    if (g_fork_copy == NULL) return; /* the child's table then misses these blocks: no fault */
    g_fork_copied_end =
        hh_ring_copy_records(&g_ring, g_leak_cursor, hh_tracer_ring_mark(), g_fork_copy);
}

void hh_tracer_leaks_fork_child(void) {
    if (g_ring.hdr == NULL || g_fork_copy == NULL) return;
    static hh_ring_header view_header; /* large for a stack, and only this thread runs */
    hh_ring view;
    hh_ring_view(&view, &view_header, &g_ring, g_fork_copy, g_fork_copied_end);
    g_leak_cursor =
        hh_ring_walk(&view, g_leak_cursor, g_fork_copied_end, true, hh_leak_apply_record, NULL);
}

/* The drain thread's reader: the leak table first (deferred mode), then the log. A record the
 * cursor has passed was applied by a leak check already. */
static void hh_drain_record(void *arg, uint64_t pos, unsigned type, const void *record,
                            uint32_t len) {
    if (atomic_load_explicit(&hh_leaks_on, memory_order_relaxed) == HH_LEAKS_DEFERRED) {
        hh_tracer_leaks_lock();
        if (atomic_load_explicit(&hh_leaks_on, memory_order_relaxed) == HH_LEAKS_DEFERRED &&
            pos >= g_leak_cursor) {
            hh_leak_apply_record(NULL, pos, type, record, len);
            g_leak_cursor = pos + len;
        }
        hh_tracer_leaks_unlock();
    }
    hh_writer_record(arg, pos, type, record, len);
}

/* The drain thread's prefetcher: the slots the leak table (deferred mode) and the writer will
 * look up for a record a few records ahead. */
static void hh_drain_prefetch(void *arg, unsigned type, const void *record) {
    if (type != HH_REC_EVENT) return;
    if (atomic_load_explicit(&hh_leaks_on, memory_order_relaxed) == HH_LEAKS_DEFERRED)
        hh_leaks_prefetch(record);
    hh_writer_prefetch(arg, type, record);
}

static void hh_drain_pass(bool final) {
    hh_drain_lock();
    if (g_writer != NULL) {
        while (hh_ring_read(&g_ring, hh_drain_record, hh_drain_prefetch, g_writer, final) > 0) {
        }
        hh_writer_tick(g_writer);
        /* A write that failed (a full disk) ended the log at its last whole block (writer.c):
         * said once; the program runs on, and the log gets its END (write_error) at the end. */
        int error = hh_writer_error(g_writer);
        if (error != 0 && !g_write_error_said) {
            g_write_error_said = true;
            heaphook_log_error("heaptrack: cannot write %s: %s; the log ends after %llu events",
                               g_log_path, hh_error_text(error),
                               (unsigned long long)hh_writer_written(g_writer));
        }
    }
    hh_drain_unlock();
}

static void *hh_drain_main(void *arg) {
    (void)arg;
    hh_busy = 1;
    hh_leaks_tracer_thread();
    char sink[256];
    while (!atomic_load(&g_drain_stop)) {
        struct pollfd p = {g_drain_rd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0 && (p.revents & (POLLNVAL | POLLERR))) {
            /* the program closed our socket (some daemons close every fd): poll on a timer */
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        while (read(g_drain_rd, sink, sizeof sink) > 0) {
        }
        hh_drain_pass(false);
    }
    atomic_store(&g_drain_done, 1);
    return NULL;
}

static void hh_start_drain_thread(void) {
    if (g_mode != HH_MODE_STANDALONE || g_drain_started) return;
    hh_writer_prepare(hh_cfg.compress);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the program's threads */
    atomic_store(&g_drain_stop, 0);
    atomic_store(&g_drain_done, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int error = pthread_create(&g_drain, &attr, hh_drain_main, NULL);
    g_drain_started = error == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!g_drain_started) { /* nothing would read the ring: a full one would block forever */
        heaphook_log_error("heaptrack: cannot start the thread that writes %s: %s; not tracing.",
                           g_log_path, hh_error_text(error));
        hh_finish_standalone_log(HH_END_LOST);
    }
}

/* Standalone mode, recording, and this process is the log's: not a vfork child, which shares
 * our memory but must not write (or finish) our log. */
static bool hh_standalone_log_is_ours(void) {
    return atomic_load(&hh_state) == HH_STATE_ACTIVE && g_mode == HH_MODE_STANDALONE &&
           getpid() == g_pid;
}

void hh_tracer_flush_now(void) {
    if (hh_standalone_log_is_ours()) {
        hh_drain_pass(false);
    } else if (g_mode == HH_MODE_COLLECTOR && atomic_load(&hh_state) == HH_STATE_ACTIVE &&
               hh_ring_pending(&g_ring) != 0) {
        hh_wake(NULL); /* a sleeping collector reads what is there before the exec */
    }
}

/* ---- 7. Fork, exec, exit ----------------------------------------------------------------- */

/* The tracer's part of the library's fork module (fork.c, which says the lock order). Whether
 * the fork began while recording is kept by the forking thread (t_fork_traced): the state may
 * change in between (the collector found gone), and the handlers must pair. Called with the
 * attach lock held, so no attach or detach changes the state meanwhile. */
void hh_tracer_prefork(void) {
    hh_busy++;
    if (atomic_load(&hh_state) == HH_STATE_ACTIVE && g_mode == HH_MODE_COLLECTOR)
        hh_collector_send(&(char){HH_MSG_FORK},
                          1); /* a child is coming: the collector waits for it */
    t_fork_traced = atomic_load(&hh_state) == HH_STATE_ACTIVE;
}

bool hh_tracer_fork_traced(void) {
    return t_fork_traced;
}

void hh_tracer_postfork_parent(void) {
    hh_busy--;
}

/* Every lock of the library is free again when this runs (fork.c): the parent's ring, writer
 * and drain lock are dropped, and the child starts a transport, a drain thread and a leak
 * thread of its own. */
void hh_tracer_postfork_child(void) {
    t_tid = 0;
    if (g_mode == HH_MODE_COLLECTOR && atomic_load(&g_gone) && g_notify_fd >= 0) {
        close(g_notify_fd); /* the parent's connection to a collector that is gone */
        g_notify_fd = -1;
    }
    if (!t_fork_traced || atomic_load(&hh_state) != HH_STATE_ACTIVE) {
        hh_busy--;
        return;
    }
    hh_modules_reset();
    hh_ring_unmap(&g_ring); /* the parent's: shared memory, not ours to write any more */
    g_leak_cursor = 0;      /* the position of the first record in the child's own ring */
    if (g_mode == HH_MODE_STANDALONE) {
        close(g_drain_rd);
        close(g_notify_fd);
        if (g_writer != NULL) hh_writer_abandon(g_writer);
        g_writer = NULL;
        g_drain_started = false;
        atomic_store(&g_drain_lock, 0); /* the parent's drain thread may have held it */
    } else {
        close(g_notify_fd);
    }
    g_notify_fd = -1;
    g_fork_child = true;
    if (g_trace_parent != 0) {
        /* HEAPHOOK_TRACE_PARENT (--no-follow): the command's own process records, not its
         * forks; the parent's transport is dropped above, and none starts here. */
        atomic_store(&hh_state, HH_STATE_DISABLED);
        hh_busy--;
        return;
    }
    atomic_store(&hh_state, HH_STATE_INITIALISING);
    bool ok = hh_start_transport() && !atomic_load(&g_gone);
    atomic_store(&hh_state, ok ? HH_STATE_ACTIVE : HH_STATE_DISABLED);
    if (ok) hh_start_drain_thread();
    hh_leaks_defer();
    if (ok) hh_leaks_start();
    hh_busy--;
}

/* Calls that were inside a hook when recording stopped still publish their records (a free's
 * is reserved before the block is released and published after it; a thread may be preempted
 * in between): the reader stops at the first unpublished record, so everything reserved after
 * it would be lost with it. Reads until every reserved record is in, or until nothing has
 * moved for a second (a thread stopped in the middle of a call). */
static void hh_read_in_flight(void) {
    int idle_ms = 0;
    for (;;) {
        uint64_t n = hh_ring_read(&g_ring, hh_drain_record, hh_drain_prefetch, g_writer, false);
        if (hh_ring_pending(&g_ring) == 0) return;
        if (n > 0) {
            idle_ms = 0;
        } else if (++idle_ms > 1000) {
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Standalone mode: stops the drain thread, stops recording, writes what the ring holds and
 * closes the log with an END record of the given reason (HH_END_*). */
static void hh_finish_standalone_log(unsigned reason) {
    if (g_drain_started) {
        atomic_store(&g_drain_stop, 1);
        hh_wake(NULL);
        for (int i = 0; i < 2000 && !atomic_load(&g_drain_done); i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    hh_drain_lock();
    atomic_store(&hh_state, HH_STATE_FINISHED);
    if (g_writer != NULL) {
        hh_read_in_flight();
        /* still unpublished after the wait: counted as dropped, and what follows is written */
        uint64_t stuck = hh_ring_unpublished(&g_ring);
        hh_ring_close(&g_ring);
        while (hh_ring_read(&g_ring, hh_drain_record, hh_drain_prefetch, g_writer, true) > 0) {
        }
        hh_writer_close(g_writer, reason, atomic_load(&g_ring.hdr->dropped) + stuck, NULL);
        g_writer = NULL;
    } else {
        hh_ring_close(&g_ring);
    }
    hh_drain_unlock();
}

void hh_tracer_finish_before_exit(void) {
    if (hh_busy || !hh_standalone_log_is_ours()) return;
    hh_busy++;
    hh_finish_standalone_log(HH_END_LOST);
    hh_busy--;
}

/* ---- 8. Attach and detach (attach.c) ------------------------------------------------------ */

void hh_tracer_wait_for_attach(void) {
    /* FINISHED: the hooks forward without recording, and hh_tracer_ensure does not start. */
    atomic_store(&hh_state, HH_STATE_FINISHED);
}

/* path made absolute (against the working directory) into out; false when too long. */
static bool hh_absolute(const char *path, char *out, size_t cap) {
    size_t at = 0;
    if (path[0] != '/') {
        if (getcwd(out, cap - 2) == NULL) return false;
        at = strlen(out);
        if (at > 0 && out[at - 1] != '/') out[at++] = '/';
    }
    size_t n = strlen(path);
    if (at + n >= cap) return false;
    memcpy(out + at, path, n + 1);
    return true;
}

/* Before an attach: the transport of the previous log is let go of when no writer can still be
 * inside it (nothing unread); otherwise it stays mapped, unused (a thread stopped in a hook may
 * write to it). A collector's ring is never reused; a standalone ring is, by a standalone log. */
static void hh_release_transport(bool collector_next) {
    if (g_ring.hdr == NULL) return;
    bool was_collector = g_mode == HH_MODE_COLLECTOR;
    if (!was_collector && !collector_next) return; /* hh_setup_standalone reuses it */
    if (hh_ring_pending(&g_ring) == 0) hh_ring_unmap(&g_ring);
    memset(&g_ring, 0, sizeof g_ring);
    if (!was_collector) {
        close(g_drain_rd);
        g_drain_rd = -1;
    }
    if (g_notify_fd >= 0) close(g_notify_fd);
    g_notify_fd = -1;
}

bool hh_tracer_attach_start(const char *where, const char *collector) {
    if (atomic_load(&hh_state) != HH_STATE_FINISHED) return false;
    hh_busy++;
    size_t collector_len = collector != NULL ? strlen(collector) : 0;
    if (collector_len >= sizeof g_attach_collector) {
        errno = ENAMETOOLONG;
        hh_busy--;
        return false;
    }
    hh_release_transport(collector_len > 0);
    memcpy(g_attach_collector, collector != NULL ? collector : "", collector_len + 1);
    atomic_store(&g_gone, false);
    g_attach_mode = true;
    g_attach_dir[0] = g_attach_file[0] = '\0';
    if (where != NULL && where[0] != '\0') {
        struct stat st;
        bool is_dir = stat(where, &st) == 0 && S_ISDIR(st.st_mode);
        char *target = is_dir ? g_attach_dir : g_attach_file;
        if (!hh_absolute(where, target, sizeof g_attach_dir)) {
            g_attach_dir[0] = g_attach_file[0] = '\0';
            errno = ENAMETOOLONG;
            hh_busy--;
            return false;
        }
        if (!is_dir) { /* a log file: a fork child's log goes next to it */
            size_t slash = (size_t)(strrchr(g_attach_file, '/') - g_attach_file);
            memcpy(g_attach_dir, g_attach_file, slash > 0 ? slash : 1);
            g_attach_dir[slash > 0 ? slash : 1] = '\0';
        }
    }
    /* A new log after an earlier one: its stacks and modules are declared again (as in a fork
     * child). */
    hh_stacks_new_log();
    hh_modules_reset();
    g_drain_started = false;
    atomic_store(&g_drain_lock, 0);
    /* Claimed here, not through hh_tracer_ensure: a thread still inside a hook from the last
     * log must not start this one. */
    atomic_store(&hh_state, HH_STATE_INITIALISING);
    bool ok = hh_tracer_start();
    int saved = ok ? errno : g_start_errno;
    if (ok) {
        hh_start_drain_thread();
        hh_leaks_defer();
        hh_leaks_start();
    } else {
        atomic_store(&hh_state, HH_STATE_FINISHED);
    }
    hh_busy--;
    errno = saved;
    return ok;
}

/* Collector mode: stops recording, waits for the calls in flight to publish their records (as
 * hh_read_in_flight: until the collector has read everything reserved, or nothing moved for a
 * second), then tells the collector this is a detach and closes the connection: the collector
 * writes the rest and ends the log with HH_END_DETACH. A straggler finds the ring closed and
 * drops its record silently (g_gone is set first). */
static void hh_finish_collector_log(void) {
    atomic_store(&hh_state, HH_STATE_FINISHED);
    uint64_t last = UINT64_MAX;
    for (int idle_ms = 0; idle_ms <= 1000; idle_ms++) {
        uint64_t pending = hh_ring_pending(&g_ring);
        if (pending == 0) break;
        if (pending != last) idle_ms = 0;
        last = pending;
        hh_wake(NULL);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&g_gone, true);
    /* Said in the ring's header first: the socket may be full of wake-up bytes the collector has
     * not read yet (its threads, blocked on a full ring, each send one per wait), and a
     * "detach" that cannot be sent would end the log as lost. */
    atomic_store_explicit(&g_ring.hdr->ending, HH_RING_ENDING_DETACH, memory_order_release);
    hh_ring_close(&g_ring);
    if (g_notify_fd >= 0) {
        static const char bye[] = {HH_MSG_DETACH, HH_MSG_WAKE};
        ssize_t sent = send(g_notify_fd, bye, sizeof bye, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)sent; /* the header says it when the socket is full */
        close(g_notify_fd);
        g_notify_fd = -1;
    }
}

void hh_tracer_attach_finish(void) {
    if (atomic_load(&hh_state) != HH_STATE_ACTIVE) {
        /* The collector went away while attached (hh_collector_gone finished recording): what
         * the attach started still ends here. */
        if (g_attach_mode && atomic_load(&g_gone)) {
            hh_busy++;
            hh_leaks_stop();
            hh_busy--;
        }
        return;
    }
    hh_busy++;
    hh_leaks_stop(); /* before the log ends: a check in progress still writes its result */
    if (g_mode == HH_MODE_COLLECTOR)
        hh_finish_collector_log();
    else
        hh_finish_standalone_log(HH_END_DETACH);
    hh_busy--;
}

int hh_tracer_collector_socket(void) {
    bool recording = atomic_load(&hh_state) == HH_STATE_ACTIVE && !atomic_load(&g_gone);
    return recording && g_mode == HH_MODE_COLLECTOR ? g_notify_fd : -1;
}

void hh_tracer_collector_hung_up(void) {
    hh_collector_gone(ECONNRESET);
}

const char *hh_tracer_log_path(void) {
    return g_log_path;
}

__attribute__((constructor(101))) static void hh_tracer_ctor(void) {
    hh_busy++;
    /* The report fd is taken and HEAPHOOK_LOG_LEVEL / HEAPHOOK_LOG_FILE are checked now, before
     * main, not at the first line logged (which may come in a forked child, mid-run). */
    (void)heaphook_report_fd();
    hh_fork_register();
    if (!hh_hooks_interposed()) {
        /* dlopen'ed, not preloaded: nothing reaches the hooks until an attach (attach.c) */
        hh_tracer_wait_for_attach();
        hh_busy--;
        return;
    }
    hh_tracer_ensure();
    if (atomic_load(&hh_state) == HH_STATE_ACTIVE) hh_start_drain_thread();
    if (atomic_load(&hh_state) == HH_STATE_ACTIVE) hh_leaks_defer();
    if (atomic_load(&hh_state) == HH_STATE_ACTIVE) hh_leaks_start();
    if (atomic_load(&hh_state) == HH_STATE_ACTIVE) hh_vm_start();
    hh_busy--;
}

__attribute__((destructor(101))) static void hh_tracer_dtor(void) {
    if (atomic_load(&hh_state) != HH_STATE_ACTIVE) return;
    hh_busy++;
    hh_rt_flush_guard(); /* rtcheck's final counts, while the log is open */
    hh_leaks_at_exit();  /* the exit leak check (HEAPHOOK_LEAK_CHECK) */
    hh_rec_exit *e = hh_tracer_reserve(sizeof *e);
    if (e != NULL) {
        e->time = hh_now();
        hh_tracer_commit(e, HH_REC_EXIT);
    }
    if (g_mode == HH_MODE_COLLECTOR) {
        /* The collector reads until the connection closes: keep recording until then. */
        hh_collector_send((char[]){HH_MSG_EXIT, HH_MSG_WAKE}, 2);
        hh_busy--;
        return;
    }
    hh_finish_standalone_log(HH_END_EXIT);
    hh_busy--;
}
