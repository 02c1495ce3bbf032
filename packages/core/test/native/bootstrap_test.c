/*
 * bootstrap_test.c — the bootstrap arena and the next-allocator lookup (heaphook/bootstrap.h)
 * on their own, linked from libheaphook_core.a with no interposition: the contract written at
 * the declarations, checked case by case. Prints one line per failed check and a summary;
 * exit status 0 when all pass.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "heaphook/bootstrap.h"

static int checks, failed;

#define CHECK(cond)                                                \
    do {                                                           \
        checks++;                                                  \
        if (!(cond)) {                                             \
            failed++;                                              \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        }                                                          \
    } while (0)

static bool all_zero(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0) return false;
    return true;
}

int main(void) {
    /* Blocks: 16-byte aligned by default, any power of two on request, zero-filled, owned. */
    unsigned char *a = heaphook_bootstrap_alloc(10, 0);
    CHECK(a != NULL && (uintptr_t)a % 16 == 0);
    CHECK(heaphook_bootstrap_owns(a));
    CHECK(heaphook_bootstrap_block_size(a) == 16); /* the request rounded up to 16 */
    CHECK(all_zero(a, 16));
    unsigned char *b = heaphook_bootstrap_alloc(100, 4096);
    CHECK(b != NULL && (uintptr_t)b % 4096 == 0 && heaphook_bootstrap_block_size(b) == 112);
    CHECK(b > a);
    int on_stack = 0;
    CHECK(!heaphook_bootstrap_owns(&on_stack) && !heaphook_bootstrap_owns(NULL));

    /* The range handed out so far covers every block, and is what used_bytes says. */
    uintptr_t lo, hi;
    heaphook_bootstrap_range(&lo, &hi);
    CHECK(lo <= (uintptr_t)a && (uintptr_t)b + 112 <= hi);
    CHECK(hi - lo == heaphook_bootstrap_used_bytes());

    /* Exhaustion is a failed allocation (NULL, ENOMEM), not a stop; smaller ones still fit. */
    errno = 0;
    CHECK(heaphook_bootstrap_alloc(HEAPHOOK_BOOTSTRAP_CAPACITY, 0) == NULL && errno == ENOMEM);
    CHECK(heaphook_bootstrap_alloc(64, 0) != NULL);
    size_t served = 0;
    while (heaphook_bootstrap_alloc(1024, 0) != NULL) served++;
    CHECK(errno == ENOMEM && served > 200 && served < HEAPHOOK_BOOTSTRAP_CAPACITY / 1024);
    CHECK(heaphook_bootstrap_used_bytes() <= HEAPHOOK_BOOTSTRAP_CAPACITY);

    /* The next allocator: from a program, what dlsym(RTLD_NEXT) finds is libc's malloc. */
    CHECK(atomic_load(&heaphook_next_state) == HEAPHOOK_NEXT_UNRESOLVED);
    CHECK(heaphook_next_ready("bootstrap_test"));
    CHECK(heaphook_next.malloc == dlsym(RTLD_DEFAULT, "malloc"));
    CHECK(heaphook_next.free != NULL && heaphook_next.calloc != NULL &&
          heaphook_next.realloc != NULL && heaphook_next.malloc_usable_size != NULL);
    void *p = heaphook_next.malloc(40);
    CHECK(p != NULL && !heaphook_bootstrap_owns(p) && heaphook_next.malloc_usable_size(p) >= 40);
    heaphook_next.free(p);

    /* forward_to replaces the table (heaptrack's attach). */
    heaphook_next_allocator mine = heaphook_next;
    mine.pvalloc = NULL;
    heaphook_next_forward_to(&mine);
    CHECK(heaphook_next_ready("bootstrap_test") && heaphook_next.pvalloc == NULL);

    printf("bootstrap_test: %d checks, %d failed\n", checks, failed);
    return failed == 0 ? 0 : 1;
}
