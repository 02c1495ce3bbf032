/*
 * grow — a service that allocates on request: each line on stdin, "N", makes it allocate N
 * more blocks of 5,000 bytes (in allocate_on_request) and keep them; it answers each line with
 * its allocator's figures as mallinfo2 gives them. It starts with nothing of its own, so the
 * test can attach to it first and then make it allocate.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCKS 100000
#define BLOCK_BYTES 5000

static void *blocks[MAX_BLOCKS];
static int held;

void allocate_on_request(int count) {
    for (int i = 0; i < count && held < MAX_BLOCKS; i++) {
        void *p = malloc(BLOCK_BYTES);
        if (p == NULL) abort();
        memset(p, i & 0xff, BLOCK_BYTES);
        blocks[held++] = p;
    }
}

int main(void) {
    char line[64];
    printf("{\"started\":true}\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL) {
        allocate_on_request(atoi(line));
        struct mallinfo2 m = mallinfo2();
        printf("{\"held\":%d,\"uordblks\":%zu}\n", held, m.uordblks);
        fflush(stdout);
    }
    for (int i = 0; i < held; i++) free(blocks[i]);
    return 0;
}
