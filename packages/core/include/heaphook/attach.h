/*
 * heaphook/attach.h — install a heaphook preload library into a process that is already
 * running (no LD_PRELOAD): dlopen the library, then call its heaphook_attach.
 *
 *   void *lib = dlopen("libheaphook_tlsf.so", RTLD_NOW | RTLD_LOCAL);
 *   int (*attach)(void) = (int (*)(void))dlsym(lib, "heaphook_attach");
 *   attach();                  // malloc & co. of every object now go to the backend
 *
 * heaphook_attach redirects the malloc family (malloc, free, calloc, realloc, reallocarray,
 * posix_memalign, memalign, aligned_alloc, valloc, pvalloc, malloc_usable_size) in every
 * loaded object and in objects loaded later, by GOT patching (heaphook/reloc.h). Blocks the
 * previous allocator handed out before (or hands out in a thread racing the install) stay
 * its own: free, realloc and malloc_usable_size of a pointer the library does not own go to the
 * previous allocator's functions. Ownership is known from the mappings the backend made through
 * heaphook_os_map* (heaphook/os.h) and the bootstrap arena, so attaching requires a backend that
 * gets its memory there (the example and tlsf backends do). Returns 0 (also when the library was
 * preloaded: nothing to do) or a HEAPHOOK_RELOC_* error.
 *
 * heaphook_detach stops new allocations from reaching the backend (the previous allocator
 * serves them again) but keeps free, realloc and malloc_usable_size routed by ownership: blocks
 * of either allocator may still be freed anywhere. The library must stay loaded.
 *
 * Not redirected: calls the C library makes internally without its PLT, pointers to malloc
 * taken before the attach (see reloc.h), and the statistics calls (mallinfo2, malloc_stats...).
 */
#ifndef HEAPHOOK_ATTACH_H
#define HEAPHOOK_ATTACH_H

#ifdef __cplusplus
extern "C" {
#endif

int heaphook_attach(void);
int heaphook_detach(void);
/* 1 while attached (not preloaded, allocations reach this library), else 0. */
int heaphook_is_attached(void);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_ATTACH_H */
