/*
 * extras — a program that maps memory and loses heap blocks on request, for the agent's
 * figures of ucm-hooks (mapped bytes) and heaptrack (leak checks). Each line on stdin:
 *
 *   map N    maps N MiB more (anonymous, kept) and answers {"mapped":<bytes mapped so far>}
 *   leak N   loses N blocks of 1,000 bytes (their addresses kept only XOR-masked, where no
 *            conservative scan can see them), runs heaphook_leak_check (heaptrack, found with
 *            dlsym) and answers {"leaked":<its result>}
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MASK 0x5a5a5a5a5a5a5a5aull
#define MAX_HIDDEN 100000
#define LEAK_BYTES 1000

static uintptr_t hidden[MAX_HIDDEN];
static int nhidden;
static size_t mapped;

static void lose_blocks(int count) {
    for (int i = 0; i < count && nhidden < MAX_HIDDEN; i++) {
        char *p = malloc(LEAK_BYTES);
        if (p == NULL) abort();
        memset(p, 0, LEAK_BYTES);
        hidden[nhidden++] = (uintptr_t)p ^ MASK;
    }
}

int main(void) {
    char line[64];
    long (*leak_check)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "heaphook_leak_check");
    printf("{\"started\":true}\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL) {
        int n = atoi(line + 5);
        if (strncmp(line, "map ", 4) == 0) {
            size_t bytes = (size_t)atoi(line + 4) << 20;
            void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) abort();
            mapped += bytes;
            printf("{\"mapped\":%zu}\n", mapped);
        } else if (strncmp(line, "leak ", 5) == 0) {
            lose_blocks(n);
            printf("{\"leaked\":%ld}\n", leak_check != NULL ? leak_check() : -1L);
        }
        fflush(stdout);
    }
    return 0;
}
