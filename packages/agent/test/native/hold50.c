/*
 * hold50 — holds exactly 50,000,000 bytes in 10,000 blocks of 5,000 (allocated by
 * hold_fifty_megabytes), prints its allocator's figures as mallinfo2 gives them, then waits
 * until stdin closes (or for the seconds given as argv[1]).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCKS 10000
#define BLOCK_BYTES 5000

void *blocks[BLOCKS];

/* Paced (100 us a block, about 1.5 s in all) as a service's start-up is, not a burst of
 * thousands of samples in 10 ms that a client's socket buffer cannot hold (the README,
 * "Bursts"). */
void hold_fifty_megabytes(void) {
    for (int i = 0; i < BLOCKS; i++) {
        usleep(100);
        blocks[i] = malloc(BLOCK_BYTES);
        if (blocks[i] == NULL) abort();
        memset(blocks[i], i & 0xff, BLOCK_BYTES);
    }
}

int main(int argc, char **argv) {
    /* stdout's buffer is allocated now, so nothing is allocated after mallinfo2 below. */
    printf("{\"started\":%d}\n", (int)getpid());
    fflush(stdout);
    hold_fifty_megabytes();
    struct mallinfo2 m = mallinfo2();
    printf("{\"pid\":%d,\"arena\":%zu,\"uordblks\":%zu,\"fordblks\":%zu,\"keepcost\":%zu}\n",
           (int)getpid(), m.arena, m.uordblks, m.fordblks, m.keepcost);
    fflush(stdout);
    if (argc > 1) {
        sleep((unsigned)atoi(argv[1]));
    } else {
        char c;
        while (read(0, &c, 1) > 0) {
        }
    }
    for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
    return 0;
}
