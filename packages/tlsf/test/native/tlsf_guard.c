/*
 * tlsf_guard.c — the guardrails' test program (test/integration/guardrails.test.ts), run under
 * libheaphook_tlsf.so with a small pool:
 *
 *   tlsf_guard grow <bytes>   allocate <bytes> in grow_the_pool() (a function the growth's
 *                             stack must name), then print "continued" and exit 0
 *   tlsf_guard sizes          allocate and free known sizes; print what it did:
 *                             "largest <n>", "peak <n>" (the highest sum of malloc_usable_size
 *                             of the blocks it held at once), and mallinfo2's figures
 *
 * Built with -rdynamic (its functions are exported, so dladdr names them) and -fno-builtin.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *grow_the_pool(size_t bytes) {
    void *p = malloc(bytes);
    if (p) memset(p, 1, 64);
    __asm__ volatile("" ::: "memory"); /* keep the call a call, not a tail call */
    return p;
}

static int sizes(void) {
    /* Known sizes, multiples of 16: held together, then freed, then one larger request. */
    static const size_t held[] = {1000000, 500000, 250000, 64, 4096};
    void *blocks[sizeof held / sizeof held[0]];
    size_t in_use = 0, peak = 0;
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
        blocks[i] = malloc(held[i]);
        if (!blocks[i]) return 1;
        in_use += malloc_usable_size(blocks[i]);
        if (in_use > peak) peak = in_use;
    }
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
        in_use -= malloc_usable_size(blocks[i]);
        free(blocks[i]);
    }
    void *big = malloc(1500000);
    if (!big) return 1;
    in_use += malloc_usable_size(big);
    if (in_use > peak) peak = in_use;
    struct mallinfo2 mi = mallinfo2();
    free(big);
    printf("largest 1500000\npeak %zu\narena %zu\nusmblks %zu\n", peak, mi.arena, mi.usmblks);
    malloc_stats();
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "grow") == 0) {
        void *p = grow_the_pool(strtoull(argv[2], NULL, 0));
        printf("continued %s\n", p ? "ok" : "null");
        free(p);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "sizes") == 0) return sizes();
    fprintf(stderr, "usage: tlsf_guard grow <bytes> | sizes\n");
    return 2;
}
