/*
 * The ptrace session of heaphook-inject. One thread of the target is taken over; the others
 * keep running, so a lock one of them holds is released and the dlopen made on the taken thread
 * can finish (stopping them all, as a debugger does, would deadlock on a lock a stopped thread
 * holds inside malloc).
 *
 * The thread is taken at a point where it is not inside the allocator: stopped in, or just
 * returning from, a syscall the allocator never makes (read, poll, nanosleep, epoll_wait ...), or
 * waiting on a futex that is not an allocator lock (pthread_join, a condition variable), and not
 * inside the dynamic loader. First the threads /proc says are in such a syscall are interrupted
 * and checked; when none is, every thread is traced syscall by syscall until one returns from
 * such a syscall, for at most PICK_TIMEOUT_MS.
 *
 * On the taken thread: every register (general, FP, vector) is saved; the strings and the return
 * trampoline's block (arch.h: the saved context as a signal frame, the call) are written below
 * the red zone of its stack, the trampoline's code into a code cave of a library (symbols.c);
 * then one PTRACE_SETREGS starts the trampoline. It calls dlopen, dlsym and the function with
 * the thread's signals blocked and reports at a syscall, where the injector reads the results
 * and lets it go; it then puts errno, its signal mask and every register back on its own and
 * returns to the interrupted code, restarting an interrupted syscall as the kernel would have.
 * The injector can die at any instant (SIGKILL of its process group): before PTRACE_SETREGS
 * the thread goes on untouched, after it the thread completes the call and returns by itself.
 * No signal is ever held by the injector: one that comes before the trampoline blocks them is
 * delivered at once, and one that comes later stays pending in the kernel until the trampoline
 * restores the mask.
 */
#include "inject.h"
#include "arch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef RTLD_NOW
#define RTLD_NOW 2
#endif

enum { PICK_TIMEOUT_MS = 5000, MAX_THREADS = 1024, STRING_MAX = 4096 };
enum { RED_ZONE = 128, FRAME_SLACK = 64 }; /* bytes left between the strings and the block */

struct tracee {
    pid_t tid;
    bool attached;
};

struct session {
    pid_t pid;
    pid_t tid; /* the taken thread */
    int mem_fd;
    const char *symbol;
    const struct target_map *map;
    struct arch_state *saved;
};

static volatile sig_atomic_t timer_fired;
static void on_alarm(int sig) {
    (void)sig;
    timer_fired = 1;
}

static void arm_timer(int milliseconds) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
    sigaction(SIGALRM, &action, NULL);
    timer_fired = 0;
    struct itimerval timer = {{0, 0}, {milliseconds / 1000, (milliseconds % 1000) * 1000}};
    setitimer(ITIMER_REAL, &timer, NULL);
}

static void disarm_timer(void) {
    struct itimerval timer = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &timer, NULL);
}

/* Tests only: HEAPHOOK_INJECT_DIE_AT=<moment> makes the injector kill itself (SIGKILL, as a
 * cancelled job or the OOM killer would) at that moment of the session: picking (threads seized,
 * one stop seen), seized (the thread taken, nothing written), started (the trampoline just
 * started), report (the call done, the thread stopped at the report). */
static void die_at(const char *moment) {
    const char *wanted = getenv("HEAPHOOK_INJECT_DIE_AT");
    if (wanted != NULL && strcmp(wanted, moment) == 0) raise(SIGKILL);
}

/* Whether the process is gone (or a zombie: its threads have exited). */
static bool process_gone(pid_t pid) {
    char path[64], state = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "r");
    if (file == NULL) return true;
    int got = fscanf(file, "%*d (%*[^)]) %c", &state);
    fclose(file);
    return got != 1 || state == 'Z' || state == 'X';
}

static int exited(pid_t pid) {
    return refuse(INJECT_EXITED, "process %d exited during the attach (nothing was left behind)",
                  (int)pid);
}

/* The target's threads, the main thread first. */
static size_t list_threads(pid_t pid, pid_t *tids, size_t capacity) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *dir = opendir(path);
    if (dir == NULL) return 0;
    size_t count = 0;
    tids[count++] = pid;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL && count < capacity) {
        pid_t tid = (pid_t)atoi(entry->d_name);
        if (tid > 0 && tid != pid) tids[count++] = tid;
    }
    closedir(dir);
    return count;
}

/* The syscall /proc/PID/task/TID/syscall shows the thread blocked in (-1: none or unknown). */
static long blocked_syscall(pid_t pid, pid_t tid) {
    char path[96], text[64] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    FILE *file = fopen(path, "r");
    if (file == NULL) return -1;
    if (fgets(text, sizeof text, file) == NULL) text[0] = '\0';
    fclose(file);
    if (text[0] < '0' || text[0] > '9') return -1;
    return strtol(text, NULL, 10);
}

/* Whether a signal the thread does not block is pending for it (or for the process): it is
 * about to run a handler, and the kernel to decide whether its interrupted syscall restarts or
 * fails with EINTR. Such a thread is let go to do that, not taken now. */
static bool signal_waiting(pid_t pid, pid_t tid) {
    char path[96], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    FILE *file = fopen(path, "r");
    if (file == NULL) return false;
    unsigned long long pending = 0, blocked = 0, value;
    while (fgets(line, sizeof line, file) != NULL) {
        if (sscanf(line, "SigPnd: %llx", &value) == 1 || sscanf(line, "ShdPnd: %llx", &value) == 1)
            pending |= value;
        else if (sscanf(line, "SigBlk: %llx", &value) == 1)
            blocked = value;
    }
    fclose(file);
    return (pending & ~blocked) != 0;
}

/* Whether the saved thread is at a point outside the allocator (see the file's comment). */
static bool outside_allocator(const struct session *s, const struct arch_state *state) {
    long number = arch_syscall_number(state);
    if (number < 0) return false;
    const struct target_object *at = object_at(s->map, arch_pc(state));
    if (at != NULL && at->is_loader) return false;
    if (arch_syscall_outside_allocator(number)) return true;
    if (arch_syscall_is_futex_wait(state))
        return !is_allocator_data(s->pid, s->map, arch_syscall_arg(state, 0));
    return false;
}

/* Seize failed with EPERM: say why. */
static int permission_refusal(pid_t pid) {
    int scope = yama_scope();
    if (scope >= 1 && yama_forbids(scope, is_ancestor_of(pid), has_cap_sys_ptrace()))
        return refuse(INJECT_YAMA,
                      "kernel.yama.ptrace_scope = %d lets only a parent process (or "
                      "CAP_SYS_PTRACE) attach: run heaphook as root (sudo), or sudo sysctl "
                      "kernel.yama.ptrace_scope=0",
                      scope);
    return refuse(INJECT_PERMISSION,
                  "the kernel refused to attach to process %d (EPERM: another user's or a "
                  "non-dumpable process, or a tracer attached just now): run heaphook as root",
                  (int)pid);
}

/*
 * Seizes the threads, interrupts them and examines their stops; with trace_syscalls, follows
 * them from syscall to syscall until one returns from a syscall outside the allocator. That
 * thread stays stopped (s->tid, s->saved); every other is detached, each pending signal
 * passed on. Returns INJECT_OK, INJECT_BUSY (none found in time) or a refusal.
 */
static int pick_thread(struct session *s, const pid_t *tids, size_t count, bool trace_syscalls,
                       int timeout_ms) {
    struct tracee *tracees = calloc(count, sizeof *tracees);
    if (tracees == NULL) return refuse(INJECT_FAILED, "out of memory");
    size_t live = 0;
    for (size_t i = 0; i < count; i++) {
        tracees[i].tid = tids[i];
        if (ptrace(PTRACE_SEIZE, tids[i], 0, (void *)(long)PTRACE_O_TRACESYSGOOD) != 0) {
            if (errno == EPERM && live == 0) {
                free(tracees);
                return permission_refusal(s->pid);
            }
            continue; /* the thread has exited */
        }
        tracees[i].attached = true;
        live++;
        ptrace(PTRACE_INTERRUPT, tids[i], 0, 0);
    }
    if (live == 0) {
        free(tracees);
        return process_gone(s->pid) ? exited(s->pid) : INJECT_BUSY;
    }
    arm_timer(timeout_ms);
    bool finishing = false; /* chosen, or out of time: detach the rest */
    s->tid = 0;
    while (live > 0) {
        if (timer_fired && !finishing) {
            finishing = true;
            for (size_t i = 0; i < count; i++)
                if (tracees[i].attached) ptrace(PTRACE_INTERRUPT, tracees[i].tid, 0, 0);
        }
        int status;
        pid_t tid = waitpid(-1, &status, __WALL);
        if (tid < 0) {
            if (errno == EINTR) continue;
            break; /* ECHILD: every tracee is gone */
        }
        die_at("picking");
        struct tracee *t = NULL;
        for (size_t i = 0; i < count; i++)
            if (tracees[i].tid == tid) t = &tracees[i];
        if (t == NULL || !t->attached) continue;
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            t->attached = false;
            live--;
            continue;
        }
        if (!WIFSTOPPED(status)) continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        int deliver = 0;
        bool at_exit_or_interrupt = false;
        if (event == PTRACE_EVENT_STOP) {
            at_exit_or_interrupt = true;
        } else if (sig == (SIGTRAP | 0x80)) {
            struct __ptrace_syscall_info info;
            if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, (void *)sizeof info, &info) > 0)
                at_exit_or_interrupt = info.op == PTRACE_SYSCALL_INFO_EXIT;
        } else if (event == 0) {
            deliver = sig;
        }
        if (!finishing && at_exit_or_interrupt && arch_save(tid, s->saved) == 0 &&
            outside_allocator(s, s->saved) && !signal_waiting(s->pid, tid)) {
            s->tid = tid;
            t->attached = false; /* kept stopped: the session owns it now */
            live--;
            finishing = true;
            for (size_t i = 0; i < count; i++)
                if (tracees[i].attached) ptrace(PTRACE_INTERRUPT, tracees[i].tid, 0, 0);
            continue;
        }
        if (finishing || !trace_syscalls) {
            ptrace(PTRACE_DETACH, tid, 0, (void *)(long)deliver);
            t->attached = false;
            live--;
            continue;
        }
        ptrace(PTRACE_SYSCALL, tid, 0, (void *)(long)deliver);
    }
    disarm_timer();
    free(tracees);
    if (s->tid != 0) return INJECT_OK;
    return process_gone(s->pid) ? exited(s->pid) : INJECT_BUSY;
}

static bool write_target(int fd, uintptr_t at, const void *data, size_t size) {
    return pwrite(fd, data, size, (off_t)at) == (ssize_t)size;
}

/* Reads a NUL-terminated string of the target (at most size - 1 bytes). */
static void read_string(int fd, uintptr_t at, char *buffer, size_t size) {
    ssize_t got = pread(fd, buffer, size - 1, (off_t)at);
    buffer[got > 0 ? (size_t)got : 0] = '\0';
    buffer[strnlen(buffer, size - 1)] = '\0';
}

/* Writes bytes into read-only code of the stopped thread's process with PTRACE_POKEDATA (a
 * ptrace write forces its way into a private mapping, copying the page, whether or not the
 * kernel lets /proc/PID/mem do the same). */
static bool poke_code(pid_t tid, uintptr_t at, const unsigned char *bytes, size_t size) {
    for (size_t done = 0; done < size;) {
        uintptr_t word_at = (at + done) & ~(uintptr_t)7;
        size_t skip = (at + done) - word_at;
        errno = 0;
        long word = ptrace(PTRACE_PEEKDATA, tid, (void *)word_at, 0);
        if (errno != 0) return false;
        size_t n = sizeof word - skip;
        if (n > size - done) n = size - done;
        memcpy((unsigned char *)&word + skip, bytes + done, n);
        if (ptrace(PTRACE_POKEDATA, tid, (void *)word_at, (void *)word) != 0) return false;
        done += n;
    }
    return true;
}

/*
 * Puts the return trampoline into a code cave (symbols.c): libc's first, then the loader's, then
 * any object's, one whose bytes are all zero (unused) or hold the trampoline already (an earlier
 * injection, or another injector now: the same bytes, so rewriting them is harmless). Returns
 * its address, or 0.
 */
static uintptr_t place_trampoline(struct session *s) {
    size_t size;
    const unsigned char *code = arch_trampoline(&size);
    unsigned char *current = malloc(size);
    if (current == NULL) return 0;
    uintptr_t placed = 0;
    for (int rank = 2; rank >= 0 && placed == 0; rank--) {
        for (size_t i = 0; i < s->map->count && placed == 0; i++) {
            const struct target_object *object = &s->map->objects[i];
            if (object->cave_rank != rank || object->cave_size < size) continue;
            if (pread(s->mem_fd, current, size, (off_t)object->cave) != (ssize_t)size) continue;
            bool same = memcmp(current, code, size) == 0, empty = true;
            for (size_t b = 0; b < size && empty; b++) empty = current[b] == 0;
            if (!same && !empty) continue;
            if (!same && !poke_code(s->tid, object->cave, code, size)) continue;
            if (pread(s->mem_fd, current, size, (off_t)object->cave) == (ssize_t)size &&
                memcmp(current, code, size) == 0)
                placed = object->cave;
        }
    }
    free(current);
    return placed;
}

/*
 * Runs the trampoline on the taken thread (arch.h) and follows it syscall by syscall to its
 * report, where *outcome is read; then lets it go on alone to put itself back. A signal that
 * comes before the trampoline has blocked signals is delivered at once, never held (a held
 * signal would be lost if the injector died). A fault is the call-crashed failure: the thread
 * is put back as it was (arch_abandon_call) and released without the fault's signal.
 */
static int run_trampoline(struct session *s, uintptr_t code, uintptr_t below,
                          const struct arch_call *call, struct arch_outcome *outcome) {
    uintptr_t block = 0;
    if (arch_start_trampoline(s->tid, s->mem_fd, s->saved, code, below, call, &block) != 0) {
        if (process_gone(s->pid)) return exited(s->pid);
        int code_failed = refuse(INJECT_FAILED, "starting the call in thread %d: %s", (int)s->tid,
                                 strerror(errno));
        ptrace(PTRACE_DETACH, s->tid, 0, 0); /* its registers were not changed */
        return code_failed;
    }
    die_at("started");
    int deliver = 0;
    for (;;) {
        if (ptrace(PTRACE_SYSCALL, s->tid, 0, (void *)(long)deliver) != 0 && errno == ESRCH)
            return exited(s->pid);
        deliver = 0;
        int status;
        pid_t got = waitpid(s->tid, &status, __WALL);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 || WIFEXITED(status) || WIFSIGNALED(status)) return exited(s->pid);
        if (!WIFSTOPPED(status)) continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (event != 0) continue; /* an interrupt or a group stop */
        if (sig == (SIGTRAP | 0x80)) {
            struct __ptrace_syscall_info info;
            if (ptrace(PTRACE_GET_SYSCALL_INFO, s->tid, (void *)sizeof info, &info) > 0 &&
                info.op == PTRACE_SYSCALL_INFO_ENTRY &&
                arch_at_report(code, (uintptr_t)info.instruction_pointer, (long)info.entry.nr)) {
                if (arch_read_outcome(s->mem_fd, block, outcome) != 0)
                    return process_gone(s->pid)
                               ? exited(s->pid)
                               : refuse(INJECT_FAILED, "reading the results: %s", strerror(errno));
                die_at("report");
                return INJECT_OK; /* still stopped at the report: the caller detaches */
            }
            continue;
        }
        siginfo_t info;
        bool fault =
            (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP) &&
            ptrace(PTRACE_GETSIGINFO, s->tid, 0, &info) == 0 && info.si_code > 0;
        if (!fault) {
            deliver = sig;
            continue;
        }
        uintptr_t pc = 0;
        struct arch_state *now = arch_state_new();
        if (now != NULL && arch_save(s->tid, now) == 0) pc = arch_pc(now);
        arch_state_free(now);
        if (arch_abandon_call(s->tid, s->mem_fd, s->saved, block) != 0) {
            /* Released with its fault: nothing else can be done for it. */
            int failed = refuse(INJECT_FAILED,
                                "the call in process %d faulted (signal %d at pc %#lx) and its "
                                "thread could not be put back: %s",
                                (int)s->pid, sig, (unsigned long)pc, strerror(errno));
            ptrace(PTRACE_DETACH, s->tid, 0, (void *)(long)sig);
            return failed;
        }
        ptrace(PTRACE_DETACH, s->tid, 0, 0);
        return refuse(INJECT_CALL_CRASHED,
                      "the call of %s in process %d faulted (signal %d at pc %#lx): its "
                      "registers were restored",
                      s->symbol, (int)s->pid, sig, (unsigned long)pc);
    }
}

int inject_call(const struct inject_request *request, const struct target_map *map, int *result) {
    struct session s;
    memset(&s, 0, sizeof s);
    s.pid = request->pid;
    s.symbol = request->symbol;
    s.map = map;
    s.saved = arch_state_new();
    if (s.saved == NULL) return refuse(INJECT_FAILED, "out of memory");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)s.pid);
    s.mem_fd = open(path, O_RDWR | O_CLOEXEC);
    if (s.mem_fd < 0) {
        arch_state_free(s.saved);
        if (errno == ENOENT) return exited(s.pid);
        return permission_refusal(s.pid);
    }

    static pid_t tids[MAX_THREADS], idle[MAX_THREADS];
    size_t count = list_threads(s.pid, tids, MAX_THREADS), idle_count = 0;
    for (size_t i = 0; i < count; i++) {
        long number = blocked_syscall(s.pid, tids[i]);
        if (number >= 0) idle[idle_count++] = tids[i];
    }
    int code = INJECT_BUSY;
    if (idle_count > 0) code = pick_thread(&s, idle, idle_count, false, 1000);
    if (code == INJECT_BUSY) code = pick_thread(&s, tids, count, true, PICK_TIMEOUT_MS);
    if (code == INJECT_BUSY)
        code = refuse(INJECT_BUSY,
                      "no thread of process %d reached a point outside the allocator within %d "
                      "ms (every thread busy in malloc?): try again",
                      (int)s.pid, PICK_TIMEOUT_MS);
    if (code != INJECT_OK) {
        close(s.mem_fd);
        arch_state_free(s.saved);
        return code;
    }

    die_at("seized");
    /* Until the thread's registers change (one PTRACE_SETREGS in arch_start_trampoline), every
     * write is harmless if we die: the code cave is unused, and the stack below the red zone is
     * free by the ABI (a signal handler would overwrite it too). From then on the thread
     * completes the call and puts itself back on its own. */
    uintptr_t code_at = place_trampoline(&s);
    if (code_at == 0) {
        code = refuse(INJECT_FAILED,
                      "process %d has no unused bytes after the code of its libraries to put "
                      "the call's return trampoline in",
                      (int)s.pid);
        ptrace(PTRACE_DETACH, s.tid, 0, 0);
        close(s.mem_fd);
        arch_state_free(s.saved);
        return code;
    }
    /* The strings below the red zone; the trampoline's block below them. */
    const char *strings[3] = {request->library, request->symbol,
                              request->argument != NULL ? request->argument : ""};
    uintptr_t string_at[3];
    uintptr_t cursor = (arch_sp(s.saved) - RED_ZONE) & ~(uintptr_t)15;
    for (int i = 0; i < 3; i++) {
        cursor = (cursor - strlen(strings[i]) - 1) & ~(uintptr_t)15;
        string_at[i] = cursor;
        if (!write_target(s.mem_fd, cursor, strings[i], strlen(strings[i]) + 1)) {
            code = process_gone(s.pid)
                       ? exited(s.pid)
                       : refuse(INJECT_FAILED, "writing to the stack of thread %d: %s", (int)s.tid,
                                strerror(errno));
            if (code != INJECT_EXITED) ptrace(PTRACE_DETACH, s.tid, 0, 0);
            close(s.mem_fd);
            arch_state_free(s.saved);
            return code;
        }
    }
    struct arch_call call = {map->dlopen,
                             map->dlsym,
                             map->dlerror,
                             map->errno_location,
                             string_at[0],
                             string_at[1],
                             request->argument != NULL ? string_at[2] : 0};
    struct arch_outcome outcome;
    memset(&outcome, 0, sizeof outcome);
    code = run_trampoline(&s, code_at, cursor - FRAME_SLACK, &call, &outcome);
    if (code == INJECT_OK) {
        char reason[STRING_MAX] = "dlerror unavailable";
        if (outcome.stage >= ARCH_STAGE_DLOPEN && outcome.handle == 0 && outcome.message != 0)
            read_string(s.mem_fd, outcome.message, reason, sizeof reason);
        /* The thread, stopped at the report, puts itself back once let go. */
        if (ptrace(PTRACE_DETACH, s.tid, 0, 0) != 0 && process_gone(s.pid)) {
            code = exited(s.pid);
        } else if (outcome.stage < ARCH_STAGE_DLOPEN || outcome.handle == 0) {
            code = refuse(INJECT_DLOPEN_FAILED, "dlopen(%s) failed in process %d: %s",
                          request->library, (int)s.pid, reason);
        } else if (outcome.function == 0) {
            code = refuse(INJECT_NO_SYMBOL, "%s has no function %s", request->library,
                          request->symbol);
        } else {
            *result = (int)(uint32_t)outcome.result;
        }
    }
    close(s.mem_fd);
    arch_state_free(s.saved);
    return code;
}
