/*
 * aix_malloc.h — the AIX user-defined malloc subsystem ABI (MALLOCTYPE=user:<archive>.a).
 *
 * A plug-in archive holds a shared module mem32.o (32-bit) and/or mem64.o (64-bit) exporting
 * the entry points below. AIX's libc routes the malloc family of the whole process into them:
 *   - __malloc__ may be called before __malloc_init__: the subsystem initialises itself;
 *   - __malloc_init__ runs when the pthread library initialises (the process may become
 *     threaded from then on);
 *   - __malloc_prefork_lock__ takes every lock of the subsystem before fork, and
 *     __malloc_postfork_unlock__ releases them after it, in the parent and in the child;
 *   - __malloc_start__ (optional) is called once, before any other entry point;
 *   - __posix_memalign__ (optional) serves posix_memalign.
 * C++ is not supported inside the module.
 */
#ifndef HEAPHOOK_AIX_MALLOC_H
#define HEAPHOOK_AIX_MALLOC_H

#include <malloc.h> /* struct mallinfo, as the platform defines it */
#include <stddef.h>

/* mallopt commands. The first four tune the AIX 3.1 allocator's small-block lists (SVID); AIX
 * adds M_DISCLAIM (give free memory back to the system) and M_MALIGN (the default alignment of
 * malloc). glibc's <malloc.h> defines the first four with the same values and not the others. */
#ifndef M_MXFAST
#define M_MXFAST 1
#endif
#ifndef M_NLBLKS
#define M_NLBLKS 2
#endif
#ifndef M_GRAIN
#define M_GRAIN 3
#endif
#ifndef M_KEEP
#define M_KEEP 4
#endif
#ifndef M_DISCLAIM
#define M_DISCLAIM 5
#endif
#ifndef M_MALIGN
#define M_MALIGN 6
#endif
/* What AIX's mallopt returns: 0 when the command was accepted, non-zero when refused. */
#define AIX_MALLOPT_ACCEPTED 0
#define AIX_MALLOPT_REFUSED 1

#ifdef __cplusplus
extern "C" {
#endif

void *__malloc__(size_t size);
void __free__(void *ptr);
void *__realloc__(void *ptr, size_t size);
void *__calloc__(size_t count, size_t size);
int __mallopt__(int command, int value);
struct mallinfo __mallinfo__(void);
void __malloc_init__(void);
void __malloc_prefork_lock__(void);
void __malloc_postfork_unlock__(void);
void __malloc_start__(void);
int __posix_memalign__(void **result, size_t alignment, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_AIX_MALLOC_H */
