/* ucm_watch_static.c — a statically linked process (test/integration/watch-pid.test.ts): nothing
 * can be dlopen'ed into it, so `heaphook watch -p` must refuse it and leave it untouched. Prints
 * "ready <pid>", then answers each line of stdin with "alive", until end of input. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin) != NULL) {
        puts("alive");
        fflush(stdout);
    }
    return 0;
}
