/*
 * heaphook/core.h — what a preload library built on the heaphook core exports besides the
 * malloc family. Programs and tests find these with dlsym(RTLD_DEFAULT, ...) to learn which
 * backend serves them; none of them allocate.
 */
#ifndef HEAPHOOK_CORE_H
#define HEAPHOOK_CORE_H

#include <stddef.h>

#include "heaphook/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HEAPHOOK_VERSION "0.1.0"

/* The name of the backend serving malloc in this process (its heaphook_backend.name). */
const char *heaphook_active_backend(void);

/* The core's version string (HEAPHOOK_VERSION of the build). */
const char *heaphook_version(void);

/* Fills *out with the backend's statistics; returns 0, or -1 when it keeps none. */
int heaphook_get_stats(heaphook_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_CORE_H */
