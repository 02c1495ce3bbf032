/*
 * suppress.c — RTSan's suppression file, for --abort (without --abort the command applies the
 * file to the symbolised report instead, where every frame has its name).
 *
 * Lines (RTSan's, sanitizer_common's matching: a substring unless anchored with ^ or $, * any
 * run of characters; # starts a comment):
 *   call-stack-contains:NAME     a frame of the stack is a function matching NAME
 *   function-name-matches:NAME   the intercepted call (malloc, pthread_mutex_lock ...) matches
 * and heaphook's spellings of the same two: frame:NAME, call:NAME.
 * Frame names here are dladdr's (the dynamic symbol tables; C++ names mangled), so a static
 * function of the program matches only in the command's report, not under --abort.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>

#include "heaphook/config.h"
#include "next.h"
#include "sys.h"

#define HH_SUPPRESS_TEXT (64 * 1024)
#define HH_SUPPRESS_MAX 256

typedef struct hh_suppression {
    bool on_stack; /* call-stack-contains / frame; else function-name-matches / call */
    const char *pattern;
} hh_suppression;

static char hh_text[HH_SUPPRESS_TEXT];
static hh_suppression hh_rules[HH_SUPPRESS_MAX];
static int hh_rule_count;

/* sanitizer_common's TemplateMatch: '*' any run, '^' and '$' anchors, else a substring. */
static bool hh_match_here(const char *p, const char *s, bool anchored_end) {
    for (;;) {
        if (*p == '\0') return !anchored_end || *s == '\0';
        if (*p == '$' && p[1] == '\0') return *s == '\0';
        if (*p == '*') {
            for (const char *t = s;; t++) {
                if (hh_match_here(p + 1, t, anchored_end)) return true;
                if (*t == '\0') return false;
            }
        }
        if (*s == '\0' || *s != *p) return false;
        p++;
        s++;
    }
}

bool hh_rt_pattern_match(const char *pattern, const char *s) {
    size_t len = strlen(pattern);
    bool anchored_end = len > 0 && pattern[len - 1] == '$';
    if (pattern[0] == '^') return hh_match_here(pattern + 1, s, anchored_end);
    for (const char *t = s;; t++) {
        if (hh_match_here(pattern, t, anchored_end)) return true;
        if (*t == '\0') return false;
    }
}

static void hh_add_rule(char *line) {
    static const struct {
        const char *prefix;
        bool on_stack;
    } kinds[] = {{"call-stack-contains:", true},
                 {"function-name-matches:", false},
                 {"frame:", true},
                 {"call:", false}};
    while (*line == ' ' || *line == '\t') line++;
    if (*line == '\0' || *line == '#') return;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n = strlen(kinds[k].prefix);
        if (strncmp(line, kinds[k].prefix, n) != 0) continue;
        char *pattern = line + n;
        char *end = pattern + strlen(pattern);
        while (end > pattern && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) *--end = 0;
        if (*pattern != '\0' && hh_rule_count < HH_SUPPRESS_MAX)
            hh_rules[hh_rule_count++] = (hh_suppression){kinds[k].on_stack, pattern};
        return;
    }
    heaphook_config_fail("HEAPHOOK_RT_SUPPRESSIONS", line,
                         "lines call-stack-contains:NAME or function-name-matches:NAME",
                         "call-stack-contains:log_message");
}

void hh_rt_suppressions_load(void) {
    hh_rule_count = 0;
    const char *path = heaphook_env_get_unless_secure("HEAPHOOK_RT_SUPPRESSIONS", NULL);
    if (path == NULL) return;
    long fd =
        HEAPHOOK_OS_UNOBSERVED(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0) {
        heaphook_config_fail("HEAPHOOK_RT_SUPPRESSIONS", path, "a readable file", "rtcheck.supp");
    }
    size_t used = 0;
    for (;;) {
        long n = HEAPHOOK_OS_UNOBSERVED(SYS_read, fd, hh_text + used, sizeof hh_text - 1 - used, 0,
                                        0, 0);
        if (n <= 0) break;
        used += (size_t)n;
    }
    HEAPHOOK_OS_UNOBSERVED(SYS_close, fd, 0, 0, 0, 0, 0);
    hh_text[used] = '\0';
    for (char *line = hh_text; line != NULL && *line != '\0';) {
        char *next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        hh_add_rule(line);
        line = next;
    }
}

bool hh_rt_suppressed(int call, const uintptr_t *frames, int count) {
    for (int r = 0; r < hh_rule_count; r++) {
        const hh_suppression *rule = &hh_rules[r];
        if (!rule->on_stack) {
            if (hh_rt_pattern_match(rule->pattern, hh_rt_call_name(call))) return true;
            continue;
        }
        for (int f = 0; f < count; f++) {
            Dl_info info;
            /* a return address: the call is the byte before it */
            if (dladdr((void *)(frames[f] - 1), &info) != 0 && info.dli_sname != NULL &&
                hh_rt_pattern_match(rule->pattern, info.dli_sname)) {
                return true;
            }
        }
    }
    return false;
}
