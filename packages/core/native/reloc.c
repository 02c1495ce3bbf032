/*
 * reloc.c — GOT relocation patching (heaphook/reloc.h).
 *
 * The loaded objects come from dl_iterate_phdr. For each one the dynamic section gives the
 * symbol and string tables and two RELA tables (DT_RELA: GLOB_DAT among others; DT_JMPREL:
 * JUMP_SLOT). An entry of the named symbol is redirected by writing its GOT slot; a slot inside
 * the PT_GNU_RELRO range (read-only after start-up) is made writable for the write and read-only
 * again after it, exactly over the pages the dynamic loader protected.
 *
 * The process-wide patches live in a fixed table (no malloc: the dlopen hook runs inside other
 * programs' calls). Each written slot records its previous value, so undo restores it, and
 * layering (two patches of one symbol) is a chain of records on the same slot. While any patch
 * is active, dlopen and dlclose are patched too: after a dlopen every active patch is applied
 * to every object again (slots already written are skipped), after a dlclose the records of
 * objects that are gone are dropped.
 *
 * Self-contained on purpose (libc and libdl only): test programs and other libraries compile
 * this file alone.
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
#include "heaphook/reloc.h"

#define HH_RELOC_EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__)
#define HH_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define HH_R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define HH_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define HH_R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "heaphook reloc: RELA relocations of x86-64 or AArch64 only"
#endif

#if __ELF_NATIVE_CLASS == 64
#define HH_R_SYM ELF64_R_SYM
#define HH_R_TYPE ELF64_R_TYPE
#else
#define HH_R_SYM ELF32_R_SYM
#define HH_R_TYPE ELF32_R_TYPE
#endif

/* ---- One object: what its dynamic section says ------------------------------------------- */

struct heaphook_reloc_object {
    uintptr_t base;
    const ElfW(Dyn) * dynamic;
    const ElfW(Sym) * symtab;
    const char *strtab;
    const ElfW(Rela) * rela;
    size_t rela_count;
    const ElfW(Rela) * jmprel;
    size_t jmprel_count;
    uintptr_t relro_start, relro_end; /* pages the loader made read-only */
    uintptr_t load_start, load_end;   /* span of the PT_LOAD segments */
    bool bind_now;                    /* DF_BIND_NOW / DF_1_NOW: no JUMP_SLOT is left unresolved */
};

static size_t hh_page(void) {
    static size_t page;
    if (page == 0) page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

/* Dynamic entries are addresses after relocation by glibc on most targets, offsets on others
 * and in the vdso: an address below the load base is an offset. */
static uintptr_t hh_dyn_ptr(uintptr_t base, ElfW(Addr) value) {
    return value < base ? base + value : value;
}

static int hh_object_parse(struct heaphook_reloc_object *object, const struct dl_phdr_info *info) {
    memset(object, 0, sizeof *object);
    object->base = info->dlpi_addr;
    object->load_start = UINTPTR_MAX;
    size_t page = hh_page();
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_DYNAMIC) {
            object->dynamic = (const ElfW(Dyn) *)start;
        } else if (ph->p_type == PT_GNU_RELRO) {
            /* As the loader: start rounded down, end rounded down. */
            object->relro_start = start & ~(page - 1);
            object->relro_end = (start + ph->p_memsz) & ~(page - 1);
        } else if (ph->p_type == PT_LOAD) {
            if (start < object->load_start) object->load_start = start;
            if (start + ph->p_memsz > object->load_end) object->load_end = start + ph->p_memsz;
        }
    }
    if (object->dynamic == NULL) return HEAPHOOK_RELOC_BAD_OBJECT;
    size_t relasz = 0, pltrelsz = 0;
    long pltrel = DT_RELA;
    uintptr_t base = object->base;
    for (const ElfW(Dyn) *dyn = object->dynamic; dyn->d_tag != DT_NULL; ++dyn) {
        switch (dyn->d_tag) {
            case DT_SYMTAB:
                object->symtab = (const ElfW(Sym) *)hh_dyn_ptr(base, dyn->d_un.d_ptr);
                break;
            case DT_STRTAB:
                object->strtab = (const char *)hh_dyn_ptr(base, dyn->d_un.d_ptr);
                break;
            case DT_RELA:
                object->rela = (const ElfW(Rela) *)hh_dyn_ptr(base, dyn->d_un.d_ptr);
                break;
            case DT_RELASZ:
                relasz = dyn->d_un.d_val;
                break;
            case DT_JMPREL:
                object->jmprel = (const ElfW(Rela) *)hh_dyn_ptr(base, dyn->d_un.d_ptr);
                break;
            case DT_PLTRELSZ:
                pltrelsz = dyn->d_un.d_val;
                break;
            case DT_PLTREL:
                pltrel = (long)dyn->d_un.d_val;
                break;
            case DT_REL:
                return HEAPHOOK_RELOC_BAD_OBJECT;
            case DT_BIND_NOW:
                object->bind_now = true;
                break;
            case DT_FLAGS:
                if (dyn->d_un.d_val & DF_BIND_NOW) object->bind_now = true;
                break;
            case DT_FLAGS_1:
                if (dyn->d_un.d_val & DF_1_NOW) object->bind_now = true;
                break;
            default:
                break;
        }
    }
    if (object->symtab == NULL || object->strtab == NULL || pltrel != DT_RELA) {
        return HEAPHOOK_RELOC_BAD_OBJECT;
    }
    object->rela_count = object->rela ? relasz / sizeof(ElfW(Rela)) : 0;
    object->jmprel_count = object->jmprel ? pltrelsz / sizeof(ElfW(Rela)) : 0;
    return HEAPHOOK_RELOC_OK;
}

/* Calls visit(object, slot, sym, arg) for every JUMP_SLOT / GLOB_DAT slot of symbol. */
typedef void (*hh_slot_visitor)(struct heaphook_reloc_object *object, void **slot,
                                const ElfW(Sym) * sym, void *arg);

static int hh_object_each_slot(struct heaphook_reloc_object *object, const char *symbol,
                               hh_slot_visitor visit, void *arg) {
    int found = 0;
    const ElfW(Rela) * tables[2] = {object->jmprel, object->rela};
    size_t counts[2] = {object->jmprel_count, object->rela_count};
    for (int t = 0; t < 2; ++t) {
        for (size_t i = 0; i < counts[t]; ++i) {
            const ElfW(Rela) *r = &tables[t][i];
            unsigned long type = HH_R_TYPE(r->r_info);
            if (type != HH_R_JUMP_SLOT && type != HH_R_GLOB_DAT) continue;
            size_t index = HH_R_SYM(r->r_info);
            if (index == 0) continue;
            const ElfW(Sym) *sym = &object->symtab[index];
            if (strcmp(object->strtab + sym->st_name, symbol) != 0) continue;
            ++found;
            visit(object, (void **)(object->base + r->r_offset), sym, arg);
        }
    }
    return found;
}

static bool hh_in_relro(const struct heaphook_reloc_object *object, uintptr_t page) {
    return page >= object->relro_start && page < object->relro_end;
}

static int hh_write_slot(const struct heaphook_reloc_object *object, void **slot, void *value) {
    uintptr_t page = (uintptr_t)slot & ~(hh_page() - 1);
    if (!hh_in_relro(object, page)) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return HEAPHOOK_RELOC_OK;
    }
    if (mprotect((void *)page, hh_page(), PROT_READ | PROT_WRITE) != 0) {
        return HEAPHOOK_RELOC_PROTECT_FAILED;
    }
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    int saved = errno;
    mprotect((void *)page, hh_page(), PROT_READ);
    errno = saved;
    return HEAPHOOK_RELOC_OK;
}

/* Is value a lazy-binding PLT stub of the object (an unresolved JUMP_SLOT points back into
 * the object's PLT)? On x86-64 the stub the slot names starts with `push $index` (0x68),
 * after an endbr64 with IBT; elsewhere any address inside a lazily bound object counts. */
static bool hh_is_plt_stub(const struct heaphook_reloc_object *object, uintptr_t value) {
    if (object->bind_now || value < object->load_start || value >= object->load_end) return false;
#if defined(__x86_64__)
    const unsigned char *code = (const unsigned char *)value;
    static const unsigned char endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    if (memcmp(code, endbr64, 4) == 0) code += 4;
    return code[0] == 0x68;
#else
    return true;
#endif
}

/* The function a slot leads to: with lazy binding an unresolved JUMP_SLOT points back into the
 * object's own PLT, so ask the loader instead. */
static void *hh_slot_target(const struct heaphook_reloc_object *object, void **slot,
                            const ElfW(Sym) * sym) {
    void *value = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (sym->st_shndx == SHN_UNDEF && hh_is_plt_stub(object, (uintptr_t)value)) {
        void *resolved = dlsym(RTLD_DEFAULT, object->strtab + sym->st_name);
        if (resolved != NULL) return resolved;
    }
    return value;
}

/* ---- One object: the plthook-like API ---------------------------------------------------- */

const char *heaphook_reloc_strerror(int error) HH_RELOC_EXPORT;
const char *heaphook_reloc_strerror(int error) {
    switch (error) {
        case HEAPHOOK_RELOC_OK:
            return "success";
        case HEAPHOOK_RELOC_NOT_FOUND:
            return "object or symbol not found";
        case HEAPHOOK_RELOC_INVALID_ARG:
            return "invalid argument";
        case HEAPHOOK_RELOC_BAD_OBJECT:
            return "unsupported object (no dynamic section, or REL relocations)";
        case HEAPHOOK_RELOC_PROTECT_FAILED:
            return "mprotect of a GOT page failed";
        case HEAPHOOK_RELOC_NO_MEMORY:
            return "patch table full";
        case HEAPHOOK_RELOC_NO_ORIGINAL:
            return "original function not found";
        default:
            return "unknown error";
    }
}

struct hh_find {
    const char *filename;     /* or NULL */
    const void *address;      /* or NULL */
    bool main_program;        /* filename NULL and address NULL */
    struct dl_phdr_info info; /* the match */
    bool found;
};

static bool hh_contains(const struct dl_phdr_info *info, uintptr_t address) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (address >= start && address < start + ph->p_memsz) return true;
    }
    return false;
}

static bool hh_name_matches(const char *name, const char *wanted) {
    if (name == NULL) return false;
    if (strcmp(name, wanted) == 0) return true;
    const char *slash = strrchr(name, '/');
    return slash != NULL && strcmp(slash + 1, wanted) == 0;
}

static int hh_find_callback(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct hh_find *find = arg;
    bool match;
    if (find->address != NULL) {
        match = hh_contains(info, (uintptr_t)find->address);
    } else if (find->main_program) {
        match = true; /* the first object is the program */
    } else {
        match = hh_name_matches(info->dlpi_name, find->filename);
    }
    if (!match) return 0;
    find->info = *info;
    find->found = true;
    return 1;
}

static int hh_open(heaphook_reloc_object **out, struct hh_find *find) {
    if (out == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    *out = NULL;
    dl_iterate_phdr(hh_find_callback, find);
    if (!find->found) return HEAPHOOK_RELOC_NOT_FOUND;
    heaphook_reloc_object *object = malloc(sizeof *object);
    if (object == NULL) return HEAPHOOK_RELOC_NO_MEMORY;
    int error = hh_object_parse(object, &find->info);
    if (error != HEAPHOOK_RELOC_OK) {
        free(object);
        return error;
    }
    *out = object;
    return HEAPHOOK_RELOC_OK;
}

int heaphook_reloc_open(heaphook_reloc_object **out, const char *filename) HH_RELOC_EXPORT;
int heaphook_reloc_open(heaphook_reloc_object **out, const char *filename) {
    struct hh_find find = {.filename = filename, .main_program = filename == NULL};
    return hh_open(out, &find);
}

int heaphook_reloc_open_by_address(heaphook_reloc_object **out,
                                   const void *address) HH_RELOC_EXPORT;
int heaphook_reloc_open_by_address(heaphook_reloc_object **out, const void *address) {
    if (address == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    struct hh_find find = {.address = address};
    return hh_open(out, &find);
}

struct hh_replace {
    void *replacement;
    void *old;
    int error;
};

static void hh_replace_slot(struct heaphook_reloc_object *object, void **slot,
                            const ElfW(Sym) * sym, void *arg) {
    struct hh_replace *r = arg;
    if (r->old == NULL) r->old = hh_slot_target(object, slot, sym);
    int error = hh_write_slot(object, slot, r->replacement);
    if (error != HEAPHOOK_RELOC_OK) r->error = error;
}

int heaphook_reloc_replace(heaphook_reloc_object *object, const char *symbol, void *replacement,
                           void **old) HH_RELOC_EXPORT;
int heaphook_reloc_replace(heaphook_reloc_object *object, const char *symbol, void *replacement,
                           void **old) {
    if (object == NULL || symbol == NULL || symbol[0] == '\0' || replacement == NULL) {
        return HEAPHOOK_RELOC_INVALID_ARG;
    }
    struct hh_replace r = {.replacement = replacement};
    int found = hh_object_each_slot(object, symbol, hh_replace_slot, &r);
    if (found == 0) return HEAPHOOK_RELOC_NOT_FOUND;
    if (old != NULL) *old = r.old;
    return r.error;
}

static void hh_get_slot(struct heaphook_reloc_object *object, void **slot, const ElfW(Sym) * sym,
                        void *arg) {
    void **current = arg;
    if (*current == NULL) *current = hh_slot_target(object, slot, sym);
}

int heaphook_reloc_get(heaphook_reloc_object *object, const char *symbol,
                       void **current) HH_RELOC_EXPORT;
int heaphook_reloc_get(heaphook_reloc_object *object, const char *symbol, void **current) {
    if (object == NULL || symbol == NULL || current == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    *current = NULL;
    if (hh_object_each_slot(object, symbol, hh_get_slot, current) == 0) {
        return HEAPHOOK_RELOC_NOT_FOUND;
    }
    return HEAPHOOK_RELOC_OK;
}

void heaphook_reloc_close(heaphook_reloc_object *object) HH_RELOC_EXPORT;
void heaphook_reloc_close(heaphook_reloc_object *object) {
    free(object);
}

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
    struct hh_find find = {.main_program = true};
    dl_iterate_phdr(hh_find_callback, &find);
    if (!find.found || !hh_contains(&find.info, (uintptr_t)*function)) return HEAPHOOK_RELOC_OK;
    struct heaphook_reloc_object program; /* on the stack: nothing here allocates */
    if (hh_object_parse(&program, &find.info) != HEAPHOOK_RELOC_OK) return HEAPHOOK_RELOC_OK;
    /* A program that defines the function itself binds its calls directly: no GOT slot. */
    void *target = NULL;
    if (hh_object_each_slot(&program, symbol, hh_get_slot, &target) == 0 || target == NULL) {
        return HEAPHOOK_RELOC_OK;
    }
    /* Still the entry (a lazily bound slot not yet resolved): the next definition instead. */
    if (hh_contains(&find.info, (uintptr_t)target)) target = dlsym(RTLD_NEXT, symbol);
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

void heaphook_reloc_prefork(void) HH_RELOC_EXPORT;
void heaphook_reloc_prefork(void) {
    pthread_mutex_lock(&hh_reloc_lock);
}
void heaphook_reloc_postfork_parent(void) HH_RELOC_EXPORT;
void heaphook_reloc_postfork_parent(void) {
    pthread_mutex_unlock(&hh_reloc_lock);
}
void heaphook_reloc_postfork_child(void) HH_RELOC_EXPORT;
void heaphook_reloc_postfork_child(void) {
    pthread_mutex_init(&hh_reloc_lock, NULL);
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
        if (hh_contains(info, hh_skip[i])) return true;
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
    int error = hh_write_slot(object, slot, patch->replacement);
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
    if (hh_object_parse(&object, info) != HEAPHOOK_RELOC_OK) return 0;
    hh_object_each_slot(&object, ((struct hh_apply *)arg)->patch->symbol, hh_apply_slot, arg);
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
        pthread_mutex_lock(&hh_reloc_lock);
        hh_apply_all();
        pthread_mutex_unlock(&hh_reloc_lock);
    }
    return handle;
}

static int hh_dlclose_hook(void *handle) {
    int result = hh_real_dlclose(handle);
    pthread_mutex_lock(&hh_reloc_lock);
    hh_forget_unloaded();
    pthread_mutex_unlock(&hh_reloc_lock);
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
    pthread_mutex_lock(&hh_reloc_lock);
    int error = hh_install_hooks();
    struct heaphook_reloc_handle *patch = NULL;
    if (error == HEAPHOOK_RELOC_OK) patch = hh_new_patch(symbol, replacement, &error);
    if (patch != NULL) {
        error = hh_apply(patch);
        if (original != NULL) *original = patch->original;
    }
    pthread_mutex_unlock(&hh_reloc_lock);
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
            struct hh_find find = {.address = (const void *)record->slot};
            dl_iterate_phdr(hh_find_callback, &find);
            if (find.found) {
                info = find.info;
                struct heaphook_reloc_object object;
                if (hh_object_parse(&object, &info) == HEAPHOOK_RELOC_OK) {
                    int e = hh_write_slot(&object, record->slot, record->previous);
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
    pthread_mutex_lock(&hh_reloc_lock);
    if (!patch->active || patch->internal) {
        pthread_mutex_unlock(&hh_reloc_lock);
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
    pthread_mutex_unlock(&hh_reloc_lock);
    return error;
}

int heaphook_reloc_skip(const void *address) HH_RELOC_EXPORT;
int heaphook_reloc_skip(const void *address) {
    if (address == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    pthread_mutex_lock(&hh_reloc_lock);
    int error = HEAPHOOK_RELOC_OK;
    if (hh_skip_count == HH_MAX_SKIP) {
        error = HEAPHOOK_RELOC_NO_MEMORY;
    } else {
        hh_skip[hh_skip_count++] = (uintptr_t)address;
    }
    pthread_mutex_unlock(&hh_reloc_lock);
    return error;
}

unsigned long heaphook_reloc_patched_entries(void) HH_RELOC_EXPORT;
unsigned long heaphook_reloc_patched_entries(void) {
    pthread_mutex_lock(&hh_reloc_lock);
    unsigned long count = 0;
    for (size_t i = 0; i < hh_record_count; ++i) count += !hh_records[i].patch->internal;
    pthread_mutex_unlock(&hh_reloc_lock);
    return count;
}
