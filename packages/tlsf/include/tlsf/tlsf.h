/*
 * tlsf/tlsf.h — the TLSF 2.x API (Miguel Masmano's TLSF 2.4.x, the ROS `tlsf` package's
 * header), as tier4/heaphook's tlsf.cpp and other ROS code call it, implemented over
 * heaphook's TLSF (native/tlsf2_compat.c; CMake target tlsf::tlsf, also heaphook::tlsf2, from
 * cmake/heaphook_tlsf.cmake).
 *
 * A memory pool is an area the caller owns (mmap'ed, a static array ...): init_memory_pool
 * places the pool's control in it and makes it the default pool of tlsf_malloc & co.;
 * add_new_area extends a pool with another area (areas need not be contiguous). The *_ex
 * functions take the pool explicitly. Every call is thread safe (one lock per pool).
 *
 * As in TLSF 2.x, a used block's size (usable bytes, a multiple of 16; the low 4 bits are
 * flags, 0 for a used block) is the size_t word just before the pointer returned, so code that
 * reads `*((size_t *)ptr - 1) & ~15` for the block size keeps working.
 *
 * These names are not the ones of heaphook's own TLSF (packages/tlsf/native/tlsf.h, where
 * tlsf_malloc takes a tlsf_t *): the compat library compiles that TLSF with its colliding
 * names renamed (heaphook_tlsf2_impl_*), so the two never meet in one program.
 */
#ifndef HEAPHOOK_TLSF2_COMPAT_H
#define HEAPHOOK_TLSF2_COMPAT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Makes [mem_pool, mem_pool + mem_pool_size) a pool and the default one. Returns the bytes
 * available for blocks, or (size_t)-1 when the area is too small or misaligned (8 bytes). */
size_t init_memory_pool(size_t mem_pool_size, void *mem_pool);
/* Adds [area, area + area_size) to the pool. Returns the bytes added, or (size_t)-1. */
size_t add_new_area(void *area, size_t area_size, void *mem_pool);
/* Bytes of the pool's blocks in use (their bookkeeping included). */
size_t get_used_size(void *mem_pool);
/* Bytes of all the pool's areas. */
size_t get_max_size(void *mem_pool);
/* Forgets the pool (its areas are the caller's to unmap); it stops being the default. */
void destroy_memory_pool(void *mem_pool);

void *malloc_ex(size_t size, void *mem_pool);
void free_ex(void *ptr, void *mem_pool);
void *realloc_ex(void *ptr, size_t new_size, void *mem_pool);
void *calloc_ex(size_t nelem, size_t elem_size, void *mem_pool);

/* The same on the default pool (the last one init_memory_pool made). free and realloc find a
 * block's own pool, whichever it is. NULL when there is no pool or no room. */
void *tlsf_malloc(size_t size);
void tlsf_free(void *ptr);
void *tlsf_realloc(void *ptr, size_t size);
void *tlsf_calloc(size_t nelem, size_t elem_size);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_TLSF2_COMPAT_H */
