/*
 * passthrough_backend.c — a C backend (heaphook/backend.h, built with C_API) that hands every
 * request to the next allocator, glibc's, found with dlsym(RTLD_NEXT, ...).
 *
 * It exists to test the core, not to be used: it is the C form of the contract, and its
 * initialisation does what makes the bootstrap arena necessary. dlsym calls calloc, and init
 * itself mallocs, reallocs and frees, all while the backend is not ready yet: those calls must
 * be served by the arena, without recursion and without deadlock. (With HEAPHOOK_LOG_LEVEL=debug
 * the core logs how much of the arena was used; the tests check it is not zero.)
 *
 * One arena block is kept past init: the first alloc after the backend is ready reallocs it,
 * which the core must move into the backend with its contents.
 *
 * HEAPHOOK_PASSTHROUGH_EARLY_BYTES=<size> makes init allocate that much more before it is
 * ready, to check what happens when the arena runs out (one fatal line, then abort).
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "heaphook/backend.h"
#include "heaphook/config.h"
#include "heaphook/log.h"

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef size_t (*usable_size_fn)(void *);

static malloc_fn next_malloc;
static free_fn next_free;
static realloc_fn next_realloc;
static memalign_fn next_memalign;
static usable_size_fn next_usable_size;

#define EARLY_TEXT "made before the backend was ready"

/* An arena block made by init, moved into the backend by the first alloc after init. */
static _Atomic(char *) kept_early_block;

static void *lookup(const char *name) {
    void *symbol = dlsym(RTLD_NEXT, name);
    if (symbol == NULL) heaphook_fatal("passthrough: dlsym(RTLD_NEXT, \"%s\") failed", name);
    return symbol;
}

static int passthrough_init(void) {
    /* Allocations during init: served by the bootstrap arena. */
    char *early = malloc(100);
    if (early == NULL) return -1;
    strcpy(early, EARLY_TEXT);
    early = realloc(early, 4000);
    if (early == NULL || strcmp(early, EARLY_TEXT) != 0) return -1;
    if (malloc_usable_size(early) < 4000) return -1;
    free(early); /* ignored: arena blocks are never reused */
    char *kept = malloc(sizeof EARLY_TEXT);
    if (kept == NULL) return -1;
    strcpy(kept, EARLY_TEXT);
    atomic_store(&kept_early_block, kept);
    size_t extra = heaphook_env_size("HEAPHOOK_PASSTHROUGH_EARLY_BYTES", NULL, 0);
    if (extra > 0 && malloc(extra) == NULL) return -1;
    next_malloc = (malloc_fn)lookup("malloc");
    next_free = (free_fn)lookup("free");
    next_realloc = (realloc_fn)lookup("realloc");
    next_memalign = (memalign_fn)lookup("memalign");
    next_usable_size = (usable_size_fn)lookup("malloc_usable_size");
    return 0;
}

/* realloc of the arena block kept by init: the core moves it into this backend. */
static void move_early_block(void) {
    char *early = atomic_exchange(&kept_early_block, NULL);
    if (early == NULL) return;
    char *moved = realloc(early, 100000);
    if (moved == NULL || moved == early || strcmp(moved, EARLY_TEXT) != 0) {
        heaphook_fatal("passthrough: realloc of an arena block lost it (%p -> %p)", (void *)early,
                       (void *)moved);
    }
    heaphook_log_debug("passthrough: arena block %p moved into the backend at %p", (void *)early,
                       (void *)moved);
    free(moved);
}

static void *passthrough_alloc(size_t size, size_t align) {
    if (atomic_load_explicit(&kept_early_block, memory_order_relaxed) != NULL) {
        move_early_block();
    }
    return align == 1 ? next_malloc(size) : next_memalign(align, size);
}

static void passthrough_dealloc(void *ptr) {
    next_free(ptr);
}

static size_t passthrough_block_size(void *ptr) {
    return next_usable_size(ptr);
}

static void *passthrough_realloc(void *ptr, size_t new_size) {
    return next_realloc(ptr, new_size);
}

static const heaphook_backend passthrough = {
    .name = "passthrough",
    .init = passthrough_init,
    .alloc = passthrough_alloc,
    .dealloc = passthrough_dealloc,
    .get_block_size = passthrough_block_size,
    .realloc = passthrough_realloc,
    /* alloc_zeroed, fork hooks, statistics: the core's defaults */
};

const heaphook_backend *heaphook_backend_get(void) {
    return &passthrough;
}
