/*
 * mapper — maps and unmaps memory in a known sequence, for the mapped-memory tests (vm.test.ts).
 * Run with libheaphook_ucm.so and the tracer preloaded; it prints one JSON line with the VM
 * events and figures the log must show, then (with "fork") forks a child that maps one range.
 *
 *   1. map_and_unmap: 20 x (mmap 1 MiB, munmap it)          20 mapped, 20 unmapped
 *   2. map_kept: mmap 3 MiB, kept                           1 mapped
 *   3. mapping_thread (another thread): mmap 4 MiB, munmap  1 mapped, 1 unmapped (peak 7 MiB)
 *   4. mremap the kept range to 5 MiB (may move)            1 unmapped (3 MiB), 1 mapped (5 MiB)
 *   5. munmap its last MiB                                  1 unmapped
 *   6. madvise(MADV_DONTNEED) its first MiB                 1 unmapped: 3 MiB mapped at the end
 * and a few mallocs and frees, small enough that glibc's malloc maps nothing for them (its own
 * mappings do raise events: ucm-hooks patches the C library's entries), and the tracer's own
 * mappings never go through the hooks. The thread runs on a stack carved from the kept range,
 * so that glibc maps no stack for it (and madvises none at its exit): those would be events too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1024u * 1024u)
#define LOOPS 20

static void *map(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

static void map_and_unmap(void) {
    for (int i = 0; i < LOOPS; i++) {
        char *p = map(MIB);
        p[0] = 1;
        munmap(p, MIB);
    }
}

static char *map_kept(void) {
    char *p = map(3 * MIB);
    memset(p, 1, 3 * MIB);
    return p;
}

static void *mapping_thread(void *arg) {
    (void)arg;
    char *p = map(4 * MIB);
    p[0] = 1;
    munmap(p, 4 * MIB);
    return NULL;
}

int main(int argc, char **argv) {
    void *blocks[16];
    for (int i = 0; i < 16; i++) blocks[i] = malloc(64 + (size_t)i);
    map_and_unmap();
    char *kept = map_kept();
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, kept + 2 * MIB, MIB); /* the kept range's last MiB */
    pthread_create(&t, &attr, mapping_thread, NULL);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    kept = mremap(kept, 3 * MIB, 5 * MIB, MREMAP_MAYMOVE);
    if (kept == MAP_FAILED) {
        perror("mremap");
        return 1;
    }
    munmap(kept + 4 * MIB, MIB);
    madvise(kept, MIB, MADV_DONTNEED);
    for (int i = 0; i < 16; i++) free(blocks[i]);
    printf(
        "{\"mapped\":%d,\"unmapped\":%d,\"mappedBytes\":%u,\"unmappedBytes\":%u,"
        "\"peakBytes\":%u,\"finalBytes\":%u}\n",
        LOOPS + 3, LOOPS + 4, LOOPS * MIB + 3 * MIB + 4 * MIB + 5 * MIB,
        LOOPS * MIB + 4 * MIB + 3 * MIB + MIB + MIB, 7 * MIB, 3 * MIB);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t child = fork();
        if (child == 0) {
            char *p = map(2 * MIB); /* the child's log: this one mapping */
            p[0] = 1;
            exit(0);
        }
        int status;
        waitpid(child, &status, 0);
    }
    return 0;
}
