/*
 * attach.c — the client's hooks when it is not the process's malloc: loaded by a backend's
 * core at start-up (HEAPHOOK_AGENT with libheaphook_tlsf.so alone), preloaded behind another
 * allocator, or injected into a running process (`heaphook attach PID --agent PATH`).
 *
 * The malloc family of every loaded object, and of objects loaded later, is redirected to the
 * hooks below by GOT patching (the core's heaphook/reloc.h); each hook calls the function the
 * process called before (the backend, or glibc) and samples as hooks.c does. The allocator is
 * unchanged, so blocks allocated before the patch are freed where they always were.
 *
 * Not seen (reloc.h's limits): calls made through pointers taken before the patch and the
 * dynamic loader's own allocations. Objects that bind malloc to themselves are not seen
 * either; the client's own object is never patched (its calls must reach the allocator).
 */
#include <dlfcn.h>
#include <errno.h>

#include "client.h"
#include "heaphook/reloc.h"

typedef void *(*hh_malloc_fn)(size_t);
typedef void (*hh_free_fn)(void *);
typedef void *(*hh_calloc_fn)(size_t, size_t);
typedef void *(*hh_realloc_fn)(void *, size_t);
typedef int (*hh_posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*hh_memalign_fn)(size_t, size_t);

/* What each hook forwards to: the process's functions before the patch. Written once, before
 * the first patch makes a hook reachable. */
static struct {
    hh_malloc_fn malloc;
    hh_free_fn free;
    hh_calloc_fn calloc;
    hh_realloc_fn realloc;
    hh_posix_memalign_fn posix_memalign;
    hh_memalign_fn memalign;
    hh_memalign_fn aligned_alloc;
    hh_malloc_fn valloc;
    hh_malloc_fn pvalloc;
} g_next;

static void *hh_hook_malloc(size_t size) {
    void *p = g_next.malloc(size);
    hh_after_alloc(p, size);
    return p;
}

static void hh_hook_free(void *ptr) {
    if (ptr != NULL) hh_before_free(ptr);
    g_next.free(ptr);
}

static void *hh_hook_calloc(size_t count, size_t size) {
    void *p = g_next.calloc(count, size);
    hh_after_alloc(p, count * size); /* no overflow when p is not NULL */
    return p;
}

/* The old block's sample ends here, whether or not the block moves. */
#define HH_REALLOC_BODY(ptr, size)                                  \
    do {                                                            \
        if ((ptr) != NULL) hh_before_free(ptr);                     \
        void *p = g_next.realloc((ptr), (size));                    \
        if (p == NULL && (size) != 0 && (ptr) != NULL) return NULL; \
        hh_after_alloc(p, (size));                                  \
        return p;                                                   \
    } while (0)

static void *hh_hook_realloc(void *ptr, size_t size) {
    HH_REALLOC_BODY(ptr, size);
}

static void *hh_hook_reallocarray(void *ptr, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    HH_REALLOC_BODY(ptr, total);
}

static int hh_hook_posix_memalign(void **out, size_t align, size_t size) {
    int r = g_next.posix_memalign(out, align, size);
    if (r == 0) hh_after_alloc(*out, size);
    return r;
}

static void *hh_hook_memalign(size_t align, size_t size) {
    void *p = g_next.memalign(align, size);
    hh_after_alloc(p, size);
    return p;
}

static void *hh_hook_aligned_alloc(size_t align, size_t size) {
    void *p = g_next.aligned_alloc(align, size);
    hh_after_alloc(p, size);
    return p;
}

static void *hh_hook_valloc(size_t size) {
    void *p = g_next.valloc(size);
    hh_after_alloc(p, size);
    return p;
}

static void *hh_hook_pvalloc(size_t size) {
    void *p = g_next.pvalloc(size);
    hh_after_alloc(p, size);
    return p;
}

static const struct {
    const char *name;
    void *hook;
    void **next;
} g_family[] = {
    /* The functions that free first: a block sampled once malloc is redirected has its free
     * seen too. */
    {"free", (void *)hh_hook_free, (void **)&g_next.free},
    {"realloc", (void *)hh_hook_realloc, (void **)&g_next.realloc},
    {"reallocarray", (void *)hh_hook_reallocarray, NULL},
    {"malloc", (void *)hh_hook_malloc, (void **)&g_next.malloc},
    {"calloc", (void *)hh_hook_calloc, (void **)&g_next.calloc},
    {"posix_memalign", (void *)hh_hook_posix_memalign, (void **)&g_next.posix_memalign},
    {"memalign", (void *)hh_hook_memalign, (void **)&g_next.memalign},
    {"aligned_alloc", (void *)hh_hook_aligned_alloc, (void **)&g_next.aligned_alloc},
    {"valloc", (void *)hh_hook_valloc, (void **)&g_next.valloc},
    {"pvalloc", (void *)hh_hook_pvalloc, (void **)&g_next.pvalloc},
};
#define HH_FAMILY_COUNT (sizeof g_family / sizeof g_family[0])

const char *hh_agent_attach_resolve(void) {
    for (size_t i = 0; i < HH_FAMILY_COUNT; i++) {
        if (g_family[i].next == NULL) continue; /* reallocarray goes through g_next.realloc */
        void *function = NULL;
        if (heaphook_reloc_resolve(g_family[i].name, &function) != HEAPHOOK_RELOC_OK)
            function = dlsym(RTLD_DEFAULT, g_family[i].name);
        if (function == NULL) return "the process has no malloc family to forward to";
        *g_family[i].next = function;
    }
    return NULL;
}

const char *hh_agent_attach_patch(void) {
    heaphook_reloc_skip((const void *)hh_agent_attach_patch);
    for (size_t i = 0; i < HH_FAMILY_COUNT; i++) {
        int error = heaphook_reloc_patch(g_family[i].name, g_family[i].hook, NULL, NULL);
        if (error != HEAPHOOK_RELOC_OK) return heaphook_reloc_strerror(error);
    }
    return NULL;
}
