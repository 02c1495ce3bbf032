/*
 * backend_entry.c — heaphook_backend_get(), the core's way in (heaphook/backend.h). Alone in its
 * file so that a module that wraps TLSF's table under its own heaphook_backend_get links the
 * rest of the backend from heaphook::tlsf_backend without this one (aix-plugin's
 * test/native/early_backend.c does).
 */
#include "backend_internal.h"

const heaphook_backend *heaphook_backend_get(void) {
    return tlsf_backend_get();
}
