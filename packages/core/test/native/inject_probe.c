/* The library heaphook-inject's tests load into a target: inject_probe_call(s) returns the
 * length of s (-1 for NULL) plus 1000 times the number of calls so far, so a test sees both
 * the argument and that a second injection reuses the loaded copy. inject_probe_crash faults. */
#include <string.h>

static int calls;

int inject_probe_call(const char *s) {
    calls++;
    return (s != NULL ? (int)strlen(s) : -1) + 1000 * calls;
}

int inject_probe_crash(const char *s) {
    (void)s;
    return *(volatile int *)8;
}
