/*
 * hh-run: run one command and report what the kernel measured of it.
 *
 *   hh-run [--timeout SECONDS] [--env NAME=VALUE]... [--unset NAME]... [--cwd DIR] -- CMD ARGS...
 *
 * The environment changes apply to the child only, so an LD_PRELOAD given with --env never
 * loads into hh-run itself. The child gets a process group of its own; on timeout the whole
 * group is killed (a wrapper such as KDE heaptrack's script has children of its own).
 * After wait4() one JSON line goes to fd 3 when the caller opened it, else to stderr:
 *   {"exit_code":0,"signal":0,"timed_out":false,"wall_ns":..,"utime_us":..,"stime_us":..,
 *    "maxrss_kb":..,"minflt":..,"majflt":..,"nvcsw":..,"nivcsw":..}
 * The rusage is the child's and that of its descendants it waited for.
 * hh-run exits 0 when it could run the command (whatever the command's result), 127 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_timed_out = 0;
static volatile pid_t g_child = 0;

static void on_alarm(int sig) {
    (void)sig;
    g_timed_out = 1;
    if (g_child > 0) {
        kill(-g_child, SIGKILL);
        kill(g_child, SIGKILL);
    }
}

static void forward(int sig) {
    if (g_child > 0) kill(-g_child, sig);
}

static void usage(void) {
    fprintf(stderr,
            "usage: hh-run [--timeout SECONDS] [--env NAME=VALUE]... [--unset NAME]... [--cwd DIR] "
            "-- CMD "
            "ARGS...\n");
    exit(127);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    double timeout = 0;
    const char *cwd = NULL;
    int i = 1;
    /* First pass: validate; the env changes are applied in the child. */
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            timeout = atof(argv[++i]);
        } else if ((strcmp(argv[i], "--env") == 0 || strcmp(argv[i], "--unset") == 0) &&
                   i + 1 < argc) {
            i++;
        } else if (strcmp(argv[i], "--cwd") == 0 && i + 1 < argc) {
            cwd = argv[++i];
        } else {
            usage();
        }
    }
    if (i >= argc) usage();
    int cmd_index = i;

    /* fd 3 is the report channel when the caller opened it; never inherited by the command. */
    int report_fd = fcntl(3, F_GETFD) >= 0 ? 3 : 2;
    if (report_fd == 3) fcntl(3, F_SETFD, FD_CLOEXEC);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = forward;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        perror("hh-run: pipe");
        return 127;
    }

    long long t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("hh-run: fork");
        return 127;
    }
    if (pid == 0) {
        setpgid(0, 0);
        close(errpipe[0]);
        for (int k = 1; k < cmd_index - 1; k++) {
            if (strcmp(argv[k], "--env") == 0) {
                char *eq = strchr(argv[k + 1], '=');
                if (eq) {
                    *eq = '\0';
                    setenv(argv[k + 1], eq + 1, 1);
                    *eq = '=';
                }
                k++;
            } else if (strcmp(argv[k], "--unset") == 0) {
                unsetenv(argv[k + 1]);
                k++;
            } else if (strcmp(argv[k], "--timeout") == 0 || strcmp(argv[k], "--cwd") == 0) {
                k++;
            }
        }
        if (cwd && chdir(cwd) != 0) {
            int e = errno;
            (void)!write(errpipe[1], &e, sizeof e);
            _exit(127);
        }
        execvp(argv[cmd_index], &argv[cmd_index]);
        int e = errno;
        (void)!write(errpipe[1], &e, sizeof e);
        _exit(127);
    }
    g_child = pid;
    setpgid(pid, pid); /* both sides, so the group exists before any kill */
    close(errpipe[1]);
    int exec_errno = 0;
    ssize_t n;
    do {
        n = read(errpipe[0], &exec_errno, sizeof exec_errno);
    } while (n < 0 && errno == EINTR);
    close(errpipe[0]);

    if (timeout > 0) {
        struct itimerval it;
        memset(&it, 0, sizeof it);
        it.it_value.tv_sec = (time_t)timeout;
        it.it_value.tv_usec = (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6);
        if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
        setitimer(ITIMER_REAL, &it, NULL);
    }

    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    pid_t w;
    do {
        w = wait4(pid, &status, 0, &ru);
    } while (w < 0 && errno == EINTR);
    long long t1 = now_ns();
    if (timeout > 0) {
        struct itimerval off;
        memset(&off, 0, sizeof off);
        setitimer(ITIMER_REAL, &off, NULL);
    }
    /* Reap whatever the command left behind in its group (a wrapper's helpers). */
    kill(-pid, SIGKILL);

    if (w < 0) {
        perror("hh-run: wait4");
        return 127;
    }
    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

    char line[1024];
    int len = snprintf(
        line, sizeof line,
        "{\"exit_code\":%d,\"signal\":%d,\"timed_out\":%s,\"exec_errno\":%d,\"wall_ns\":%lld,"
        "\"utime_us\":%lld,\"stime_us\":%lld,\"maxrss_kb\":%ld,\"minflt\":%ld,\"majflt\":%ld,"
        "\"nvcsw\":%ld,\"nivcsw\":%ld}\n",
        exit_code, sig, g_timed_out ? "true" : "false", exec_errno, t1 - t0,
        (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
        (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec, ru.ru_maxrss, ru.ru_minflt,
        ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw);
    if (exec_errno != 0) {
        fprintf(stderr, "hh-run: cannot run %s: %s\n", argv[cmd_index], strerror(exec_errno));
    }
    ssize_t off = 0;
    while (off < len) {
        ssize_t m = write(report_fd, line + off, (size_t)(len - off));
        if (m < 0) {
            if (errno == EINTR) continue;
            return 127;
        }
        off += m;
    }
    return exec_errno != 0 ? 127 : 0;
}
