/*
 * reloc_object.h — what the process-wide patch table (reloc_patch.c) uses of the per-object
 * layer (reloc_object.c): a loaded object's dynamic section as the patcher reads it, the walk
 * over the GOT slots of one symbol, the write of one slot, and the search of a loaded object.
 * Internal to heaphook::reloc (hidden); the public API is heaphook/reloc.h.
 */
#ifndef HH_RELOC_OBJECT_H
#define HH_RELOC_OBJECT_H

#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heaphook/reloc.h"

#define HH_RELOC_EXPORT __attribute__((visibility("default")))
#define HH_RELOC_HIDDEN __attribute__((visibility("hidden")))

/* A loaded object, read from its program headers and dynamic section (no copy of either). */
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

/* What hh_reloc_find_callback looks for (by file name, by an address inside, or the program
 * itself) and, once found, the object's dl_iterate_phdr record. */
struct hh_reloc_find {
    const char *filename;     /* or NULL */
    const void *address;      /* or NULL */
    bool main_program;        /* filename NULL and address NULL */
    struct dl_phdr_info info; /* the match */
    bool found;
};

/* Calls visit(object, slot, sym, arg) for every JUMP_SLOT / GLOB_DAT slot of symbol. */
typedef void (*hh_reloc_slot_visitor)(struct heaphook_reloc_object *object, void **slot,
                                      const ElfW(Sym) * sym, void *arg);

/* Reads an object; BAD_OBJECT when it has no dynamic section or REL relocations. */
HH_RELOC_HIDDEN int hh_reloc_parse(struct heaphook_reloc_object *object,
                                   const struct dl_phdr_info *info);
/* Visits every JUMP_SLOT / GLOB_DAT slot of symbol; returns how many. */
HH_RELOC_HIDDEN int hh_reloc_each_slot(struct heaphook_reloc_object *object, const char *symbol,
                                       hh_reloc_slot_visitor visit, void *arg);
/* Writes one slot, lifting RELRO protection around the write when the slot is under it. */
HH_RELOC_HIDDEN int hh_reloc_write_slot(const struct heaphook_reloc_object *object, void **slot,
                                        void *value);
/* A visitor: *(void **)arg receives the function the first slot leads to. */
HH_RELOC_HIDDEN void hh_reloc_get_slot(struct heaphook_reloc_object *object, void **slot,
                                       const ElfW(Sym) * sym, void *arg);
/* Does one of the object's PT_LOAD segments hold address? */
HH_RELOC_HIDDEN bool hh_reloc_contains(const struct dl_phdr_info *info, uintptr_t address);
/* dl_iterate_phdr's callback for a struct hh_reloc_find. */
HH_RELOC_HIDDEN int hh_reloc_find_callback(struct dl_phdr_info *info, size_t size, void *arg);

#endif /* HH_RELOC_OBJECT_H */
