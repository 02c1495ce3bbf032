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
 * On the taken thread: every register (general, FP, vector) and errno are saved; the strings are
 * written below the red zone of its stack (the bytes they cover saved too); dlopen, dlsym and the
 * function are called one after the other, each returning to address 0, so its return stops the
 * thread with a fault at pc 0. A signal that arrives for the thread meanwhile is held and
 * re-delivered after the registers are restored. Restoring the registers as they were (the
 * syscall number included) lets the kernel restart an interrupted syscall exactly as it would
 * have without us.
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

enum { PICK_TIMEOUT_MS = 5000, MAX_THREADS = 1024, MAX_HELD_SIGNALS = 64, STRING_MAX = 4096 };
enum { RED_ZONE = 128, FRAME_SLACK = 64 };

struct tracee {
    pid_t tid;
    bool attached;
};

struct session {
    pid_t pid;
    pid_t tid; /* the taken thread */
    int mem_fd;
    const struct target_map *map;
    struct arch_state *saved;
    siginfo_t held[MAX_HELD_SIGNALS];
    int held_count;
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
            outside_allocator(s, s->saved)) {
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

/* Runs fn(args) on the taken thread. Returns INJECT_OK with *value, or a failure. */
static int call_in_target(struct session *s, uintptr_t fn, const uintptr_t *args, int nargs,
                          uintptr_t stack_top, uintptr_t *value) {
    if (arch_setup_call(s->tid, s->saved, fn, args, nargs, stack_top, s->mem_fd) != 0)
        return process_gone(s->pid)
                   ? exited(s->pid)
                   : refuse(INJECT_FAILED, "setting up the call: %s", strerror(errno));
    int deliver = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, s->tid, 0, (void *)(long)deliver) != 0 && errno == ESRCH)
            return exited(s->pid);
        deliver = 0;
        int status;
        pid_t got = waitpid(s->tid, &status, __WALL);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 || WIFEXITED(status) || WIFSIGNALED(status)) return exited(s->pid);
        if (!WIFSTOPPED(status)) continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (event != 0 || sig == (SIGTRAP | 0x80)) continue; /* an interrupt or group stop */
        uintptr_t pc = 0;
        if ((sig == SIGSEGV || sig == SIGBUS) && arch_call_result(s->tid, value, &pc) == 0 &&
            pc == 0)
            return INJECT_OK;
        if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP)
            return refuse(INJECT_CALL_CRASHED,
                          "the call at %#lx in process %d faulted (signal %d at pc %#lx): its "
                          "registers were restored",
                          (unsigned long)fn, (int)s->pid, sig, (unsigned long)pc);
        /* Any other signal waits until the thread is given back. */
        if (s->held_count < MAX_HELD_SIGNALS &&
            ptrace(PTRACE_GETSIGINFO, s->tid, 0, &s->held[s->held_count]) == 0)
            s->held_count++;
    }
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

/* Gives the taken thread back: registers, stack bytes, errno, held signals. */
static int release(struct session *s, const void *stack_copy, uintptr_t stack_low,
                   size_t stack_size, uintptr_t errno_address, int errno_value) {
    int code = INJECT_OK;
    if (errno_address != 0 &&
        !write_target(s->mem_fd, errno_address, &errno_value, sizeof errno_value))
        code = INJECT_FAILED;
    if (stack_copy != NULL && !write_target(s->mem_fd, stack_low, stack_copy, stack_size))
        code = INJECT_FAILED;
    if (arch_restore(s->tid, s->saved) != 0) {
        if (process_gone(s->pid)) return exited(s->pid);
        code = refuse(INJECT_FAILED, "restoring the registers of thread %d: %s", (int)s->tid,
                      strerror(errno));
    }
    int first = 0;
    if (s->held_count > 0 && ptrace(PTRACE_SETSIGINFO, s->tid, 0, &s->held[0]) == 0)
        first = s->held[0].si_signo;
    if (ptrace(PTRACE_DETACH, s->tid, 0, (void *)(long)first) != 0 && process_gone(s->pid))
        return exited(s->pid);
    for (int i = first != 0 ? 1 : 0; i < s->held_count; i++)
        syscall(SYS_tgkill, s->pid, s->tid, s->held[i].si_signo);
    return code;
}

int inject_call(const struct inject_request *request, const struct target_map *map, int *result) {
    struct session s;
    memset(&s, 0, sizeof s);
    s.pid = request->pid;
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

    /* The strings, below the red zone; the frame below them. */
    const char *strings[3] = {request->library, request->symbol,
                              request->argument != NULL ? request->argument : ""};
    uintptr_t string_at[3];
    uintptr_t cursor = (arch_sp(s.saved) - RED_ZONE) & ~(uintptr_t)15;
    uintptr_t stack_high = cursor;
    for (int i = 0; i < 3; i++) {
        cursor = (cursor - strlen(strings[i]) - 1) & ~(uintptr_t)15;
        string_at[i] = cursor;
    }
    uintptr_t stack_top = cursor - FRAME_SLACK;
    uintptr_t stack_low = stack_top - FRAME_SLACK;
    size_t stack_size = stack_high - stack_low;
    void *stack_copy = malloc(stack_size);
    if (stack_copy == NULL ||
        pread(s.mem_fd, stack_copy, stack_size, (off_t)stack_low) != (ssize_t)stack_size) {
        free(stack_copy);
        stack_copy = NULL;
        code = refuse(INJECT_FAILED, "reading the stack of thread %d: %s", (int)s.tid,
                      strerror(errno));
    }
    for (int i = 0; code == INJECT_OK && i < 3; i++)
        if (!write_target(s.mem_fd, string_at[i], strings[i], strlen(strings[i]) + 1))
            code = refuse(INJECT_FAILED, "writing to the stack of thread %d: %s", (int)s.tid,
                          strerror(errno));

    uintptr_t errno_address = 0, value = 0, handle = 0, function = 0;
    int errno_value = 0;
    if (code == INJECT_OK && map->errno_location != 0) {
        code = call_in_target(&s, map->errno_location, NULL, 0, stack_top, &errno_address);
        if (code == INJECT_OK && pread(s.mem_fd, &errno_value, sizeof errno_value,
                                       (off_t)errno_address) != sizeof errno_value)
            errno_address = 0;
    }
    if (code == INJECT_OK) {
        uintptr_t args[2] = {string_at[0], RTLD_NOW};
        code = call_in_target(&s, map->dlopen, args, 2, stack_top, &handle);
        if (code == INJECT_OK && handle == 0) {
            char reason[STRING_MAX] = "dlerror unavailable";
            uintptr_t message = 0;
            if (map->dlerror != 0 &&
                call_in_target(&s, map->dlerror, NULL, 0, stack_top, &message) == INJECT_OK &&
                message != 0)
                read_string(s.mem_fd, message, reason, sizeof reason);
            code = refuse(INJECT_DLOPEN_FAILED, "dlopen(%s) failed in process %d: %s",
                          request->library, (int)s.pid, reason);
        }
    }
    if (code == INJECT_OK) {
        uintptr_t args[2] = {handle, string_at[1]};
        code = call_in_target(&s, map->dlsym, args, 2, stack_top, &function);
        if (code == INJECT_OK && function == 0)
            code = refuse(INJECT_NO_SYMBOL, "%s has no function %s", request->library,
                          request->symbol);
    }
    if (code == INJECT_OK) {
        uintptr_t args[1] = {request->argument != NULL ? string_at[2] : 0};
        code = call_in_target(&s, function, args, 1, stack_top, &value);
        if (code == INJECT_OK) *result = (int)(uint32_t)value;
    }
    if (code != INJECT_EXITED) {
        int released = release(&s, stack_copy, stack_low, stack_size, errno_address, errno_value);
        if (code == INJECT_OK) code = released;
    }
    free(stack_copy);
    close(s.mem_fd);
    arch_state_free(s.saved);
    return code;
}
