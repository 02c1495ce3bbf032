/*
 * leaks/internal.h — what the files of leaks/ share with each other. The tracer sees leaks.h
 * only; programs see include/heaphook/leaks.h. Everything here is hidden (the library is built
 * with -fvisibility=hidden) and hh_-prefixed. One file per concept (native/README.md):
 *
 *   table.c  the live-block table: address -> size, type, root flag
 *   types.c  the precise API's types and roots
 *   leaks.c  the public check API, the signal thread, configuration, who keeps the table,
 *            fork and exit
 *
 * Lock order: the check lock, then tracer.h's cursor lock, then the table's shard locks.
 */
#ifndef HH_LEAKS_INTERNAL_H
#define HH_LEAKS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "leaks.h"
#include "track/trace.h"

/* Debug builds (cmake -DHEAPHOOK_DEBUG=ON) trap when an invariant of leaks/ is broken; other
 * builds compile the condition away. Only cheap conditions: some sit on the hooks' path. */
#ifdef HEAPHOOK_DEBUG
#define HH_LEAKS_ASSERT(cond) ((cond) ? (void)0 : __builtin_trap())
#else
#define HH_LEAKS_ASSERT(cond) ((void)0)
#endif

/* Zeroed anonymous memory straight from the kernel (never malloc), or NULL. */
static inline void *hh_map(size_t bytes) {
    void *m = hh_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

/* ---- table.c: the live-block table ------------------------------------------------------- */

/* An entry's meta: bits 0-45 the block's size, 46 present (never 0 for a live block), 47 the
 * root flag of the precise API, 48-63 its type id (0: untyped). */
#define HH_META_SIZE ((1ull << 46) - 1)
#define HH_META_PRESENT (1ull << 46)
#define HH_META_ROOT (1ull << 47)
#define HH_META_TYPE_SHIFT 48

typedef struct hh_entry {
    uint64_t addr; /* 0 empty */
    uint64_t meta;
} hh_entry;

/* Changes the entry of the live block p: its type (type >= 0) and/or its root flag (root 1
 * sets, 0 clears, -1 leaves it). False when p is not in the table. Takes p's shard lock. */
bool hh_table_modify(void *p, int type, int root);

/* Take and release every shard lock, in shard order: in between, no insert, remove or modify
 * runs (a check's snapshot, fork). */
void hh_table_lock(void);
void hh_table_unlock(void);

/* With hh_table_lock held: the number of live entries, and a copy of at most cap of them into
 * out, shard after shard (not sorted); returns how many were copied. */
uint64_t hh_table_live(void);
uint64_t hh_table_copy(hh_entry *out, uint64_t cap);

/* ---- types.c: types and roots of the precise API ----------------------------------------- */

typedef struct hh_type {
    char name[64];
    uint64_t size;
    uint32_t first, nptr; /* its pointer words (byte offsets): hh_type_ptr_words(t)[0 .. nptr) */
} hh_type;

/* The registered type of an entry's meta, or NULL (untyped, or an id never registered). */
const hh_type *hh_type_of(uint64_t meta);
/* The byte offsets of t's pointer words in one object, t->nptr of them. */
const uint32_t *hh_type_ptr_words(const hh_type *t);
/* True once the precise API registered a type (its arrays exist; the table is the hooks'). */
bool hh_types_in_use(void);
/* Calls scan for every registered root object, with its type's size. No lock: the caller holds
 * the check lock, as every reader of the roots does (a root added meanwhile may be missed). */
void hh_roots_scan(void (*scan)(uintptr_t base, uint64_t bytes, const hh_type *t));

/* ---- the check (mark.c) --------------------------------------------------------------------- */

/* The table goes from the drain thread to the hooks, for good (the precise API's calls read and
 * change it as the program sees it): stops the world like a check, applies every published
 * record, then switches hh_leaks_on to HH_LEAKS_SYNC. Nothing when not deferred. */
void hh_leaks_go_sync(void);

#endif /* HH_LEAKS_INTERNAL_H */
