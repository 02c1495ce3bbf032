/*
 * config_test.c — the configuration parsers of heaphook/config.h on a table of inputs.
 *
 * Links libheaphook_core.a (no interposition: only the parsers and the logger are pulled in).
 * Prints one line per failed case and a summary; exit status 0 when all cases pass. Run with
 * an argument (`config_test env NAME`) it instead reads NAME with heaphook_env_size and prints
 * the value, so the tests can see the failure path (the one line and exit status 78) too.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "heaphook/config.h"
#include "heaphook/log.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)
#define TiB (1024 * GiB)
#define INVALID ((size_t)777777) /* the case must be rejected (no valid case has this value) */

static const struct {
    const char *text;
    size_t expected;
} size_cases[] = {
    {"0", 0},
    {"1", 1},
    {"100000000", 100000000},
    {"18446744073709551615", SIZE_MAX}, /* SIZE_MAX itself is a size */
    {"100k", 100000},
    {"100K", 100000},
    {"100KB", 100000},
    {"100kB", 100000},
    {"100KiB", 100 * KiB},
    {"100Ki", 100 * KiB},
    {"100M", 100000000},
    {"100MB", 100000000},
    {"100MiB", 100 * MiB},
    {"1G", 1000000000},
    {"1GB", 1000000000},
    {"1GiB", GiB},
    {"2T", (size_t)2000000000000},
    {"2TB", (size_t)2000000000000},
    {"2TiB", 2 * TiB},
    {"1.5GiB", GiB + GiB / 2},
    {"0.5k", 500},
    {"1.25MiB", MiB + MiB / 4},
    {"64b", 64},
    {"64B", 64},
    {"abc", INVALID},
    {"-5", INVALID},
    {"+5", INVALID},
    {"", INVALID},
    {" 5", INVALID},
    {"5 ", INVALID},
    {"10Q", INVALID},
    {"10MiBs", INVALID},
    {"1.5", INVALID}, /* a fraction needs a suffix */
    {"1.", INVALID},
    {".5G", INVALID},
    {"1.G", INVALID},
    {"1e6", INVALID},
    {"0x10", INVALID},
    {"18446744073709551616", INVALID}, /* SIZE_MAX + 1 */
    {"99999999999999999999999", INVALID},
    {"17179869184GiB", INVALID}, /* 2^34 GiB = 2^64 */
    {"16777216TiB", INVALID},
    {"20000000000G", INVALID},
};

static const struct {
    const char *text;
    int expected; /* 1 true, 0 false, -1 rejected */
} bool_cases[] = {
    {"1", 1},  {"true", 1}, {"TRUE", 1}, {"yes", 1}, {"On", 1},       {"0", 0},      {"false", 0},
    {"no", 0}, {"OFF", 0},  {"", -1},    {"2", -1},  {"enabled", -1}, {"truex", -1}, {" 1", -1},
};

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "env") == 0) {
        size_t value = heaphook_env_size(argv[2], NULL, 12345);
        printf("%s=%zu\n", argv[2], value);
        return 0;
    }
    int failures = 0, cases = 0;
    for (size_t i = 0; i < sizeof size_cases / sizeof size_cases[0]; i++, cases++) {
        size_t out = 777;
        int result = heaphook_parse_size(size_cases[i].text, &out);
        bool ok = size_cases[i].expected == INVALID ? result == -1 && out == 777
                                                    : result == 0 && out == size_cases[i].expected;
        if (!ok) {
            failures++;
            printf("FAIL heaphook_parse_size(\"%s\") = %d, %zu; expected %s %zu\n",
                   size_cases[i].text, result, out,
                   size_cases[i].expected == INVALID ? "rejection" : "value",
                   size_cases[i].expected);
        }
    }
    for (size_t i = 0; i < sizeof bool_cases / sizeof bool_cases[0]; i++, cases++) {
        bool out = false;
        int result = heaphook_parse_bool(bool_cases[i].text, &out);
        int got = result != 0 ? -1 : out ? 1 : 0;
        if (got != bool_cases[i].expected) {
            failures++;
            printf("FAIL heaphook_parse_bool(\"%s\") = %d, expected %d\n", bool_cases[i].text, got,
                   bool_cases[i].expected);
        }
    }
    /* The formatter behind every log line; "%q" is not understood and is copied literally. */
#pragma GCC diagnostic ignored "-Wformat"
#pragma GCC diagnostic ignored "-Wformat-extra-args"
    char buf[128];
    heaphook_formatf(buf, sizeof buf, "%s|%d|%5d|%05d|%u|%x|%zu|%lld|%c|%%|%q", "str", -42, 7, -7,
                     4000000000u, 0xbeefu, (size_t)123, -9000000000LL, 'z');
    const char *expected_format = "str|-42|    7|-0007|4000000000|beef|123|-9000000000|z|%|%q";
    cases++;
    if (strcmp(buf, expected_format) != 0) {
        failures++;
        printf("FAIL heaphook_formatf gave \"%s\", expected \"%s\"\n", buf, expected_format);
    }
    char tiny[6];
    size_t len = heaphook_formatf(tiny, sizeof tiny, "%s", "truncated");
    cases++;
    if (len != 5 || strcmp(tiny, "trunc") != 0) {
        failures++;
        printf("FAIL heaphook_formatf truncation gave \"%s\" (%zu)\n", tiny, len);
    }
    printf("config_test: %d cases, %d failed\n", cases, failures);
    return failures == 0 ? 0 : 1;
}
