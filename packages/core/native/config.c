/*
 * config.c — environment configuration parsed without allocating (heaphook/config.h).
 *
 * These run in library constructors and inside the first malloc, before the program's main:
 * no allocation, no stdio, no locale (strtol & co. consult the locale; the parsers here do
 * not). A bad value is never guessed at: one line names the variable, the value and an
 * example, and the process ends with HEAPHOOK_EXIT_CONFIG.
 *
 * config.c and log.c depend only on each other (and internal.h), so a library that does not
 * link the whole core (heaptrack) can compile the pair on its own.
 *
 * Contents:
 *   1. Parsers: sizes, booleans, integers
 *   2. Readers: heaphook_env_*
 *   3. The failure line
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/log.h"
#include "internal.h"

/* Longest value quoted in a failure line; the rest is replaced by "...". */
#define HH_QUOTED_VALUE_MAX 120
/* Digits after the decimal point that count; more are read and ignored (they cannot change
 * a byte count by more than one). */
#define HH_FRACTION_DIGITS_MAX 18

/* ---- 1. Parsers -------------------------------------------------------------------------- */

static bool hh_is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* Reads the unit after the number: "", "B", or a prefix letter k/M/G/T, then "i" for powers
 * of 1024, then an optional "B" ("k", "KB", "KiB", "Ki"; letters in any case). Returns the
 * multiplier, or 0 when the unit is not one of these. */
static uint64_t hh_parse_unit(const char *unit) {
    static const char prefixes[] = "kmgt";
    if (unit[0] == '\0') return 1;
    if ((unit[0] == 'b' || unit[0] == 'B') && unit[1] == '\0') return 1;
    const char *found = strchr(prefixes, unit[0] | 0x20);
    if (found == NULL || unit[0] == '\0') return 0;
    int power = (int)(found - prefixes) + 1;
    const char *rest = unit + 1;
    uint64_t base = 1000;
    if (*rest == 'i' || *rest == 'I') {
        base = 1024;
        rest++;
    }
    if (*rest == 'b' || *rest == 'B') rest++;
    if (*rest != '\0') return 0;
    uint64_t multiplier = 1;
    for (int i = 0; i < power; i++) multiplier *= base;
    return multiplier;
}

int heaphook_parse_size(const char *text, size_t *out) {
    if (text == NULL || !hh_is_digit(text[0])) return -1; /* also rejects "", "-5", "+5", " 5" */
    const char *p = text;
    uint64_t whole = 0;
    while (hh_is_digit(*p)) {
        unsigned digit = (unsigned)(*p++ - '0');
        if (whole > (UINT64_MAX - digit) / 10) return -1;
        whole = whole * 10 + digit;
    }
    /* The fraction is kept as numerator / denominator, both integers. */
    uint64_t numerator = 0, denominator = 1;
    bool has_fraction = false;
    if (*p == '.') {
        p++;
        if (!hh_is_digit(*p)) return -1; /* "1." and "1.k" */
        has_fraction = true;
        for (int digits = 0; hh_is_digit(*p); p++, digits++) {
            if (digits < HH_FRACTION_DIGITS_MAX) {
                numerator = numerator * 10 + (uint64_t)(*p - '0');
                denominator *= 10;
            }
        }
    }
    uint64_t multiplier = hh_parse_unit(p);
    if (multiplier == 0) return -1;
    if (has_fraction && multiplier == 1) return -1; /* "1.5" bytes is not a size */
    unsigned __int128 bytes = (unsigned __int128)whole * multiplier;
    bytes += (unsigned __int128)numerator * multiplier / denominator;
    if (bytes > SIZE_MAX) return -1;
    *out = (size_t)bytes;
    return 0;
}

int heaphook_parse_bool(const char *text, bool *out) {
    static const char *const truthy[] = {"1", "true", "yes", "on"};
    static const char *const falsy[] = {"0", "false", "no", "off"};
    if (text == NULL) return -1;
    for (size_t i = 0; i < sizeof truthy / sizeof truthy[0]; i++) {
        if (strcasecmp(text, truthy[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(text, falsy[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* A decimal integer with an optional sign; no spaces, no junk, no overflow. */
static int hh_parse_long(const char *text, long *out) {
    const char *p = text;
    bool negative = false;
    if (*p == '-' || *p == '+') negative = *p++ == '-';
    if (!hh_is_digit(*p)) return -1;
    unsigned long magnitude = 0;
    const unsigned long limit = negative ? (unsigned long)LONG_MAX + 1 : (unsigned long)LONG_MAX;
    for (; hh_is_digit(*p); p++) {
        unsigned digit = (unsigned)(*p - '0');
        if (magnitude > (limit - digit) / 10) return -1;
        magnitude = magnitude * 10 + digit;
    }
    if (*p != '\0') return -1;
    *out = negative ? (long)(0UL - magnitude) : (long)magnitude;
    return 0;
}

/* ---- 2. Readers ------------------------------------------------------------------------------ */

/* Like heaphook_env_get, and tells which of the two names was read (for the failure line). */
static const char *hh_env_lookup(const char *name, const char *alias, const char **used_name) {
    const char *value = getenv(name);
    *used_name = name;
    if ((value == NULL || value[0] == '\0') && alias != NULL) {
        value = getenv(alias);
        *used_name = alias;
    }
    return value != NULL && value[0] != '\0' ? value : NULL;
}

const char *heaphook_env_get(const char *name, const char *alias) {
    const char *used_name;
    return hh_env_lookup(name, alias, &used_name);
}

bool heaphook_secure_execution(void) {
    return getauxval(AT_SECURE) != 0;
}

const char *heaphook_env_get_unless_secure(const char *name, const char *alias) {
    const char *used_name;
    const char *value = hh_env_lookup(name, alias, &used_name);
    if (value == NULL || !heaphook_secure_execution()) return value;
    heaphook_log_debug("secure execution (AT_SECURE): %s is ignored", used_name);
    return NULL;
}

size_t heaphook_env_size(const char *name, const char *alias, size_t default_value) {
    const char *used_name;
    const char *value = hh_env_lookup(name, alias, &used_name);
    if (value == NULL) return default_value;
    size_t size;
    if (heaphook_parse_size(value, &size) != 0) {
        heaphook_config_fail(used_name, value, "a size; expected bytes or a number with a suffix",
                             "100M");
    }
    return size;
}

bool heaphook_env_bool(const char *name, const char *alias, bool default_value) {
    const char *used_name;
    const char *value = hh_env_lookup(name, alias, &used_name);
    if (value == NULL) return default_value;
    bool result;
    if (heaphook_parse_bool(value, &result) != 0) {
        heaphook_config_fail(used_name, value,
                             "a boolean; expected 1/0, true/false, yes/no or on/off", "1");
    }
    return result;
}

long heaphook_env_long(const char *name, const char *alias, long default_value, long min,
                       long max) {
    const char *used_name;
    const char *value = hh_env_lookup(name, alias, &used_name);
    if (value == NULL) return default_value;
    long result;
    if (hh_parse_long(value, &result) != 0 || result < min || result > max) {
        char expected[96], example[24];
        heaphook_formatf(expected, sizeof expected, "an integer from %ld to %ld", min, max);
        long sample = default_value >= min && default_value <= max ? default_value : min;
        heaphook_formatf(example, sizeof example, "%ld", sample);
        heaphook_config_fail(used_name, value, expected, example);
    }
    return result;
}

int heaphook_env_choice(const char *name, const char *alias, const char *const *choices, int count,
                        int default_index) {
    const char *used_name;
    const char *value = hh_env_lookup(name, alias, &used_name);
    if (value == NULL) return default_index;
    for (int i = 0; i < count; i++) {
        if (strcasecmp(value, choices[i]) == 0) return i;
    }
    char expected[256];
    size_t len = heaphook_formatf(expected, sizeof expected, "a valid choice; expected one of");
    for (int i = 0; i < count; i++) {
        len += heaphook_formatf(expected + len, sizeof expected - len, "%s %s",
                                i == 0 ? "" : (i == count - 1 ? " or" : ","), choices[i]);
    }
    int example = default_index >= 0 && default_index < count ? default_index : 0;
    heaphook_config_fail(used_name, value, expected, count > 0 ? choices[example] : "");
}

/* ---- 3. The failure line --------------------------------------------------------------------- */

/* Copies value so that the line stays one printable line: control characters become '?', and
 * a very long value is cut. */
static void hh_quote_value(char *out, size_t cap, const char *value) {
    size_t n = 0;
    for (; value[n] != '\0' && n + 1 < cap; n++) {
        unsigned char c = (unsigned char)value[n];
        out[n] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (value[n] != '\0' && n >= 3) memcpy(out + n - 3, "...", 3);
    out[n] = '\0';
}

void heaphook_config_fail(const char *name, const char *value, const char *expected,
                          const char *example) {
    char quoted[HH_QUOTED_VALUE_MAX + 1];
    hh_quote_value(quoted, sizeof quoted, value != NULL ? value : "");
    char line[512];
    size_t len =
        heaphook_formatf(line, sizeof line - 1, "heaphook: %s=\"%s\" is not %s, e.g. %s=%s", name,
                         quoted, expected, name, example);
    line[len++] = '\n';
    /* The report fd is normally stderr's duplicate; with HEAPHOOK_LOG_FILE the user still
     * needs to see on the terminal why the program did not start. */
    heaphook_write_all(heaphook_report_fd(), line, len);
    if (hh_log_is_file()) heaphook_write_all(STDERR_FILENO, line, len);
    _exit(HEAPHOOK_EXIT_CONFIG);
}
