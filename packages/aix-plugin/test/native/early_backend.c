/*
 * early_backend.c — TLSF's backend table with an init that allocates (malloc, realloc,
 * malloc_usable_size, free, and a block it keeps), as C backends may. Built into a plug-in whose
 * __malloc_start__ does not initialise (HEAPHOOK_AIX_LAZY_START), so the backend initialises on
 * the first __malloc__ and its own allocations come back into the plug-in while it is
 * initialising: the adapter must serve them from its arena, as on AIX.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "heaphook/backend.h"

/* TLSF's backend table (packages/tlsf, linked from heaphook::tlsf_backend, whose own
 * heaphook_backend_get this file replaces). */
const heaphook_backend *tlsf_backend_get(void);

#define EARLY_TEXT "allocated while the plug-in initialised"

static heaphook_backend table;
static int (*inner_init)(void);
static char *kept;

static int early_init(void) {
    if (inner_init != NULL && inner_init() != 0) return -1;
    char *early = malloc(100);
    if (early == NULL) return -1;
    strcpy(early, EARLY_TEXT);
    early = realloc(early, 4000);
    if (early == NULL || strcmp(early, EARLY_TEXT) != 0) return -1;
    if (malloc_usable_size(early) < 4000) return -1;
    free(early);
    kept = calloc(1, sizeof EARLY_TEXT);
    if (kept == NULL) return -1;
    strcpy(kept, EARLY_TEXT);
    return 0;
}

const heaphook_backend *heaphook_backend_get(void) {
    table = *tlsf_backend_get();
    inner_init = table.init;
    table.init = early_init;
    table.name = "tlsf-early";
    return &table;
}
