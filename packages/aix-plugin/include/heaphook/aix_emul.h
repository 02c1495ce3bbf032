/*
 * heaphook/aix_emul.h — counters of libheaphook_aix_emul.so, the Linux emulation of AIX's
 * user-defined malloc subsystem. Find the function with
 * dlsym(RTLD_DEFAULT, "heaphook_aix_emul_counters"); it does not allocate.
 */
#ifndef HEAPHOOK_AIX_EMUL_H
#define HEAPHOOK_AIX_EMUL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct heaphook_aix_emul_counts {
    unsigned long malloc_calls;      /* __malloc__ */
    unsigned long free_calls;        /* __free__ */
    unsigned long realloc_calls;     /* __realloc__ */
    unsigned long calloc_calls;      /* __calloc__ */
    unsigned long memalign_calls;    /* __posix_memalign__ (or __malloc__ when it is absent) */
    unsigned long mallinfo_calls;    /* __mallinfo__ */
    unsigned long mallopt_calls;     /* __mallopt__ */
    unsigned long start_calls;       /* __malloc_start__ */
    unsigned long init_calls;        /* __malloc_init__ */
    unsigned long prefork_calls;     /* __malloc_prefork_lock__ */
    unsigned long postfork_parent;   /* __malloc_postfork_unlock__ in the parent */
    unsigned long postfork_child;    /* __malloc_postfork_unlock__ in the child */
    unsigned long threads_created;   /* pthread_create calls */
    unsigned long calls_before_init; /* entry-point calls made before __malloc_init__ */
    unsigned long live_blocks;       /* blocks handed out and not yet freed */
} heaphook_aix_emul_counts;

/* Copies the counters of this process into *out (size: sizeof *out); returns 0. */
int heaphook_aix_emul_counters(heaphook_aix_emul_counts *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_AIX_EMUL_H */
