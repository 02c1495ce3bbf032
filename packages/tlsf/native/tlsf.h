/*
 * tlsf.h — Two-Level Segregated Fit allocator core (heaphook's TLSF backend and addon).
 *
 * One tlsf_t manages any number of pools (memory areas handed to it with tlsf_add_pool).
 * malloc, memalign, free and in-place resize are O(1): a size maps to a (first level, second
 * level) list index with two bit scans, free blocks are coalesced immediately with their
 * physical neighbours, and no operation loops over blocks.
 *
 * Layout: every block carries one word (its "head": size, flags, owner id, check tag) in
 * front of its payload; a free block also keeps its free-list links in its payload and a
 * pointer to itself in its last word (the boundary tag its successor uses to coalesce).
 * Payloads are aligned to TLSF_ALIGN (16) bytes; memalign reaches any power of two inside the
 * block structure by splitting off the leading gap as a free block (no side table).
 *
 * This file has no dependency on the heaphook core: the addon and the unit test link it alone.
 * A tlsf_t is not thread safe; callers serialise (the backend gives each thread its own).
 */
#ifndef HEAPHOOK_TLSF_H
#define HEAPHOOK_TLSF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Alignment of every payload returned by tlsf_malloc. */
#define TLSF_ALIGN 16
/* Bytes of bookkeeping in front of every used block. */
#define TLSF_BLOCK_OVERHEAD 8
/* Bytes of bookkeeping per pool (descriptor at the start, sentinel at the end). */
#define TLSF_POOL_OVERHEAD 48
/* Largest block footprint (exclusive) and so the largest usable pool: 64 TiB. */
#define TLSF_BLOCK_MAX ((size_t)1 << 46)
/* Owner ids are 8 bits: 0..255. */
#define TLSF_OWNER_MAX 255

typedef struct tlsf_control tlsf_t;

/* Figures kept incrementally (O(1) to read) except largest_free, which scans one list. */
typedef struct tlsf_stats {
    size_t pool_bytes;   /* bytes handed to tlsf_add_pool, all pools */
    size_t pool_count;   /* number of pools */
    size_t used_bytes;   /* footprint of used blocks, heads included */
    size_t used_blocks;  /* used blocks */
    size_t free_bytes;   /* footprint of free blocks */
    size_t free_blocks;  /* free blocks */
    size_t largest_free; /* usable bytes of the largest free block */
} tlsf_stats;

/* What tlsf_validate found about a pointer that is about to be freed or resized. */
typedef enum tlsf_error {
    TLSF_OK = 0,
    TLSF_ERR_FOREIGN,     /* not inside any pool of this tlsf_t */
    TLSF_ERR_INTERIOR,    /* inside a pool but not the start of a block's payload */
    TLSF_ERR_DOUBLE_FREE, /* the start of a block that is already free */
    TLSF_ERR_HEADER,      /* a block head (this block's or a neighbour's) was overwritten */
    TLSF_ERR_NEXT_HEADER, /* tlsf_check_used: the head after the block was overwritten */
    TLSF_ERR_PREV_HEADER, /* tlsf_check_used: the free block before it was overwritten */
} tlsf_error;

/* Size of the control structure; tlsf_create places it in mem (TLSF_ALIGN-aligned). */
size_t tlsf_control_size(void);
/* Builds an empty allocator in mem; every block it creates carries owner (0..255). */
tlsf_t *tlsf_create(void *mem, unsigned owner);
/* tlsf_create for memory that holds only zero bytes (fresh .bss or a fresh mapping): the same
 * empty allocator (an all-zero control is one with no pools and empty lists), built without
 * writing the control's tlsf_control_size() bytes, so that only the pages of the free lists
 * actually used are ever touched (for the shared heap's control in .bss: 2-3 page faults fewer
 * in every process that loads the library). */
tlsf_t *tlsf_create_in_zeroed(void *mem, unsigned owner);

/* Adds [mem, mem + bytes) as a pool. mem is aligned up to TLSF_ALIGN and bytes trimmed.
 * Returns 0, or -1 when the area is too small (< TLSF_POOL_OVERHEAD + 32) or too large. */
int tlsf_add_pool(tlsf_t *t, void *mem, size_t bytes);

/* tlsf_add_pool for memory whose pages hold no data (fresh from mmap): its free block starts
 * clean (see tlsf_free_span). */
int tlsf_add_pool_clean(tlsf_t *t, void *mem, size_t bytes);

/* The pool bytes a new pool needs so that one request (size, align) surely fits in it;
 * 0 when no pool can ever hold it. */
size_t tlsf_pool_need(size_t size, size_t align);

/* size > 0. NULL when no free block is large enough. */
void *tlsf_malloc(tlsf_t *t, size_t size);
/* align: a power of two; <= TLSF_ALIGN means plain malloc. */
void *tlsf_memalign(tlsf_t *t, size_t align, size_t size);
/* ptr must be a used block of t. */
void tlsf_free(tlsf_t *t, void *ptr);
/* For a front end that keeps freed blocks whole (the backend's thread cache) and gives a run
 * of physically adjacent ones back with one tlsf_free: ptr and next are used, unaligned blocks
 * of t, next the physical successor of ptr; ptr absorbs next (its footprint becomes the sum).
 * O(1). */
void tlsf_join_used(tlsf_t *t, void *ptr, void *next);
/* The inverse, for the same front end: ptr, a used, unaligned block of t of footprint at least
 * n * f (f a multiple of 16, at least 32; n >= 1), becomes n used blocks, the first n - 1 of
 * footprint f and the last one the rest; ptr stays the first. O(n). */
void tlsf_split_used(tlsf_t *t, void *ptr, size_t f, unsigned n);
/* tlsf_free that also says which memory could be given back to the system. Returns the free
 * block ptr became part of (coalesced with its free neighbours) and sets [*lo, *hi) to the
 * whole pages (of size page) inside it that may hold data: those of ptr's block and of each
 * neighbour merged that is not clean, within the pages the heap never reads while the block
 * is free (all but the pages of its head and links and of its boundary tag). After giving
 * those pages back, tlsf_mark_clean(returned) records that the block holds no data, so a later
 * free next to it does not report its pages again. A free block is clean when it came from
 * tlsf_add_pool_clean or tlsf_mark_clean (or was split from such a block), and stops being
 * clean when a block that is not merges into it. */
void *tlsf_free_span(tlsf_t *t, void *ptr, size_t page, uintptr_t *lo, uintptr_t *hi);
void tlsf_mark_clean(void *free_ptr);
/* Whether the block at ptr is the only block of its pool (for a free block: the pool is empty). */
int tlsf_block_is_whole_pool(const void *ptr);
/* Gives back to the system the pages of every free block that is not clean, or of every free
 * block with clean_too (a caller that marks blocks clean without giving all their pages back,
 * as the backend's free_release does with small remains, needs it to reach those):
 * discard(addr, bytes, user) is called once per page-aligned range lying wholly between a free
 * block's links and its boundary tag, and the block is marked clean. The first `keep` bytes of
 * such blocks met (the smaller size classes first) are left as they are: malloc_trim's pad.
 * O(free blocks): for malloc_trim and the trim threshold, never on a real-time path. Returns
 * the bytes handed to discard. */
typedef void (*tlsf_discarder)(void *addr, size_t bytes, void *user);
size_t tlsf_trim(tlsf_t *t, size_t page, size_t keep, int clean_too, tlsf_discarder discard,
                 void *user);
/* tlsf_trim of the unclean blocks met in the largest size classes first, looking at no more than
 * `visits` free blocks (clean ones included): O(visits), for a free that may give memory back. */
size_t tlsf_trim_largest(tlsf_t *t, size_t page, unsigned visits, tlsf_discarder discard,
                         void *user);
/* Footprint of the used blocks (heads included): O(1). */
size_t tlsf_used_bytes(const tlsf_t *t);

/* Grows (into a free successor) or shrinks ptr's block in place. Returns ptr on success, NULL
 * when the block cannot grow in place (ptr is then unchanged). */
void *tlsf_resize(tlsf_t *t, void *ptr, size_t size);

/* The realloc policy of the backend (and of the addon, so that a replay places blocks as the
 * backend does): a block whose usable size `old` is within a quarter above the size asked
 * stays as it is (tlsf_realloc_keeps); growth of a block to a page or more asks for a quarter
 * more room than `size` (tlsf_realloc_room), first in place, then elsewhere, and for `size`
 * itself only when that room cannot be had. The room is not touched until the program writes
 * there: a buffer grown by appends whose successor is in use moves O(log n) times, not at
 * every append. */
#define TLSF_REALLOC_ROOM_MIN 4096
static inline int tlsf_realloc_keeps(size_t old, size_t size) {
    return size <= old && old - size <= (old >> 2);
}
static inline size_t tlsf_realloc_room(size_t old, size_t size) {
    return size > old && size >= TLSF_REALLOC_ROOM_MIN ? size + (size >> 2) : size;
}

/* Usable bytes of a used block (>= the size asked). */
size_t tlsf_block_size(const void *ptr);
/* The owner id stored in a used block's head. */
unsigned tlsf_block_owner(const void *ptr);
/* The alignment the block was allocated with (TLSF_ALIGN for plain malloc). */
size_t tlsf_block_align(const void *ptr);

void tlsf_get_stats(const tlsf_t *t, tlsf_stats *out);
/* The counters only (largest_free = 0): reads no list, so another thread may call it while
 * the owner works (the figures are then approximate). */
void tlsf_get_counters(const tlsf_t *t, tlsf_stats *out);

/* The pool containing ptr (its start as given to tlsf_add_pool), or NULL. O(pools). */
void *tlsf_find_pool(const tlsf_t *t, const void *ptr);
/* Iterates the pools: first with prev == NULL. Reports each pool's start and bytes. */
void *tlsf_next_pool(const tlsf_t *t, void *prev, size_t *bytes);

/* Checks ptr before free/resize. On error, *where is the address to report: ptr itself, or
 * the payload of the block whose head was found overwritten. O(1) when ptr is valid; walks
 * the pool only to explain an error. */
tlsf_error tlsf_validate(const tlsf_t *t, const void *ptr, const void **where);
const char *tlsf_error_name(tlsf_error e);

/* The cheap check (the backend runs it on every free, realloc and malloc_usable_size): ptr is
 * checked against the memory area [area_lo, area_hi) the caller found it in (or not), and
 * against its block's head and its successor's head, with no lookup: O(1), two or three
 * words read. TLSF_ERR_FOREIGN when ptr is outside the area; TLSF_ERR_INTERIOR when it is not
 * the payload of a block (misaligned, or the word before it is no head: a 4-bit tag of the
 * address, the size and the successor must all agree, so a word of program data passes for a
 * head only by a rare coincidence); TLSF_ERR_DOUBLE_FREE when the head is a free block's;
 * TLSF_ERR_NEXT_HEADER (*where = the successor's payload) or TLSF_ERR_PREV_HEADER when a
 * neighbour's head is damaged. Does not need the tlsf_t, so it works for any thread's heap. */
tlsf_error tlsf_check_used(const void *ptr, uintptr_t area_lo, uintptr_t area_hi,
                           const void **where);

/* Full integrity walk: every pool, every block, the free lists, the bitmaps, the counters.
 * Returns 0, or -1 with a one-line description in msg. O(blocks). */
int tlsf_check(const tlsf_t *t, char *msg, size_t cap);

/* Calls fn for every block of every pool (payload, usable bytes, used). */
typedef void (*tlsf_walker)(void *ptr, size_t size, int used, void *user);
void tlsf_walk(const tlsf_t *t, tlsf_walker fn, void *user);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_TLSF_H */
