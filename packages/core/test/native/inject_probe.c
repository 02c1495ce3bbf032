/* The library heaphook-inject's tests load into a target: inject_probe_call(s) returns the
 * length of s (-1 for NULL) plus 1000 times the number of calls so far, so a test sees both
 * the argument and that a second injection reuses the loaded copy. inject_probe_crash faults.
 * inject_probe_raise(n) sends signal n to its own process (it arrives during the call) and
 * inject_probe_slow(ms) takes that long (an injector can be killed in the middle of it); both
 * count as calls and return 1000 times the count. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int calls;

int inject_probe_call(const char *s) {
    calls++;
    return (s != NULL ? (int)strlen(s) : -1) + 1000 * calls;
}

int inject_probe_crash(const char *s) {
    (void)s;
    return *(volatile int *)8;
}

int inject_probe_raise(const char *s) {
    kill(getpid(), s != NULL ? atoi(s) : SIGUSR2);
    return 1000 * ++calls;
}

int inject_probe_slow(const char *s) {
    long ms = s != NULL ? atol(s) : 100;
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&pause, &pause) != 0) {
    }
    return 1000 * ++calls;
}
