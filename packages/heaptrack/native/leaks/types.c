/*
 * types.c — the precise API's types and roots (include/heaphook/leaks.h): struct layouts and
 * their pointer words, typed blocks (a type id in the live-block table's entry), registered
 * root objects, and root-marked blocks. A check (mark.c) reads them through internal.h.
 *
 * Owns: the type, pointer-word and root arrays and their lock. May call: table.c
 * (hh_table_modify, hh_leaks_insert), hh_leaks_go_sync (the first use of the precise API
 * hands the table to the hooks, for good).
 */
#include <stdlib.h>
#include <string.h>

#include "heaphook/leaks.h"
#include "leaks/internal.h"

#define HH_MAX_TYPES 4096u
#define HH_MAX_PTR_WORDS (1u << 20)
#define HH_MAX_ROOTS 16384u

typedef struct hh_root {
    uintptr_t addr;
    int type;
} hh_root;

static _Atomic int g_types_lock;
static hh_type *g_types; /* index = type id; 0 unused */
static uint32_t g_ntypes = 1;
static uint32_t *g_ptr_words;
static uint32_t g_nptr_words;
static hh_root *g_roots;
static uint32_t g_nroots;

static void hh_copy_name(char *dst, size_t cap, const char *src) {
    size_t n = src == NULL ? 0 : strlen(src);
    if (n >= cap) n = cap - 1;
    if (n > 0) memcpy(dst, src, n);
    dst[n] = '\0';
}

HH_EXPORT int heaphook_type_register(const char *name, size_t size, const heaphook_field *fields,
                                     size_t nfields) {
    if (size == 0 || (nfields > 0 && fields == NULL)) return -1;
    hh_leaks_go_sync(); /* typed blocks and roots live in the table: the hooks keep it */
    for (size_t i = 0; i < nfields; i++) {
        if (fields[i].offset + fields[i].size > size) return -1;
    }
    hh_spin_lock(&g_types_lock);
    int id = -1;
    if (g_types == NULL) {
        g_types = hh_map(HH_MAX_TYPES * sizeof *g_types);
        g_ptr_words = hh_map(HH_MAX_PTR_WORDS * sizeof *g_ptr_words);
        g_roots = hh_map(HH_MAX_ROOTS * sizeof *g_roots);
    }
    if (g_types != NULL && g_ptr_words != NULL && g_roots != NULL && g_ntypes < HH_MAX_TYPES) {
        uint32_t words = 0;
        for (size_t i = 0; i < nfields; i++) {
            if (fields[i].is_pointer) words += (uint32_t)(fields[i].size / sizeof(void *));
        }
        if (g_nptr_words + words <= HH_MAX_PTR_WORDS) {
            hh_type *t = &g_types[g_ntypes];
            hh_copy_name(t->name, sizeof t->name, name);
            t->size = size;
            t->first = g_nptr_words;
            for (size_t i = 0; i < nfields; i++) {
                if (!fields[i].is_pointer) continue;
                for (size_t k = 0; k + sizeof(void *) <= fields[i].size; k += sizeof(void *)) {
                    g_ptr_words[g_nptr_words++] = (uint32_t)(fields[i].offset + k);
                }
            }
            t->nptr = g_nptr_words - t->first;
            id = (int)g_ntypes++;
        }
    }
    hh_spin_unlock(&g_types_lock);
    if (id > 0) atomic_store(&hh_leaks_on, 1);
    return id;
}

const hh_type *hh_type_of(uint64_t meta) {
    uint32_t t = (uint32_t)(meta >> HH_META_TYPE_SHIFT);
    return t != 0 && t < g_ntypes ? &g_types[t] : NULL;
}

HH_EXPORT int heaphook_set_type(void *block, int type) {
    if (block == NULL || type < 0 || (uint32_t)type >= g_ntypes) return -1;
    return hh_table_modify(block, type, -1) ? 0 : -1;
}

HH_EXPORT void *heaphook_alloc_typed(int type, size_t count) {
    if (type <= 0 || (uint32_t)type >= g_ntypes || count == 0) return NULL;
    size_t size = g_types[type].size, total;
    if (__builtin_mul_overflow(count, size, &total)) return NULL;
    void *p = calloc(count, size);
    if (p == NULL) return NULL;
    if (!hh_table_modify(p, type, -1)) { /* not tracked by the hooks (tracer not active) */
        hh_leaks_insert(p, total);
        hh_table_modify(p, type, -1);
    }
    return p;
}

HH_EXPORT int heaphook_root_add(const void *object, int type) {
    if (object == NULL || type <= 0 || (uint32_t)type >= g_ntypes) return -1;
    int rc = -1;
    hh_spin_lock(&g_types_lock);
    if (g_nroots < HH_MAX_ROOTS) {
        g_roots[g_nroots].addr = (uintptr_t)object;
        g_roots[g_nroots].type = type;
        g_nroots++;
        rc = 0;
    }
    hh_spin_unlock(&g_types_lock);
    return rc;
}

HH_EXPORT int heaphook_root_remove(const void *object) {
    hh_spin_lock(&g_types_lock);
    for (uint32_t i = 0; i < g_nroots; i++) {
        if (g_roots[i].addr == (uintptr_t)object) {
            g_roots[i] = g_roots[--g_nroots];
            break;
        }
    }
    hh_spin_unlock(&g_types_lock);
    return 0;
}

HH_EXPORT int heaphook_root_mark(void *block, int is_root) {
    if (block == NULL) return -1;
    hh_leaks_go_sync();
    return hh_table_modify(block, -1, is_root ? 1 : 0) ? 0 : -1;
}

const uint32_t *hh_type_ptr_words(const hh_type *t) {
    return &g_ptr_words[t->first];
}

bool hh_types_in_use(void) {
    return g_types != NULL;
}

void hh_roots_scan(void (*scan)(uintptr_t base, uint64_t bytes, const hh_type *t)) {
    for (uint32_t i = 0; i < g_nroots; i++) {
        const hh_type *t = &g_types[g_roots[i].type];
        scan(g_roots[i].addr, t->size, t);
    }
}
