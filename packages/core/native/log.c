/*
 * log.c — the malloc-safe logger (heaphook/log.h).
 *
 * Everything here may run inside malloc, inside a fork handler or before main: no allocation,
 * no stdio, no lock. A line is formatted into a fixed buffer on the stack and written with
 * write(2) in one call, so concurrent lines do not interleave (for lines below PIPE_BUF).
 *
 * log.c and config.c depend only on each other (and internal.h): see config.c.
 *
 * Contents:
 *   1. The report fd and the level (initialised once, from the constructor or the first log)
 *   2. The formatter (a printf subset)
 *   3. Lines: heaphook_log, heaphook_fatal, hh_assert_fail
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/log.h"
#include "internal.h"

/* ---- 1. The report fd and the level --------------------------------------------------------- */

/* The report fd is moved above the descriptors programs commonly use or expect to be free. */
#define HH_REPORT_FD_MIN 100
/* The longest line written; longer messages are cut and end in "...". */
#define HH_LINE_MAX 1024
#define HH_DEFAULT_LOG_LEVEL HEAPHOOK_LOG_WARN

enum { HH_LOG_UNINIT = 0, HH_LOG_INITIALISING = 1, HH_LOG_READY = 2 };

static _Atomic int hh_log_state = HH_LOG_UNINIT;
static _Atomic int hh_report_fd_value = -1;
static _Atomic int hh_log_level = HH_DEFAULT_LOG_LEVEL;
static bool hh_report_is_file = false;

static const char *const hh_level_names[] = {"error", "warn", "info", "debug", "trace"};
#define HH_LEVEL_COUNT ((int)(sizeof hh_level_names / sizeof hh_level_names[0]))

/* stderr itself, when no duplicate could be made (below): the file it was then, so that
 * reports stop rather than go to whatever file later takes descriptor 2. */
static bool hh_report_on_stderr = false;
static dev_t hh_stderr_dev;
static ino_t hh_stderr_ino;

/* A duplicate of stderr, or -1 when stderr is closed (then reports are dropped rather than
 * written to whatever file later takes descriptor 2). When RLIMIT_NOFILE leaves no
 * descriptor at HH_REPORT_FD_MIN or above (`ulimit -n 4`), reports go to descriptor 2 itself
 * while it is the same file (hh_stderr_unchanged): a low duplicate would take a descriptor the
 * program is about to need, and no report at all would hide why tracing did not start. */
static int hh_dup_stderr(void) {
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, HH_REPORT_FD_MIN);
    if (fd >= 0 || (errno != EINVAL && errno != EMFILE)) return fd;
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0) return -1;
    hh_stderr_dev = st.st_dev;
    hh_stderr_ino = st.st_ino;
    hh_report_on_stderr = true;
    return STDERR_FILENO;
}

/* Descriptor 2 is still the file it was when the logger took it. */
static bool hh_stderr_unchanged(void) {
    struct stat st;
    return fstat(STDERR_FILENO, &st) == 0 && st.st_dev == hh_stderr_dev &&
           st.st_ino == hh_stderr_ino;
}

/* HEAPHOOK_LOG_FILE: appended to, moved to a high descriptor so that it does not take a low
 * one the program expects to get from its own open(). A symbolic link is not followed: the
 * log goes to the file named, never to one a link planted there points at. */
static int hh_open_log_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, HH_REPORT_FD_MIN);
    if (high >= 0) {
        close(fd);
        return high;
    }
    return fd;
}

/* HEAPHOOK_LOG_LEVEL: a name or its number. Parsed by hand because heaphook_env_choice does
 * not know about the numeric spellings. */
static int hh_read_log_level(void) {
    const char *value = heaphook_env_get("HEAPHOOK_LOG_LEVEL", NULL);
    if (value == NULL) return HH_DEFAULT_LOG_LEVEL;
    for (int i = 0; i < HH_LEVEL_COUNT; i++) {
        if (strcasecmp(value, hh_level_names[i]) == 0) return i;
    }
    if (value[0] >= '0' && value[0] < '0' + HH_LEVEL_COUNT && value[1] == '\0') {
        return value[0] - '0';
    }
    heaphook_config_fail("HEAPHOOK_LOG_LEVEL", value,
                         "a log level; expected one of error, warn, info, debug, trace or 0..4",
                         "debug");
}

void hh_log_init(void) {
    int state = atomic_load_explicit(&hh_log_state, memory_order_acquire);
    if (HH_LIKELY(state == HH_LOG_READY)) return;
    int expected = HH_LOG_UNINIT;
    if (!atomic_compare_exchange_strong(&hh_log_state, &expected, HH_LOG_INITIALISING)) {
        /* Another thread is taking the fd: a few system calls, wait for them. */
        while (atomic_load_explicit(&hh_log_state, memory_order_acquire) != HH_LOG_READY) {
        }
        return;
    }
    int saved_errno = errno;
    int fd = -1;
    /* Read by hand rather than with heaphook_env_get_unless_secure: its debug line would come
     * back here before the fd exists. */
    const char *path = heaphook_env_get("HEAPHOOK_LOG_FILE", NULL);
    const char *ignored_path = NULL;
    if (path != NULL && heaphook_secure_execution()) {
        ignored_path = path;
        path = NULL;
    }
    if (path != NULL) {
        fd = hh_open_log_file(path);
        hh_report_is_file = fd >= 0;
    }
    if (fd < 0) fd = hh_dup_stderr();
    atomic_store_explicit(&hh_report_fd_value, fd, memory_order_release);
    /* The fd is usable from here on, also by a config failure of the level itself. */
    atomic_store_explicit(&hh_log_state, HH_LOG_READY, memory_order_release);
    if (path != NULL && !hh_report_is_file) {
        heaphook_log_warn("cannot open HEAPHOOK_LOG_FILE=\"%s\" (errno %d); logging to stderr",
                          path, errno);
    }
    atomic_store_explicit(&hh_log_level, hh_read_log_level(), memory_order_relaxed);
    if (ignored_path != NULL) {
        heaphook_log_debug("secure execution (AT_SECURE): HEAPHOOK_LOG_FILE is ignored");
    }
    errno = saved_errno;
}

bool hh_log_is_file(void) {
    return hh_report_is_file;
}

int heaphook_report_fd(void) {
    hh_log_init();
    int fd = atomic_load_explicit(&hh_report_fd_value, memory_order_acquire);
    if (hh_report_on_stderr) {
        int saved_errno = errno;
        if (!hh_stderr_unchanged()) fd = -1;
        errno = saved_errno;
    }
    return fd;
}

/* The report fd is a duplicate of stderr made by hh_dup_stderr (not a HEAPHOOK_LOG_FILE, not
 * descriptor 2 itself, not closed). */
static int hh_report_stderr_copy(void) {
    if (atomic_load_explicit(&hh_log_state, memory_order_acquire) != HH_LOG_READY) return -1;
    if (hh_report_is_file || hh_report_on_stderr) return -1;
    return atomic_load_explicit(&hh_report_fd_value, memory_order_acquire);
}

void heaphook_log_release_stderr(void) {
    int fd = hh_report_stderr_copy();
    if (fd < 0) return;
    int saved_errno = errno;
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd >= 0) {
        dup3(null_fd, fd, O_CLOEXEC); /* atomic: a concurrent write goes to one or the other */
        close(null_fd);
    }
    errno = saved_errno;
}

void heaphook_log_retake_stderr(void) {
    int fd = hh_report_stderr_copy();
    if (fd < 0) return;
    int saved_errno = errno;
    if (fcntl(STDERR_FILENO, F_GETFD) >= 0) dup3(STDERR_FILENO, fd, O_CLOEXEC);
    errno = saved_errno;
}

int heaphook_log_enabled(heaphook_log_level level) {
    hh_log_init();
    return (int)level <= atomic_load_explicit(&hh_log_level, memory_order_relaxed);
}

void heaphook_write_all(int fd, const char *buf, size_t len) {
    if (fd < 0) return;
    int saved_errno = errno;
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        buf += n;
        len -= (size_t)n;
    }
    errno = saved_errno;
}

/* ---- 2. The formatter ------------------------------------------------------------------------ */

/* Output position in a fixed buffer; characters past the capacity are counted but dropped. */
typedef struct hh_sink {
    char *buf;
    size_t cap; /* bytes available for characters, the NUL excluded */
    size_t len;
} hh_sink;

static void hh_put(hh_sink *s, char c) {
    if (s->len < s->cap) s->buf[s->len] = c;
    s->len++;
}

static void hh_put_padded(hh_sink *s, const char *text, size_t len, int width, char pad) {
    for (int i = (int)len; i < width; i++) hh_put(s, pad);
    for (size_t i = 0; i < len; i++) hh_put(s, text[i]);
}

/* Digits of value in base 10 or 16, with an optional minus sign. */
static void hh_put_number(hh_sink *s, unsigned long long value, bool negative, unsigned base,
                          int width, char pad) {
    char digits[24]; /* 2^64 has 20 decimal digits */
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value != 0);
    char text[26];
    size_t len = 0;
    if (negative && pad == '0') {
        hh_put(s, '-');
        width--;
    } else if (negative) {
        text[len++] = '-';
    }
    while (n > 0) text[len++] = digits[--n];
    hh_put_padded(s, text, len, width, pad);
}

size_t heaphook_format(char *buf, size_t cap, const char *fmt, va_list args) {
    hh_sink s = {buf, cap > 0 ? cap - 1 : 0, 0};
    for (const char *p = fmt; *p != '\0'; p++) {
        if (*p != '%') {
            hh_put(&s, *p);
            continue;
        }
        const char *start = p++;
        char pad = ' ';
        int width = 0;
        if (*p == '0') {
            pad = '0';
            p++;
        }
        while (*p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
        int longness = 0; /* 0 int, 1 long, 2 long long, 3 size_t */
        if (*p == 'l') {
            longness = 1;
            if (*++p == 'l') {
                longness = 2;
                p++;
            }
        } else if (*p == 'z') {
            longness = 3;
            p++;
        }
        switch (*p) {
            case 'd':
            case 'i': {
                long long v = longness == 0   ? va_arg(args, int)
                              : longness == 1 ? va_arg(args, long)
                              : longness == 2 ? va_arg(args, long long)
                                              : (long long)va_arg(args, ptrdiff_t);
                unsigned long long magnitude =
                    v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
                hh_put_number(&s, magnitude, v < 0, 10, width, pad);
                break;
            }
            case 'u':
            case 'x': {
                unsigned long long v = longness == 0   ? va_arg(args, unsigned)
                                       : longness == 1 ? va_arg(args, unsigned long)
                                       : longness == 2 ? va_arg(args, unsigned long long)
                                                       : va_arg(args, size_t);
                hh_put_number(&s, v, false, *p == 'u' ? 10 : 16, width, pad);
                break;
            }
            case 'p': {
                hh_put(&s, '0');
                hh_put(&s, 'x');
                hh_put_number(&s, (uintptr_t)va_arg(args, void *), false, 16, width, pad);
                break;
            }
            case 's': {
                const char *text = va_arg(args, const char *);
                if (text == NULL) text = "(null)";
                hh_put_padded(&s, text, strlen(text), width, ' ');
                break;
            }
            case 'c':
                hh_put(&s, (char)va_arg(args, int));
                break;
            case '%':
                hh_put(&s, '%');
                break;
            default:
                /* Not understood: copy the directive literally (see log.h). */
                if (*p == '\0') p--;
                for (const char *q = start; q <= p; q++) hh_put(&s, *q);
                break;
        }
    }
    if (cap > 0) buf[s.len < s.cap ? s.len : s.cap] = '\0';
    return s.len < s.cap ? s.len : s.cap;
}

size_t heaphook_formatf(char *buf, size_t cap, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    size_t len = heaphook_format(buf, cap, fmt, args);
    va_end(args);
    return len;
}

/* ---- 3. Lines -------------------------------------------------------------------------------- */

/* Copies text into out (cap bytes, NUL included) with every control character written as
 * \xNN, so that a value from the environment or a file name echoed in a message (one with a
 * newline, an escape sequence) cannot forge a line of its own or drive the terminal. Returns
 * the length written; true in *cut when text did not fit. */
static size_t hh_escape_controls(char *out, size_t cap, const char *text, bool *cut) {
    size_t len = 0;
    *cut = false;
    for (const char *p = text; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        bool control = c < 0x20 || c == 0x7f;
        size_t need = control ? 4 : 1;
        if (len + need + 1 > cap) {
            *cut = true;
            break;
        }
        if (control) {
            out[len++] = '\\';
            out[len++] = 'x';
            out[len++] = "0123456789abcdef"[c >> 4];
            out[len++] = "0123456789abcdef"[c & 15];
        } else {
            out[len++] = (char)c;
        }
    }
    out[len] = '\0';
    return len;
}

/* "<name>[<pid>] <label>: <message>\n", cut to HH_LINE_MAX, written in one write(2). */
static void hh_write_line(const char *name, const char *label, const char *fmt, va_list args) {
    char message[HH_LINE_MAX];
    size_t formatted = heaphook_format(message, sizeof message, fmt, args);
    char line[HH_LINE_MAX];
    size_t len = heaphook_formatf(line, sizeof line, "%s[%d] %s: ", name, (int)getpid(), label);
    size_t room = sizeof line - len - 1; /* keep one byte for the newline */
    bool cut;
    len += hh_escape_controls(line + len, room, message, &cut);
    if ((cut || formatted == sizeof message - 1) && len > 3) memcpy(line + len - 3, "...", 3);
    line[len++] = '\n';
    heaphook_write_all(heaphook_report_fd(), line, len);
}

static const char *hh_level_name(heaphook_log_level level) {
    int index = (int)level;
    if (index < 0) index = 0;
    if (index >= HH_LEVEL_COUNT) index = HH_LEVEL_COUNT - 1;
    return hh_level_names[index];
}

void heaphook_log(heaphook_log_level level, const char *fmt, ...) {
    if (!heaphook_log_enabled(level)) return;
    va_list args;
    va_start(args, fmt);
    hh_write_line("heaphook", hh_level_name(level), fmt, args);
    va_end(args);
}

void heaphook_log_to(const heaphook_log_channel *channel, heaphook_log_level level, const char *fmt,
                     ...) {
    if ((int)level > channel->level) return;
    hh_log_init(); /* the report fd (HEAPHOOK_LOG_FILE) */
    va_list args;
    va_start(args, fmt);
    hh_write_line(channel->name, hh_level_name(level), fmt, args);
    va_end(args);
}

void heaphook_fatal(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    hh_write_line("heaphook", "fatal", fmt, args);
    va_end(args);
    abort();
}

void hh_assert_fail(const char *cond, const char *file, int line) {
    heaphook_fatal("assertion failed: %s (%s:%d)", cond, file, line);
}
