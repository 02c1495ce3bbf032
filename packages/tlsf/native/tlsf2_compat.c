/*
 * tlsf2_compat.c — the TLSF 2.x API (include/tlsf/tlsf.h) over heaphook's TLSF (tlsf.h).
 *
 * A pool: a tlsf2_pool header at the start of the caller's area (magic, lock, byte counts),
 * then heaphook's tlsf_t control, then the rest of the area as the first TLSF pool. A block:
 * 16 bytes in front of the pointer returned, TLSF 2.x's header shape: the owning pool where
 * 2.x keeps prev_hdr, then the usable size (a multiple of 16, flags 0) where 2.x keeps
 * size|flags. Aligned to 16 like every heaphook TLSF payload.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tlsf2_rename.h"
#include "tlsf.h"
#undef tlsf_malloc
#undef tlsf_free
#undef tlsf_realloc
#undef tlsf_calloc

#include "tlsf/tlsf.h"

#define TLSF2_MAGIC 0x324653544b4f4f48ull /* "HOOKTSF2" */
#define TLSF2_HEADER 16

typedef struct tlsf2_pool {
    uint64_t magic;
    pthread_mutex_t lock;
    tlsf_t *tlsf;
    size_t max_size;
} tlsf2_pool;

static tlsf2_pool *default_pool;

static size_t round_up(size_t value, size_t to) {
    return (value + to - 1) & ~(to - 1);
}

/* What a block of size bytes asks heaphook's TLSF for: the header, and the size rounded up to
 * 16 so that the size word (a multiple of 16) still covers it. */
static size_t footprint(size_t size) {
    return round_up(size, 16) + TLSF2_HEADER;
}

static tlsf2_pool *pool_of(void *mem_pool) {
    tlsf2_pool *pool = (tlsf2_pool *)mem_pool;
    return pool != NULL && pool->magic == TLSF2_MAGIC ? pool : NULL;
}

static size_t *size_word(void *ptr) {
    return (size_t *)ptr - 1;
}
static tlsf2_pool **owner_word(void *ptr) {
    return (tlsf2_pool **)ptr - 2;
}
static void *base_of(void *ptr) {
    return (char *)ptr - TLSF2_HEADER;
}

static void *finish(tlsf2_pool *pool, void *base) {
    if (base == NULL) return NULL;
    void *ptr = (char *)base + TLSF2_HEADER;
    *owner_word(ptr) = pool;
    *size_word(ptr) = (tlsf_block_size(base) - TLSF2_HEADER) & ~(size_t)15;
    return ptr;
}

size_t init_memory_pool(size_t mem_pool_size, void *mem_pool) {
    uintptr_t start = (uintptr_t)mem_pool;
    if (mem_pool == NULL || start % sizeof(void *) != 0) return (size_t)-1;
    size_t control = round_up(sizeof(tlsf2_pool), 16) + tlsf_control_size() + 16;
    if (mem_pool_size < control + TLSF_POOL_OVERHEAD + 64) return (size_t)-1;
    tlsf2_pool *pool = (tlsf2_pool *)mem_pool;
    memset(pool, 0, sizeof *pool);
    pthread_mutex_init(&pool->lock, NULL);
    void *control_at = (void *)round_up(start + sizeof(tlsf2_pool), 16);
    pool->tlsf = tlsf_create(control_at, 0);
    char *area = (char *)control_at + tlsf_control_size();
    size_t area_size = mem_pool_size - (size_t)(area - (char *)mem_pool);
    if (tlsf_add_pool(pool->tlsf, area, area_size) != 0) return (size_t)-1;
    pool->max_size = mem_pool_size;
    pool->magic = TLSF2_MAGIC;
    default_pool = pool;
    tlsf_stats stats;
    tlsf_get_counters(pool->tlsf, &stats);
    return stats.free_bytes;
}

size_t add_new_area(void *area, size_t area_size, void *mem_pool) {
    tlsf2_pool *pool = pool_of(mem_pool);
    if (pool == NULL || area == NULL) return (size_t)-1;
    pthread_mutex_lock(&pool->lock);
    int result = tlsf_add_pool(pool->tlsf, area, area_size);
    if (result == 0) pool->max_size += area_size;
    pthread_mutex_unlock(&pool->lock);
    return result == 0 ? area_size : (size_t)-1;
}

size_t get_used_size(void *mem_pool) {
    tlsf2_pool *pool = pool_of(mem_pool);
    return pool != NULL ? tlsf_used_bytes(pool->tlsf) : 0;
}

size_t get_max_size(void *mem_pool) {
    tlsf2_pool *pool = pool_of(mem_pool);
    return pool != NULL ? pool->max_size : 0;
}

void destroy_memory_pool(void *mem_pool) {
    tlsf2_pool *pool = pool_of(mem_pool);
    if (pool == NULL) return;
    if (default_pool == pool) default_pool = NULL;
    pool->magic = 0;
    pthread_mutex_destroy(&pool->lock);
}

void *malloc_ex(size_t size, void *mem_pool) {
    tlsf2_pool *pool = pool_of(mem_pool);
    if (pool == NULL || size > TLSF_BLOCK_MAX) return NULL;
    pthread_mutex_lock(&pool->lock);
    void *ptr = finish(pool, heaphook_tlsf2_impl_malloc(pool->tlsf, footprint(size)));
    pthread_mutex_unlock(&pool->lock);
    return ptr;
}

void free_ex(void *ptr, void *mem_pool) {
    (void)mem_pool; /* the block knows its pool */
    tlsf_free(ptr);
}

void *realloc_ex(void *ptr, size_t new_size, void *mem_pool) {
    if (ptr == NULL) return malloc_ex(new_size, mem_pool);
    if (new_size == 0) {
        tlsf_free(ptr);
        return NULL;
    }
    tlsf2_pool *pool = *owner_word(ptr);
    if (pool_of(pool) == NULL || new_size > TLSF_BLOCK_MAX) return NULL;
    size_t old_size = *size_word(ptr);
    pthread_mutex_lock(&pool->lock);
    void *resized = tlsf_resize(pool->tlsf, base_of(ptr), footprint(new_size));
    pthread_mutex_unlock(&pool->lock);
    if (resized != NULL) return finish(pool, resized);
    void *moved = malloc_ex(new_size, pool);
    if (moved == NULL) return NULL;
    memcpy(moved, ptr, old_size < new_size ? old_size : new_size);
    tlsf_free(ptr);
    return moved;
}

void *calloc_ex(size_t nelem, size_t elem_size, void *mem_pool) {
    size_t size;
    if (__builtin_mul_overflow(nelem, elem_size, &size)) return NULL;
    void *ptr = malloc_ex(size, mem_pool);
    if (ptr != NULL) memset(ptr, 0, size);
    return ptr;
}

void *tlsf_malloc(size_t size) {
    return malloc_ex(size, default_pool);
}

void tlsf_free(void *ptr) {
    if (ptr == NULL) return;
    tlsf2_pool *pool = *owner_word(ptr);
    if (pool_of(pool) == NULL) return;
    pthread_mutex_lock(&pool->lock);
    heaphook_tlsf2_impl_free(pool->tlsf, base_of(ptr));
    pthread_mutex_unlock(&pool->lock);
}

void *tlsf_realloc(void *ptr, size_t size) {
    return realloc_ex(ptr, size, default_pool);
}

void *tlsf_calloc(size_t nelem, size_t elem_size) {
    return calloc_ex(nelem, elem_size, default_pool);
}
