/*
 * tlsf_grow.h — a TLSF heap that grows the way the original heaphook TLSF backend does.
 *
 * The first pool holds `initial` bytes. When a request cannot be served, an area of
 * `additional` bytes is added; if the request still does not fit, an area of twice the
 * previous addition is added, and so on until it fits (areas are not contiguous, so their
 * sum exceeding the request is not enough). Every added area stays in the heap. A request no
 * area could ever hold fails at once; a refused mapping stops the growth and fails the
 * request. Shared by the preload library (areas from heaphook_os_map) and the addon (areas
 * carved from a reservation), so both grow identically.
 */
#ifndef HEAPHOOK_TLSF_GROW_H
#define HEAPHOOK_TLSF_GROW_H

#include <stddef.h>

#include "tlsf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest area (first pool or addition): a block must stay below TLSF_BLOCK_MAX. */
#define TLSF_AREA_MAX (TLSF_BLOCK_MAX / 2)

typedef struct tlsf_grow_ops {
    /* Returns bytes of zeroed, writable memory, 16-byte aligned, or NULL. */
    void *(*map)(void *ctx, size_t bytes);
    /* Optional: whether an area of bytes could be mapped now (a growth that would end in a
     * refused mapping is not started, so it adds nothing). May be NULL. */
    int (*probe)(void *ctx, size_t bytes);
    /* Called after every growth (not for the initial pool); may be NULL. */
    void (*grew)(void *ctx, size_t added, size_t total, size_t growth_count);
    void *ctx;
} tlsf_grow_ops;

typedef struct tlsf_growing {
    tlsf_t *tlsf;
    size_t initial;    /* bytes of the first pool */
    size_t additional; /* first addition of each growth; 0 disables growth */
    size_t total;      /* bytes of all areas (the nominal sizes asked of map) */
    size_t growth_count;
    size_t last_addition;
    tlsf_grow_ops ops;
} tlsf_growing;

/* Builds the heap over an existing tlsf_t and maps the first pool (none when initial == 0).
 * Returns 0, or -1 when the first pool cannot be mapped. */
int tlsf_growing_init(tlsf_growing *g, tlsf_t *t, size_t initial, size_t additional,
                      const tlsf_grow_ops *ops);

/* Allocates (align <= 16 means the default alignment), growing as described above. */
void *tlsf_growing_alloc(tlsf_growing *g, size_t size, size_t align);

/* realloc of a used block of g with the backend's policy (tlsf_realloc_room/keeps in tlsf.h),
 * growing the pool when the block must move. Copies the contents when `copy`. Returns the block
 * (ptr itself when it stayed), or NULL (errno ENOMEM) with ptr unchanged. */
void *tlsf_growing_realloc(tlsf_growing *g, void *ptr, size_t size, int copy);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_TLSF_GROW_H */
