/*
 * A deliberately broken allocator for the bench's own tests: proves that a workload catches a
 * wrong result and that a crash under an allocator shows as "failed" while the run goes on.
 * Preload it; BROKEN_ALLOC_MODE selects the fault (read once, with getenv, on the first call):
 *   overlap (default)  every 1000th malloc returns the block handed out just before (overlap);
 *   crash              the 10000th malloc aborts (SIGABRT).
 * Otherwise a bump allocator over one big mapping; free is a no-op. Never use it for anything else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARENA (8ULL << 30) /* reserved, not committed */
#define HDR 16

static char *arena;
static size_t used;
static unsigned long calls;
static void *last;
static int mode = -1; /* 0 overlap, 1 crash */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *bump(size_t size, size_t align) {
    if (!arena) {
        void *m = mmap(NULL, ARENA, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        arena = m;
    }
    if (align < HDR) align = HDR;
    size_t start = (used + HDR + align - 1) & ~(align - 1);
    if (start + size > ARENA) return NULL;
    used = start + size;
    memcpy(arena + start - sizeof(size_t), &size, sizeof size);
    return arena + start;
}

static void *alloc(size_t size, size_t align) {
    pthread_mutex_lock(&lock);
    if (mode < 0) {
        const char *m = getenv("BROKEN_ALLOC_MODE");
        mode = (m && strcmp(m, "crash") == 0) ? 1 : 0;
    }
    calls++;
    void *p;
    if (mode == 0 && last && calls % 1000 == 0) {
        size_t last_size;
        memcpy(&last_size, (char *)last - sizeof(size_t), sizeof last_size);
        p = size <= last_size ? last : bump(size, align);
    } else {
        p = bump(size ? size : 1, align);
    }
    if (mode == 1 && calls == 10000) abort();
    last = p;
    pthread_mutex_unlock(&lock);
    if (!p) errno = ENOMEM;
    return p;
}

static size_t block_size(void *p) {
    size_t s;
    memcpy(&s, (char *)p - sizeof(size_t), sizeof s);
    return s;
}

void *malloc(size_t size) {
    return alloc(size, 16);
}
void free(void *p) {
    (void)p;
}
void *calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = alloc(n * size, 16);
    if (p) memset(p, 0, n * size);
    return p;
}
void *realloc(void *p, size_t size) {
    if (!p) return alloc(size, 16);
    void *q = alloc(size, 16);
    if (q) {
        size_t old = block_size(p);
        memcpy(q, p, old < size ? old : size);
    }
    return q;
}
int posix_memalign(void **out, size_t align, size_t size) {
    void *p = alloc(size, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t size) {
    return alloc(size, align);
}
void *memalign(size_t align, size_t size) {
    return alloc(size, align);
}
void *valloc(size_t size) {
    return alloc(size, 4096);
}
size_t malloc_usable_size(void *p) {
    return p ? block_size(p) : 0;
}
