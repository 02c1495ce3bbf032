/*
 * reloc_patch.c — the process-wide patches (heaphook/reloc.h, "The whole process"): a symbol
 * redirected in every loaded object, now and in objects loaded later.
 *
 * The patches live in a fixed table (no malloc: the dlopen hook runs inside other programs'
 * calls). Each written slot records its previous value, so undo restores it, and layering (two
 * patches of one symbol) is a chain of records on the same slot. While any patch is active,
 * dlopen and dlclose are patched too: after a dlopen every active patch is applied to every
 * object again (slots already written are skipped), after a dlclose the records of objects
 * that are gone are dropped. Reading and writing one object's GOT is reloc_object.c's.
 *
 * Self-contained on purpose (libc and libdl only), as reloc_object.c.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heaphook/backend.h"
#include "heaphook/lockrank.h"
#include "reloc_object.h"

/* ---- The whole process ------------------------------------------------------------------- */

/*
 * A non-PIE program that takes the address of a library function (malloc passed as a pointer,
 * say) defines a canonical PLT entry for it: its dynamic symbol table lists the function as
 * undefined with the entry's address as value, so that every object sees one address, and
 * dlsym(RTLD_DEFAULT) answers with that entry. The entry jumps through the program's own GOT
 * slot, the very slot a patch redirects: forwarding to it after the patch would call the
 * replacement again, forever. The function itself is what that slot leads to.
 */
int heaphook_reloc_resolve(const char *symbol, void **function) HH_RELOC_EXPORT;
int heaphook_reloc_resolve(const char *symbol, void **function) {
    if (symbol == NULL || symbol[0] == '\0' || function == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    *function = dlsym(RTLD_DEFAULT, symbol);
    if (*function == NULL) return HEAPHOOK_RELOC_NOT_FOUND;
    struct hh_reloc_find find = {.main_program = true};
    dl_iterate_phdr(hh_reloc_find_callback, &find);
    if (!find.found || !hh_reloc_contains(&find.info, (uintptr_t)*function))
        return HEAPHOOK_RELOC_OK;
    struct heaphook_reloc_object program; /* on the stack: nothing here allocates */
    if (hh_reloc_parse(&program, &find.info) != HEAPHOOK_RELOC_OK) return HEAPHOOK_RELOC_OK;
    /* A program that defines the function itself binds its calls directly: no GOT slot. */
    void *target = NULL;
    if (hh_reloc_each_slot(&program, symbol, hh_reloc_get_slot, &target) == 0 || target == NULL) {
        return HEAPHOOK_RELOC_OK;
    }
    /* Still the entry (a lazily bound slot not yet resolved): the next definition instead. */
    if (hh_reloc_contains(&find.info, (uintptr_t)target)) target = dlsym(RTLD_NEXT, symbol);
    if (target != NULL) *function = target;
    return HEAPHOOK_RELOC_OK;
}

#define HH_MAX_PATCHES 64
#define HH_MAX_RECORDS 4096
#define HH_MAX_SKIP 32
#define HH_SYMBOL_MAX 64

struct heaphook_reloc_handle {
    char symbol[HH_SYMBOL_MAX];
    void *replacement;
    void *original;
    unsigned long serial; /* order of creation: a newer patch layers over an older one */
    bool active;
    bool internal; /* the dlopen / dlclose hooks */
};

struct hh_record {
    void **slot;
    void *previous;                   /* the value before this patch wrote the slot */
    const ElfW(Dyn) * object_dynamic; /* identifies the object (for dlclose) */
    struct heaphook_reloc_handle *patch;
};

static pthread_mutex_t hh_reloc_lock = PTHREAD_MUTEX_INITIALIZER;
static HEAPHOOK_LARGE_STORAGE struct heaphook_reloc_handle hh_patches[HH_MAX_PATCHES];
static HEAPHOOK_LARGE_STORAGE struct hh_record hh_records[HH_MAX_RECORDS];
static size_t hh_record_count;
static unsigned long hh_serial;
static uintptr_t hh_skip[HH_MAX_SKIP];
static size_t hh_skip_count;
static bool hh_hooks_installed;
static struct heaphook_reloc_handle *hh_dlopen_patch, *hh_dlclose_patch;
static void *(*hh_real_dlopen)(const char *, int);
static int (*hh_real_dlclose)(void *);

/* ---- Fork (reloc.h): the patch table's lock is held across fork, by the library's fork module
 * when it has one (heaphook_reloc_fork_by_caller), else by handlers of the patcher's own. */

static _Atomic bool hh_fork_by_caller;

/* The lock's rank in the fork modules' order (heaphook/lockrank.h): checked in debug builds. */
#define HH_RELOC_LOCK_NAME "the GOT patcher's lock (reloc_patch.c)"

static void hh_reloc_lock_take(void) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HEAPHOOK_LOCK_RANK_RELOC, HH_RELOC_LOCK_NAME);
    pthread_mutex_lock(&hh_reloc_lock);
}

static void hh_reloc_lock_give(void) {
    pthread_mutex_unlock(&hh_reloc_lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HEAPHOOK_LOCK_RANK_RELOC);
}

void heaphook_reloc_prefork(void) HH_RELOC_EXPORT;
void heaphook_reloc_prefork(void) {
    hh_reloc_lock_take();
}
void heaphook_reloc_postfork_parent(void) HH_RELOC_EXPORT;
void heaphook_reloc_postfork_parent(void) {
    hh_reloc_lock_give();
}
void heaphook_reloc_postfork_child(void) HH_RELOC_EXPORT;
void heaphook_reloc_postfork_child(void) {
    pthread_mutex_init(&hh_reloc_lock, NULL);
    HEAPHOOK_LOCK_RANK_RELEASE(HEAPHOOK_LOCK_RANK_RELOC); /* the forking thread's prefork took it */
}
void heaphook_reloc_fork_by_caller(void) HH_RELOC_EXPORT;
void heaphook_reloc_fork_by_caller(void) {
    atomic_store(&hh_fork_by_caller, true);
}
static void hh_register_atfork(void) {
    if (atomic_load(&hh_fork_by_caller)) return;
    pthread_atfork(heaphook_reloc_prefork, heaphook_reloc_postfork_parent,
                   heaphook_reloc_postfork_child);
}

static bool hh_skipped(const struct dl_phdr_info *info) {
    const char *name = info->dlpi_name;
    if (name != NULL && (strstr(name, "linux-vdso") || strstr(name, "linux-gate") ||
                         strstr(name, "/ld-linux") || strncmp(name, "ld-linux", 8) == 0)) {
        return true;
    }
    for (size_t i = 0; i < hh_skip_count; ++i) {
        if (hh_reloc_contains(info, hh_skip[i])) return true;
    }
    return false;
}

/* The newest record on slot, or NULL. */
static struct hh_record *hh_top_record(void **slot) {
    struct hh_record *top = NULL;
    for (size_t i = 0; i < hh_record_count; ++i) {
        struct hh_record *r = &hh_records[i];
        if (r->slot == slot && (top == NULL || r->patch->serial > top->patch->serial)) top = r;
    }
    return top;
}

static void hh_drop_record(size_t index) {
    hh_records[index] = hh_records[--hh_record_count];
}

static void hh_drop_slot(void **slot) {
    for (size_t i = hh_record_count; i-- > 0;) {
        if (hh_records[i].slot == slot) hh_drop_record(i);
    }
}

struct hh_apply {
    struct heaphook_reloc_handle *patch;
    int error;
};

static void hh_apply_slot(struct heaphook_reloc_object *object, void **slot, const ElfW(Sym) * sym,
                          void *arg) {
    (void)sym;
    struct hh_apply *apply = arg;
    struct heaphook_reloc_handle *patch = apply->patch;
    struct hh_record *top = hh_top_record(slot);
    void *current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (top != NULL && current != top->patch->replacement) {
        /* The object was unloaded without our dlclose seeing it and another took its place. */
        hh_drop_slot(slot);
        top = NULL;
    }
    if (top != NULL && top->patch->serial >= patch->serial) return; /* already, or newer */
    if (hh_record_count == HH_MAX_RECORDS) {
        apply->error = HEAPHOOK_RELOC_NO_MEMORY;
        return;
    }
    int error = hh_reloc_write_slot(object, slot, patch->replacement);
    if (error != HEAPHOOK_RELOC_OK) {
        apply->error = error;
        return;
    }
    hh_records[hh_record_count++] = (struct hh_record){
        .slot = slot, .previous = current, .object_dynamic = object->dynamic, .patch = patch};
}

static int hh_apply_callback(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    if (hh_skipped(info)) return 0;
    struct heaphook_reloc_object object;
    if (hh_reloc_parse(&object, info) != HEAPHOOK_RELOC_OK) return 0;
    hh_reloc_each_slot(&object, ((struct hh_apply *)arg)->patch->symbol, hh_apply_slot, arg);
    return 0;
}

static int hh_apply(struct heaphook_reloc_handle *patch) {
    struct hh_apply apply = {.patch = patch};
    dl_iterate_phdr(hh_apply_callback, &apply);
    return apply.error;
}

/* Every active patch, oldest first, on every object (after a dlopen). */
static void hh_apply_all(void) {
    for (unsigned long serial = 1; serial <= hh_serial; ++serial) {
        for (size_t i = 0; i < HH_MAX_PATCHES; ++i) {
            if (hh_patches[i].active && hh_patches[i].serial == serial) hh_apply(&hh_patches[i]);
        }
    }
}

struct hh_loaded {
    const ElfW(Dyn) * dynamics[1024];
    size_t count;
};

static int hh_loaded_callback(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct hh_loaded *loaded = arg;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC && loaded->count < 1024) {
            loaded->dynamics[loaded->count++] =
                (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        }
    }
    return 0;
}

/* Drops the records of objects that are no longer loaded (after a dlclose). */
static void hh_forget_unloaded(void) {
    struct hh_loaded loaded;
    loaded.count = 0;
    dl_iterate_phdr(hh_loaded_callback, &loaded);
    for (size_t i = hh_record_count; i-- > 0;) {
        bool present = false;
        for (size_t j = 0; j < loaded.count && !present; ++j) {
            present = loaded.dynamics[j] == hh_records[i].object_dynamic;
        }
        if (!present) hh_drop_record(i);
    }
}

static void *hh_dlopen_hook(const char *file, int mode) {
    void *handle = hh_real_dlopen(file, mode);
    if (handle != NULL) {
        hh_reloc_lock_take();
        hh_apply_all();
        hh_reloc_lock_give();
    }
    return handle;
}

static int hh_dlclose_hook(void *handle) {
    int result = hh_real_dlclose(handle);
    hh_reloc_lock_take();
    hh_forget_unloaded();
    hh_reloc_lock_give();
    return result;
}

/* The definition calls reach now: dlsym's answer unless it is the replacement itself. */
static void *hh_find_original(const char *symbol, void *replacement) {
    void *address = NULL;
    if (heaphook_reloc_resolve(symbol, &address) != HEAPHOOK_RELOC_OK || address == replacement) {
        address = dlsym(RTLD_NEXT, symbol);
    }
    return address == replacement ? NULL : address;
}

static struct heaphook_reloc_handle *hh_new_patch(const char *symbol, void *replacement,
                                                  int *error) {
    struct heaphook_reloc_handle *patch = NULL;
    for (size_t i = 0; i < HH_MAX_PATCHES && patch == NULL; ++i) {
        if (!hh_patches[i].active) patch = &hh_patches[i];
    }
    if (patch == NULL) {
        *error = HEAPHOOK_RELOC_NO_MEMORY;
        return NULL;
    }
    /* Layering: the original of a second patch is the first one's replacement. */
    void *original = NULL;
    unsigned long newest = 0;
    for (size_t i = 0; i < HH_MAX_PATCHES; ++i) {
        if (hh_patches[i].active && !hh_patches[i].internal &&
            strcmp(hh_patches[i].symbol, symbol) == 0 && hh_patches[i].serial > newest) {
            newest = hh_patches[i].serial;
            original = hh_patches[i].replacement;
        }
    }
    if (original == NULL) original = hh_find_original(symbol, replacement);
    if (original == NULL) {
        *error = HEAPHOOK_RELOC_NO_ORIGINAL;
        return NULL;
    }
    memset(patch, 0, sizeof *patch);
    strcpy(patch->symbol, symbol);
    patch->replacement = replacement;
    patch->original = original;
    patch->serial = ++hh_serial;
    patch->active = true;
    return patch;
}

static int hh_install_hooks(void) {
    if (hh_hooks_installed) return HEAPHOOK_RELOC_OK;
    int error = HEAPHOOK_RELOC_OK;
    hh_dlopen_patch = hh_new_patch("dlopen", (void *)hh_dlopen_hook, &error);
    if (hh_dlopen_patch == NULL) return error;
    hh_dlclose_patch = hh_new_patch("dlclose", (void *)hh_dlclose_hook, &error);
    if (hh_dlclose_patch == NULL) {
        hh_dlopen_patch->active = false;
        return error;
    }
    hh_dlopen_patch->internal = hh_dlclose_patch->internal = true;
    hh_real_dlopen = (void *(*)(const char *, int))hh_dlopen_patch->original;
    hh_real_dlclose = (int (*)(void *))hh_dlclose_patch->original;
    hh_apply(hh_dlopen_patch);
    hh_apply(hh_dlclose_patch);
    hh_hooks_installed = true;
    return HEAPHOOK_RELOC_OK;
}

int heaphook_reloc_patch(const char *symbol, void *replacement, void **original,
                         heaphook_reloc_handle **out) HH_RELOC_EXPORT;
int heaphook_reloc_patch(const char *symbol, void *replacement, void **original,
                         heaphook_reloc_handle **out) {
    if (symbol == NULL || symbol[0] == '\0' || strlen(symbol) >= HH_SYMBOL_MAX ||
        replacement == NULL) {
        return HEAPHOOK_RELOC_INVALID_ARG;
    }
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    pthread_once(&atfork_once, hh_register_atfork);
    hh_reloc_lock_take();
    int error = hh_install_hooks();
    struct heaphook_reloc_handle *patch = NULL;
    if (error == HEAPHOOK_RELOC_OK) patch = hh_new_patch(symbol, replacement, &error);
    if (patch != NULL) {
        error = hh_apply(patch);
        if (original != NULL) *original = patch->original;
    }
    hh_reloc_lock_give();
    if (out != NULL) *out = error == HEAPHOOK_RELOC_OK ? patch : NULL;
    return error;
}

/* Puts back every slot patch wrote (a slot a newer layer covers: that layer now leads to what
 * this one replaced), forgets its records and deactivates it. Lock held. */
static int hh_undo(struct heaphook_reloc_handle *patch) {
    int error = HEAPHOOK_RELOC_OK;
    for (size_t i = hh_record_count; i-- > 0;) {
        struct hh_record *record = &hh_records[i];
        if (record->patch != patch) continue;
        struct hh_record *top = hh_top_record(record->slot);
        if (top != record) {
            for (size_t j = 0; j < hh_record_count; ++j) {
                struct hh_record *other = &hh_records[j];
                if (other->slot == record->slot && other->previous == patch->replacement) {
                    other->previous = record->previous;
                }
            }
        } else {
            /* The object is known loaded (dlclose drops records): find its RELRO range. */
            struct dl_phdr_info info;
            struct hh_reloc_find find = {.address = (const void *)record->slot};
            dl_iterate_phdr(hh_reloc_find_callback, &find);
            if (find.found) {
                info = find.info;
                struct heaphook_reloc_object object;
                if (hh_reloc_parse(&object, &info) == HEAPHOOK_RELOC_OK) {
                    int e = hh_reloc_write_slot(&object, record->slot, record->previous);
                    if (e != HEAPHOOK_RELOC_OK) error = e;
                }
            }
        }
        hh_drop_record(i);
    }
    patch->active = false;
    /* A newer layer over this one now calls what this one called. */
    for (size_t i = 0; i < HH_MAX_PATCHES; ++i) {
        if (hh_patches[i].active && hh_patches[i].original == patch->replacement &&
            strcmp(hh_patches[i].symbol, patch->symbol) == 0) {
            hh_patches[i].original = patch->original;
        }
    }
    return error;
}

int heaphook_reloc_unpatch(heaphook_reloc_handle *patch) HH_RELOC_EXPORT;
int heaphook_reloc_unpatch(heaphook_reloc_handle *patch) {
    if (patch == NULL || patch < hh_patches || patch >= hh_patches + HH_MAX_PATCHES) {
        return HEAPHOOK_RELOC_INVALID_ARG;
    }
    hh_reloc_lock_take();
    if (!patch->active || patch->internal) {
        hh_reloc_lock_give();
        return HEAPHOOK_RELOC_INVALID_ARG;
    }
    int error = hh_undo(patch);
    /* The last patch undone: the dlopen / dlclose hooks go too, so every GOT is as before. */
    bool any = false;
    for (size_t i = 0; i < HH_MAX_PATCHES && !any; ++i) {
        any = hh_patches[i].active && !hh_patches[i].internal;
    }
    if (!any && hh_hooks_installed) {
        int e = hh_undo(hh_dlclose_patch);
        if (error == HEAPHOOK_RELOC_OK) error = e;
        e = hh_undo(hh_dlopen_patch);
        if (error == HEAPHOOK_RELOC_OK) error = e;
        hh_hooks_installed = false;
    }
    hh_reloc_lock_give();
    return error;
}

int heaphook_reloc_skip(const void *address) HH_RELOC_EXPORT;
int heaphook_reloc_skip(const void *address) {
    if (address == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    hh_reloc_lock_take();
    int error = HEAPHOOK_RELOC_OK;
    if (hh_skip_count == HH_MAX_SKIP) {
        error = HEAPHOOK_RELOC_NO_MEMORY;
    } else {
        hh_skip[hh_skip_count++] = (uintptr_t)address;
    }
    hh_reloc_lock_give();
    return error;
}

unsigned long heaphook_reloc_patched_entries(void) HH_RELOC_EXPORT;
unsigned long heaphook_reloc_patched_entries(void) {
    hh_reloc_lock_take();
    unsigned long count = 0;
    for (size_t i = 0; i < hh_record_count; ++i) count += !hh_records[i].patch->internal;
    hh_reloc_lock_give();
    return count;
}
