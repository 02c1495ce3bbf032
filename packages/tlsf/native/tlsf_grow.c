/*
 * tlsf_grow.c — growth policy of the TLSF heap (see tlsf_grow.h).
 */
#include "tlsf_grow.h"

#include <errno.h>
#include <string.h>

#define AREA_MAX TLSF_AREA_MAX
/* A growth adds at most this many areas (doubling from `additional` reaches AREA_MAX long
 * before; the bound makes the loop visibly finite). */
#define GROWTH_STEPS_MAX 64

int tlsf_growing_init(tlsf_growing *g, tlsf_t *t, size_t initial, size_t additional,
                      const tlsf_grow_ops *ops) {
    g->tlsf = t;
    g->initial = initial;
    g->additional = additional;
    g->total = 0;
    g->growth_count = 0;
    g->last_addition = 0;
    g->ops = *ops;
    if (initial == 0) return 0;
    if (initial > AREA_MAX) return -1;
    void *mem = g->ops.map(g->ops.ctx, initial);
    if (!mem || tlsf_add_pool_clean(t, mem, initial) != 0) return -1;
    g->total = initial;
    return 0;
}

void *tlsf_growing_alloc(tlsf_growing *g, size_t size, size_t align) {
    void *p = tlsf_memalign(g->tlsf, align, size);
    if (p) return p;
    const size_t need = tlsf_pool_need(size, align);
    if (need == 0 || need > AREA_MAX || g->additional == 0) {
        errno = ENOMEM;
        return NULL;
    }
    /* The last area this growth would add: if the system refuses it, fail now, before
     * adding (and, with prefaulting, touching) the smaller ones. */
    size_t last = g->additional;
    while (last < need && last <= AREA_MAX / 2) last *= 2;
    if (last < need || (g->ops.probe && !g->ops.probe(g->ops.ctx, last))) {
        errno = ENOMEM;
        return NULL;
    }
    /* Add `additional`, then double the previous addition, until the request fits. Each area
     * that fits no better is kept for later requests, as the original did. */
    size_t add = g->additional;
    for (int step = 0; step < GROWTH_STEPS_MAX && add <= AREA_MAX; step++, add *= 2) {
        void *mem = g->ops.map(g->ops.ctx, add);
        if (!mem) {
            errno = ENOMEM;
            return NULL;
        }
        if (tlsf_add_pool_clean(g->tlsf, mem, add) != 0) continue;
        g->total += add;
        g->growth_count++;
        g->last_addition = add;
        if (g->ops.grew) g->ops.grew(g->ops.ctx, add, g->total, g->growth_count);
        p = tlsf_memalign(g->tlsf, align, size);
        if (p) return p;
    }
    errno = ENOMEM;
    return NULL;
}

void *tlsf_growing_realloc(tlsf_growing *g, void *ptr, size_t size, int copy) {
    const size_t old = tlsf_block_size(ptr);
    if (tlsf_realloc_keeps(old, size)) return ptr;
    const size_t room = tlsf_realloc_room(old, size);
    if (tlsf_resize(g->tlsf, ptr, room)) return ptr;
    if (room != size && tlsf_resize(g->tlsf, ptr, size)) return ptr;
    const size_t align = tlsf_block_align(ptr);
    const size_t a = align > TLSF_ALIGN ? align : 1;
    /* Elsewhere in the pool as it is (with the room, else without), and only then growing it:
     * the pool grows exactly when a replay in a pool of fixed size would fail. */
    void *q = tlsf_memalign(g->tlsf, a, room);
    if (!q && room != size) q = tlsf_memalign(g->tlsf, a, size);
    if (!q) q = tlsf_growing_alloc(g, room, a);
    if (!q && room != size) q = tlsf_growing_alloc(g, size, a);
    if (!q) return NULL;
    if (copy) memcpy(q, ptr, old < size ? old : size);
    tlsf_free(g->tlsf, ptr);
    return q;
}
