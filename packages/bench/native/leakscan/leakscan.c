/*
 * leakscan.c — the heap the leak-check benchmark scans at exit (src/leakscan.ts):
 *
 *   leakscan N
 *
 * N live blocks of 32..95 bytes at exit: 90 % reachable (a global array of pointers to them,
 * every block pointing to the next in a list as well), 10 % leaked (no pointer to them
 * anywhere). Built twice: plain (run under heaphook's tracer) and -fsanitize=leak.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void **g_blocks; /* not static: the stores stay */

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long kept = n - n / 10;
    g_blocks = malloc(sizeof(void *) * (size_t)kept);
    void *prev = NULL;
    long k = 0;
    for (long i = 0; i < n; i++) {
        size_t size = 32 + (size_t)(i * 7919 % 64);
        void **b = malloc(size);
        memset(b, 0, size);
        /* leaked: nothing points to it. Not the last blocks: the last one's address may still
         * sit in a register at exit, where a conservative scan (LeakSanitizer's) finds it. */
        if (i % 10 == 4) continue;
        b[0] = prev;
        prev = b;
        g_blocks[k++] = b;
    }
    printf("%ld blocks, %ld leaked\n", n, n - k);
    return 0;
}
