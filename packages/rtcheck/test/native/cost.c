/*
 * cost.c — malloc+free pairs outside any real-time context, for callgrind: the instructions
 * per pair with and without libheaphook_rtcheck.so loaded (README "Cost").
 *
 *   rt_cost PAIRS
 */
#include <stdlib.h>

int main(int argc, char **argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 100000;
    for (long i = 0; i < pairs; i++) {
        void *volatile p = malloc(64);
        free(p);
    }
    return 0;
}
