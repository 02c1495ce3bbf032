/*
 * reloc_object.c — GOT relocation patching of one loaded object (heaphook/reloc.h, "One
 * object"): plthook's API, open / replace returning the old pointer / close, numeric errors.
 *
 * The loaded objects come from dl_iterate_phdr. For each one the dynamic section gives the
 * symbol and string tables and two RELA tables (DT_RELA: GLOB_DAT among others; DT_JMPREL:
 * JUMP_SLOT). An entry of the named symbol is redirected by writing its GOT slot; a slot inside
 * the PT_GNU_RELRO range (read-only after start-up) is made writable for the write and read-only
 * again after it, exactly over the pages the dynamic loader protected. The process-wide patch
 * table (reloc_patch.c) is built on the same reading (reloc_object.h).
 *
 * Self-contained on purpose (libc and libdl only): test programs and other libraries compile
 * the reloc files alone (HEAPHOOK_RELOC_SOURCES).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reloc_object.h"

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

static size_t hh_reloc_page(void) {
    static size_t page;
    if (page == 0) page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

/* Dynamic entries are addresses after relocation by glibc on most targets, offsets on others
 * and in the vdso: an address below the load base is an offset. */
static uintptr_t hh_dyn_ptr(uintptr_t base, ElfW(Addr) value) {
    return value < base ? base + value : value;
}

int hh_reloc_parse(struct heaphook_reloc_object *object, const struct dl_phdr_info *info) {
    memset(object, 0, sizeof *object);
    object->base = info->dlpi_addr;
    object->load_start = UINTPTR_MAX;
    size_t page = hh_reloc_page();
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

int hh_reloc_each_slot(struct heaphook_reloc_object *object, const char *symbol,
                       hh_reloc_slot_visitor visit, void *arg) {
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

int hh_reloc_write_slot(const struct heaphook_reloc_object *object, void **slot, void *value) {
    uintptr_t page = (uintptr_t)slot & ~(hh_reloc_page() - 1);
    if (!hh_in_relro(object, page)) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return HEAPHOOK_RELOC_OK;
    }
    if (mprotect((void *)page, hh_reloc_page(), PROT_READ | PROT_WRITE) != 0) {
        return HEAPHOOK_RELOC_PROTECT_FAILED;
    }
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    int saved = errno;
    mprotect((void *)page, hh_reloc_page(), PROT_READ);
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

bool hh_reloc_contains(const struct dl_phdr_info *info, uintptr_t address) {
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

int hh_reloc_find_callback(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct hh_reloc_find *find = arg;
    bool match;
    if (find->address != NULL) {
        match = hh_reloc_contains(info, (uintptr_t)find->address);
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

static int hh_open(heaphook_reloc_object **out, struct hh_reloc_find *find) {
    if (out == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    *out = NULL;
    dl_iterate_phdr(hh_reloc_find_callback, find);
    if (!find->found) return HEAPHOOK_RELOC_NOT_FOUND;
    heaphook_reloc_object *object = malloc(sizeof *object);
    if (object == NULL) return HEAPHOOK_RELOC_NO_MEMORY;
    int error = hh_reloc_parse(object, &find->info);
    if (error != HEAPHOOK_RELOC_OK) {
        free(object);
        return error;
    }
    *out = object;
    return HEAPHOOK_RELOC_OK;
}

int heaphook_reloc_open(heaphook_reloc_object **out, const char *filename) HH_RELOC_EXPORT;
int heaphook_reloc_open(heaphook_reloc_object **out, const char *filename) {
    struct hh_reloc_find find = {.filename = filename, .main_program = filename == NULL};
    return hh_open(out, &find);
}

int heaphook_reloc_open_by_address(heaphook_reloc_object **out,
                                   const void *address) HH_RELOC_EXPORT;
int heaphook_reloc_open_by_address(heaphook_reloc_object **out, const void *address) {
    if (address == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    struct hh_reloc_find find = {.address = address};
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
    int error = hh_reloc_write_slot(object, slot, r->replacement);
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
    int found = hh_reloc_each_slot(object, symbol, hh_replace_slot, &r);
    if (found == 0) return HEAPHOOK_RELOC_NOT_FOUND;
    if (old != NULL) *old = r.old;
    return r.error;
}

void hh_reloc_get_slot(struct heaphook_reloc_object *object, void **slot, const ElfW(Sym) * sym,
                       void *arg) {
    void **current = arg;
    if (*current == NULL) *current = hh_slot_target(object, slot, sym);
}

int heaphook_reloc_get(heaphook_reloc_object *object, const char *symbol,
                       void **current) HH_RELOC_EXPORT;
int heaphook_reloc_get(heaphook_reloc_object *object, const char *symbol, void **current) {
    if (object == NULL || symbol == NULL || current == NULL) return HEAPHOOK_RELOC_INVALID_ARG;
    *current = NULL;
    if (hh_reloc_each_slot(object, symbol, hh_reloc_get_slot, current) == 0) {
        return HEAPHOOK_RELOC_NOT_FOUND;
    }
    return HEAPHOOK_RELOC_OK;
}

void heaphook_reloc_close(heaphook_reloc_object *object) HH_RELOC_EXPORT;
void heaphook_reloc_close(heaphook_reloc_object *object) {
    free(object);
}
