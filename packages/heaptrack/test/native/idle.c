/* A mostly idle program for the collector's wake-up tests
 * (test/integration/collector-idle.test.ts). argv: events gap_ms tail_ms. Prints "idle <pid>" once
 * the tracer is up, then `events` times: sleeps gap_ms, allocates one block of 1000 + k bytes
 * (kept) and prints "event <k>" right after the call returned; then sleeps tail_ms and exits 0.
 * Between events it makes no call at all: whatever the collector does meanwhile is its own doing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: hh_test_idle EVENTS GAP_MS TAIL_MS\n");
        return 2;
    }
    int events = atoi(argv[1]);
    long gap = atol(argv[2]), tail = atol(argv[3]);
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("idle %d\n", (int)getpid());
    for (int k = 1; k <= events; k++) {
        sleep_ms(gap);
        void *kept = malloc(1000 + (size_t)k);
        if (kept == NULL) return 1;
        printf("event %d\n", k);
    }
    sleep_ms(tail);
    return 0;
}
