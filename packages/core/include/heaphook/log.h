/*
 * heaphook/log.h — a logger that is safe inside malloc: write(2) on a fixed buffer, no stdio,
 * no allocation, no lock.
 *
 * Messages go to the report fd: a duplicate of stderr taken when the core is loaded, so a
 * program that closes fd 2 (coreutils do, before library destructors run) does not silence
 * the exit report. HEAPHOOK_LOG_FILE=<path> sends them to a file instead (opened at start-up,
 * appended to). HEAPHOOK_LOG_LEVEL selects what is written: error, warn (default), info,
 * debug, trace, or 0..4.
 *
 * Lines look like "heaphook[<pid>] <level>: <message>\n". The format understands the
 * conversions %s %c %d %i %u %x %p %% with the l, ll and z length modifiers, a '0' flag and a
 * field width; anything else is copied literally.
 */
#ifndef HEAPHOOK_LOG_H
#define HEAPHOOK_LOG_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum heaphook_log_level {
    HEAPHOOK_LOG_ERROR = 0,
    HEAPHOOK_LOG_WARN = 1,
    HEAPHOOK_LOG_INFO = 2,
    HEAPHOOK_LOG_DEBUG = 3,
    HEAPHOOK_LOG_TRACE = 4,
} heaphook_log_level;

/* True when messages of this level are written. */
int heaphook_log_enabled(heaphook_log_level level);

void heaphook_log(heaphook_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define heaphook_log_error(...) heaphook_log(HEAPHOOK_LOG_ERROR, __VA_ARGS__)
#define heaphook_log_warn(...) heaphook_log(HEAPHOOK_LOG_WARN, __VA_ARGS__)
#define heaphook_log_info(...) heaphook_log(HEAPHOOK_LOG_INFO, __VA_ARGS__)
#define heaphook_log_debug(...) heaphook_log(HEAPHOOK_LOG_DEBUG, __VA_ARGS__)
#define heaphook_log_trace(...) heaphook_log(HEAPHOOK_LOG_TRACE, __VA_ARGS__)

/* A component's own channel: the same report fd, formatter and escaping, but lines named
 * "<name>[<pid>] <level>: " and a level of its own, which the component reads from its own
 * variable (ucm-hooks: HEAPHOOK_MEM_LOG_LEVEL, libucm's spelling) rather than
 * HEAPHOOK_LOG_LEVEL. level is a heaphook_log_level; the default is WARN. */
typedef struct heaphook_log_channel {
    const char *name;
    int level;
} heaphook_log_channel;

void heaphook_log_to(const heaphook_log_channel *channel, heaphook_log_level level, const char *fmt,
                     ...) __attribute__((format(printf, 3, 4)));

/* Formats into buf (always NUL-terminated when cap > 0); returns the length written. */
size_t heaphook_format(char *buf, size_t cap, const char *fmt, va_list args);
size_t heaphook_formatf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The fd opened at start-up for reports and logs (see above). */
int heaphook_report_fd(void);

/* For a library that stays loaded in a process it stopped serving (heaptrack's detach): lets
 * go of the program's stderr, so that a program that closes its stderr (a daemon, the writer
 * end of a pipe whose reader waits for the end) is not held open by us. The report fd is
 * pointed at /dev/null rather than closed: a thread still inside a hook may be about to write
 * to it, and a closed number may be the program's next open(). heaphook_log_retake_stderr()
 * (at the next attach) points it at the program's stderr again. Neither changes a
 * HEAPHOOK_LOG_FILE, and both do nothing before the first message. Not thread-safe against
 * each other: the caller serialises them (heaptrack's attach lock). */
void heaphook_log_release_stderr(void);
void heaphook_log_retake_stderr(void);

/* Writes all of buf to fd, retrying on EINTR and short writes; errno is preserved. */
void heaphook_write_all(int fd, const char *buf, size_t len);

/* Writes one formatted line to the report fd regardless of the level, then abort()s.
 * For states that must not continue: an invalid free, a corrupted heap. */
__attribute__((noreturn)) void heaphook_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_LOG_H */
