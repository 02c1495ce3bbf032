/*
 * heaphook/heaptrack.h — start and stop tracing in a process that is already running.
 *
 *   void *lib = dlopen("libheaphook_heaptrack.so", RTLD_NOW | RTLD_LOCAL);
 *   int (*attach)(const char *) = (int (*)(const char *))dlsym(lib, "heaphook_heaptrack_attach");
 *   int (*detach)(void) = (int (*)(void))dlsym(lib, "heaphook_heaptrack_detach");
 *   attach("/tmp/traces");     // heaplog.<pid>.log there: every malloc & co. from now on
 *   ...
 *   detach();                  // the log is complete (END record): heaphook report reads it
 *
 * heaphook_heaptrack_attach opens a log (standalone mode: HEAPHOOK_* variables apply as for a
 * preloaded tracer; dir NULL means HEAPHOOK_LOG_DIR, else the working directory) and redirects
 * malloc, free, calloc, realloc, reallocarray, posix_memalign, memalign, aligned_alloc, valloc,
 * pvalloc and malloc_usable_size of every loaded object, and of objects loaded later, to the
 * tracer by GOT patching (the core's heaphook/reloc.h). The tracer forwards every call to the
 * functions the GOTs led to before (glibc, or a preloaded heaphook backend), so blocks allocated
 * before the attach are freed normally: the log shows those frees as frees of unknown blocks.
 *
 * heaphook_heaptrack_detach restores every GOT entry, stops recording and completes the log.
 * A later attach writes a new log (heaplog.<pid>.1.log ...). The library must stay loaded.
 *
 * Not traced: calls the C library makes internally without its PLT, calls through pointers to
 * malloc taken before the attach, allocators linked statically into a program.
 * A fork while attached: the child inherits the patched GOTs and starts a log of its own, as a
 * preloaded tracer's child does. Returns HEAPHOOK_HEAPTRACK_OK or one of the errors below.
 */
#ifndef HEAPHOOK_HEAPTRACK_H
#define HEAPHOOK_HEAPTRACK_H

#ifdef __cplusplus
extern "C" {
#endif

#define HEAPHOOK_HEAPTRACK_OK 0
#define HEAPHOOK_HEAPTRACK_ATTACHED 1     /* attach: already attached */
#define HEAPHOOK_HEAPTRACK_PRELOADED 2    /* attach: the tracer was preloaded: it traces already */
#define HEAPHOOK_HEAPTRACK_NOT_ATTACHED 3 /* detach: not attached */
#define HEAPHOOK_HEAPTRACK_NO_LOG 4       /* attach: the log could not be created (errno kept) */
#define HEAPHOOK_HEAPTRACK_PATCH_FAILED 5 /* attach: a GOT could not be written; none is */

int heaphook_heaptrack_attach(const char *dir);
int heaphook_heaptrack_detach(void);
/* The log being written, or the last one written; "" before the first. */
const char *heaphook_heaptrack_log_path(void);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_HEAPTRACK_H */
