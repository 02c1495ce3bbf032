/*
 * heaphook/config.h — environment configuration, parsed without allocating.
 *
 * Every reader takes the variable's name (and, where an older spelling is accepted, an alias
 * that is read when the name is unset). A malformed value is not guessed at: the reader writes
 * one line naming the variable, the value and a valid example to the report fd and ends the
 * process with _exit(HEAPHOOK_EXIT_CONFIG). Called from a library constructor, this stops the
 * program before main. None of these functions allocate or use stdio.
 */
#ifndef HEAPHOOK_CONFIG_H
#define HEAPHOOK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit status of a process stopped for a bad configuration value (EX_CONFIG of sysexits.h). */
#define HEAPHOOK_EXIT_CONFIG 78

/* Parses a size: plain bytes ("100000000"), or a number with a suffix: k/K/KB = 1000,
 * KiB = 1024, M/MB = 1000^2, MiB = 1024^2, G/GB, GiB, T/TB, TiB. Fractions are allowed with a
 * suffix ("1.5GiB"). Rejects signs, empty strings, trailing junk and overflow.
 * Returns 0 and sets *out, or -1. */
int heaphook_parse_size(const char *text, size_t *out);

/* Parses a boolean: 1/0, true/false, yes/no, on/off (any case). Returns 0 and sets *out, or -1. */
int heaphook_parse_bool(const char *text, bool *out);

/* The value of name, else of alias (may be NULL), else NULL; an empty value counts as unset. */
const char *heaphook_env_get(const char *name, const char *alias);

/* Secure execution: the kernel says the process runs with privileges its invoker does not
 * have (getauxval(AT_SECURE): setuid, setgid, file capabilities, an LSM transition). Then,
 * as glibc does for its own malloc variables, heaphook ignores every variable that names a
 * path, a file descriptor, a signal or a program, and creates no file: the person setting
 * the environment is not the one whose privileges the process holds. */
bool heaphook_secure_execution(void);

/* heaphook_env_get for a variable that names a path, a file descriptor, a signal or a program:
 * NULL under secure execution, when a set variable is ignored and one debug line says so. */
const char *heaphook_env_get_unless_secure(const char *name, const char *alias);

/* Readers: default_value when unset; the parsed value; or stop the process (see above). */
size_t heaphook_env_size(const char *name, const char *alias, size_t default_value);
bool heaphook_env_bool(const char *name, const char *alias, bool default_value);
/* An integer in [min, max]. */
long heaphook_env_long(const char *name, const char *alias, long default_value, long min, long max);
/* One of choices[0..count-1] (compared case-insensitively); returns its index. */
int heaphook_env_choice(const char *name, const char *alias, const char *const *choices, int count,
                        int default_index);

/* Stops the process for a bad value of name: one line, then _exit(HEAPHOOK_EXIT_CONFIG). */
__attribute__((noreturn)) void heaphook_config_fail(const char *name, const char *value,
                                                    const char *expected, const char *example);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_CONFIG_H */
