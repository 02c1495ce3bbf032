/*
 * attach.c — heaphook_attach / heaphook_detach (heaphook/attach.h): the malloc family of this
 * library installed into a running process by GOT patching, with frees routed by ownership.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "heaphook/attach.h"
#include "heaphook/lockrank.h"
#include "heaphook/reloc.h"
#include "internal.h"

#define HH_LOCAL(name) extern __typeof__(name) hh_local_##name __attribute__((visibility("hidden")))
HH_LOCAL(malloc);
HH_LOCAL(free);
HH_LOCAL(calloc);
HH_LOCAL(realloc);
HH_LOCAL(reallocarray);
HH_LOCAL(posix_memalign);
HH_LOCAL(memalign);
HH_LOCAL(aligned_alloc);
HH_LOCAL(valloc);
HH_LOCAL(pvalloc);
HH_LOCAL(malloc_usable_size);

_Atomic bool hh_attached = false;

static void (*hh_prev_free)(void *);
static void *(*hh_prev_realloc)(void *, size_t);
static size_t (*hh_prev_usable_size)(void *);

static const struct {
    const char *name;
    void *local;
    bool allocates; /* undone by detach; the others stay routed by ownership */
} hh_family[] = {
    /* The routing functions first, in every object, before any allocation can reach the
     * backend: a block the backend hands out must never meet the previous allocator's free. */
    {"free", (void *)hh_local_free, false},
    {"realloc", (void *)hh_local_realloc, false},
    {"reallocarray", (void *)hh_local_reallocarray, false},
    {"malloc_usable_size", (void *)hh_local_malloc_usable_size, false},
    {"malloc", (void *)hh_local_malloc, true},
    {"calloc", (void *)hh_local_calloc, true},
    {"posix_memalign", (void *)hh_local_posix_memalign, true},
    {"memalign", (void *)hh_local_memalign, true},
    {"aligned_alloc", (void *)hh_local_aligned_alloc, true},
    {"valloc", (void *)hh_local_valloc, true},
    {"pvalloc", (void *)hh_local_pvalloc, true},
};
#define HH_FAMILY_COUNT (sizeof hh_family / sizeof hh_family[0])
static heaphook_reloc_handle *hh_patches[HH_FAMILY_COUNT];
static pthread_mutex_t hh_attach_lock = PTHREAD_MUTEX_INITIALIZER;
static bool hh_allocating;

bool hh_attach_is_foreign(const void *ptr) {
    return !hh_os_owns(ptr);
}

void hh_attach_free(void *ptr) {
    if (hh_prev_free != NULL) hh_prev_free(ptr);
}

size_t hh_attach_usable_size(void *ptr) {
    return hh_prev_usable_size != NULL ? hh_prev_usable_size(ptr) : 0;
}

/* A block of the previous allocator stays with it. */
void *hh_attach_realloc(void *ptr, size_t new_size) {
    return hh_prev_realloc(ptr, new_size);
}

/* The definition the process's global scope binds name to. */
static void *hh_global_symbol(const char *name) {
    void *program = dlopen(NULL, RTLD_NOW | RTLD_NOLOAD);
    void *address = program != NULL ? dlsym(program, name) : NULL;
    if (program != NULL) dlclose(program);
    return address;
}

/* The lock's rank in fork.c's order (heaphook/lockrank.h): checked in debug builds. */
static void hh_attach_lock_take(void) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HEAPHOOK_LOCK_RANK_ATTACH, "the attach lock (attach.c)");
    pthread_mutex_lock(&hh_attach_lock);
}

static void hh_attach_lock_give(void) {
    pthread_mutex_unlock(&hh_attach_lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HEAPHOOK_LOCK_RANK_ATTACH);
}

void hh_attach_prefork(void) {
    hh_attach_lock_take();
}

void hh_attach_postfork_parent(void) {
    hh_attach_lock_give();
}

void hh_attach_postfork_child(void) {
    pthread_mutex_init(&hh_attach_lock, NULL);
    HEAPHOOK_LOCK_RANK_RELEASE(
        HEAPHOOK_LOCK_RANK_ATTACH); /* the forking thread's prefork took it */
}

HH_EXPORT int heaphook_attach(void) {
    if (hh_global_symbol("malloc") == (void *)hh_local_malloc) return HEAPHOOK_RELOC_OK;
    hh_attach_lock_take();
    int error = HEAPHOOK_RELOC_OK;
    if (hh_allocating) goto out;
    if (hh_prev_free == NULL) {
        hh_prev_free = (void (*)(void *))hh_global_symbol("free");
        hh_prev_realloc = (void *(*)(void *, size_t))hh_global_symbol("realloc");
        hh_prev_usable_size = (size_t(*)(void *))hh_global_symbol("malloc_usable_size");
        if (hh_prev_free == NULL || hh_prev_realloc == NULL) {
            error = HEAPHOOK_RELOC_NO_ORIGINAL;
            goto out;
        }
        heaphook_reloc_skip((void *)heaphook_attach);
    }
    /* Routing first: from here on a foreign pointer reaching our free goes back. */
    atomic_store(&hh_attached, true);
    atomic_store(&hh_free_direct, false); /* free's one-test way knows no foreign block */
    for (size_t i = 0; i < HH_FAMILY_COUNT; ++i) {
        if (hh_patches[i] != NULL) continue; /* still routed from an earlier attach */
        int e = heaphook_reloc_patch(hh_family[i].name, hh_family[i].local, NULL, &hh_patches[i]);
        if (e != HEAPHOOK_RELOC_OK) error = e;
    }
    hh_allocating = true;
out:
    hh_attach_lock_give();
    return error;
}

HH_EXPORT int heaphook_detach(void) {
    hh_attach_lock_take();
    int error = HEAPHOOK_RELOC_OK;
    for (size_t i = 0; i < HH_FAMILY_COUNT; ++i) {
        if (!hh_family[i].allocates || hh_patches[i] == NULL) continue;
        int e = heaphook_reloc_unpatch(hh_patches[i]);
        if (e != HEAPHOOK_RELOC_OK) error = e;
        hh_patches[i] = NULL;
    }
    hh_allocating = false;
    hh_attach_lock_give();
    return error;
}

HH_EXPORT int heaphook_is_attached(void) {
    hh_attach_lock_take();
    int attached = hh_allocating;
    hh_attach_lock_give();
    return attached;
}
