/*
 * tlsf_block.h — the layout of a TLSF block and its head, for tlsf.c and for the code that
 * reads blocks directly on its fast paths (the backend's check on every free, its thread
 * cache). Internal: programs use tlsf.h. tlsf.c and its readers must be compiled with the same
 * TLSF_HEAD_KEY (the backend's CMake target defines it for all of them).
 */
#ifndef TLSF_BLOCK_H
#define TLSF_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "tlsf.h"

/*
 * Tunables.
 */

/* log2 of the number of second-level lists per first-level class (32 lists). */
#define SL_INDEX_COUNT_LOG2 5
/* log2 of the payload alignment (16 bytes). */
#define ALIGN_SIZE_LOG2 4
/* Blocks are smaller than 2^FL_INDEX_MAX bytes (the head's size field has 46 bits). */
#define FL_INDEX_MAX 46

/* Debug builds (-DHEAPHOOK_DEBUG=ON) trap when a caller breaks a block invariant that tlsf.c
 * relies on without checking; other builds compile the condition away. */
#ifdef HEAPHOOK_DEBUG
#define TLSF_ASSERT(cond) ((cond) ? (void)0 : __builtin_trap())
#else
#define TLSF_ASSERT(cond) ((void)0)
#endif

/*
 * Derived constants.
 */
#define ALIGN_SIZE ((size_t)1 << ALIGN_SIZE_LOG2)
#define SL_INDEX_COUNT (1 << SL_INDEX_COUNT_LOG2)
/* Blocks below SMALL_BLOCK_SIZE all live in first-level class 0, in 16-byte steps. */
#define FL_INDEX_SHIFT (SL_INDEX_COUNT_LOG2 + ALIGN_SIZE_LOG2)
#define FL_INDEX_COUNT (FL_INDEX_MAX - FL_INDEX_SHIFT + 1)
#define SMALL_BLOCK_SIZE ((size_t)1 << FL_INDEX_SHIFT)

_Static_assert(sizeof(size_t) == 8, "the block head layout needs a 64-bit size_t");
_Static_assert(sizeof(void *) == 8, "the block layout needs 64-bit pointers");
_Static_assert(ALIGN_SIZE == TLSF_ALIGN, "payload alignment");
_Static_assert(SMALL_BLOCK_SIZE / SL_INDEX_COUNT == ALIGN_SIZE, "class 0 steps by the alignment");
_Static_assert(FL_INDEX_COUNT <= 64, "the first-level bitmap is 64 bits");
_Static_assert(SL_INDEX_COUNT <= 32, "second-level bitmaps are 32 bits");
_Static_assert(TLSF_BLOCK_MAX == ((size_t)1 << FL_INDEX_MAX), "block size limit");

/*
 * The block.
 *
 * A block_t pointer addresses the word *before* the block's head: that word is the last word
 * of the physically previous block, where the previous block keeps a pointer to itself while
 * it is free (the boundary tag). The head follows; the payload starts 16 bytes after the
 * block_t pointer. A free block keeps its list links in the first two payload words.
 *
 *   block_t*  -> [prev_phys]   last word of the previous block (valid when it is free)
 *                [head]        size | flags | align | owner | tag     <- the only overhead
 *   payload   -> [next_free]   (free blocks only)
 *                [prev_free]
 *                ...
 *
 * "size" is the footprint: the distance from this head to the next block's head, a multiple
 * of 16. The usable bytes of a used block are size - 8 (its last word overlaps the next
 * block's prev_phys slot, which only matters while this block is free).
 */
typedef struct block {
    struct block *prev_phys;
    size_t head;
    struct block *next_free;
    struct block *prev_free;
} block_t;

/* Head bits. */
#define HEAD_FREE ((size_t)1 << 0)      /* this block is free */
#define HEAD_PREV_FREE ((size_t)1 << 1) /* the physically previous block is free */
#define HEAD_FIRST ((size_t)1 << 2)     /* first block of its pool */
/* A free block whose pages hold no data: every page lying wholly between its links (its
 * first 32 bytes from the block_t pointer) and its boundary tag was given back to the system
 * or never touched. Only on free blocks (checked). */
#define HEAD_CLEAN ((size_t)1 << 3)
#define HEAD_FLAGS ((size_t)0xf)
#define HEAD_SIZE_MASK ((((size_t)1 << FL_INDEX_MAX) - 1) & ~HEAD_FLAGS)
#define HEAD_ALIGN_SHIFT 46 /* log2 of the alignment asked of memalign, 0 for malloc */
#define HEAD_ALIGN_MASK ((size_t)0x3f << HEAD_ALIGN_SHIFT)
#define HEAD_OWNER_SHIFT 52 /* owner id, 8 bits */
#define HEAD_OWNER_MASK ((size_t)0xff << HEAD_OWNER_SHIFT)
#define HEAD_TAG_SHIFT 60 /* a 4-bit hash of the block's address, checked by validation */
#define HEAD_TAG_MASK ((size_t)0xf << HEAD_TAG_SHIFT)

_Static_assert((HEAD_SIZE_MASK & HEAD_ALIGN_MASK) == 0, "head fields overlap");
_Static_assert((HEAD_ALIGN_MASK & HEAD_OWNER_MASK) == 0, "head fields overlap");
_Static_assert((HEAD_OWNER_MASK & HEAD_TAG_MASK) == 0, "head fields overlap");

/* The top 12 bits of a head: its owner id (8 bits) and a 4-bit tag.
 * TLSF_HEAD_KEY 0 (default): the owner id as is, the tag a hash of the block's address.
 * TLSF_HEAD_KEY 1 (the backend with its check on every free): the owner id and a zero tag,
 * XORed with tlsf_head_key, 12 bits the program sets once before any heap is created (the
 * backend draws them at random at start-up, with a tag of 8..14). One xor then gives the
 * owner id and a tag that is zero when it matches (a check that reads the owner tests the
 * tag for nothing), and a used block's successor must have the very same top 12 bits (one
 * xor more). */
#ifndef TLSF_HEAD_KEY
#define TLSF_HEAD_KEY 0
#endif
#define HEAD_KEY_MASK (HEAD_OWNER_MASK | HEAD_TAG_MASK)
#if TLSF_HEAD_KEY
extern size_t tlsf_head_key; /* tlsf.c; set once by the program before any heap exists */
#endif

/* Overhead of a used block: its head. */
#define BLOCK_OVERHEAD sizeof(size_t)
/* Payload offset from the block_t pointer. */
#define BLOCK_START_OFFSET (offsetof(block_t, head) + sizeof(size_t))
/* Smallest footprint: head + two links + the boundary tag, rounded to the alignment. */
#define BLOCK_SIZE_MIN ((size_t)32)

_Static_assert(BLOCK_OVERHEAD == TLSF_BLOCK_OVERHEAD, "overhead");
_Static_assert(BLOCK_START_OFFSET == ALIGN_SIZE, "payload offset must equal the alignment");
_Static_assert(BLOCK_SIZE_MIN >= sizeof(block_t), "a free block must hold its links and tag");
_Static_assert(BLOCK_SIZE_MIN % ALIGN_SIZE == 0, "block sizes are multiples of 16");

/* A pool starts with this descriptor; its first block follows, a sentinel ends it. */
typedef struct tlsf_pool {
    struct tlsf_pool *next;
    struct tlsf_pool *prev;
    size_t bytes;
    size_t magic;
} tlsf_pool;

#define POOL_MAGIC ((size_t)0x544c5346706f6f6cull) /* "TLSFpool" */
_Static_assert(sizeof(tlsf_pool) == 32, "pool descriptor size");
/* descriptor (32) + the first block's prev_phys slot (8) + head (8) ... sentinel head (8) and
 * the sentinel's prev_phys slot (8, the first block's last word, counted in its footprint). */
_Static_assert(TLSF_POOL_OVERHEAD == sizeof(tlsf_pool) + 16, "pool overhead");

/*
 * Bit scans.
 */
static inline int tlsf_fls(size_t x) {
    return x ? 63 - __builtin_clzll(x) : -1;
}
static inline int tlsf_ffs(uint64_t x) {
    return x ? __builtin_ctzll(x) : -1;
}

static inline size_t align_up(size_t x, size_t align) {
    return (x + align - 1) & ~(align - 1);
}

/* A block's head word (and the boundary tag before it) is read by threads other than the
 * owner of its heap: the check on every free reads the freed block's head and its neighbours',
 * a free by another thread reads the block's owner, malloc_trim walks a heap an exited thread
 * left. Meanwhile the owner rewrites flag and size bits of those words (a used block's
 * HEAD_PREV_FREE when its predecessor is freed or taken, a neighbour's size when it is split
 * or merged). What the other threads rely on never changes while the block is in use (its owner
 * id and tag, its own size), and a word is read and written whole. So every access is a
 * relaxed atomic: the same plain loads and stores on x86-64 and arm64, and no data race for the
 * compiler or ThreadSanitizer (the sanitizer tier runs the thread heaps under it). */
static inline size_t head_load(const block_t *b) {
    return __atomic_load_n(&b->head, __ATOMIC_RELAXED);
}
static inline void head_store(block_t *b, size_t head) {
    __atomic_store_n(&b->head, head, __ATOMIC_RELAXED);
}
static inline block_t *prev_phys_load(const block_t *b) {
    return __atomic_load_n(&b->prev_phys, __ATOMIC_RELAXED);
}
static inline void prev_phys_store(block_t *b, block_t *prev) {
    __atomic_store_n(&b->prev_phys, prev, __ATOMIC_RELAXED);
}

/*
 * Block helpers.
 */
/* What is XORed over the top 12 bits of the head at b (HEAD_KEY_MASK), and its tag part:
 * tlsf_head_key, or the top 4 bits of the address times an odd constant (blocks are 16-byte
 * aligned: bits 56..59 of (address / 16) * constant, which every address bit mixes into). */
static inline size_t block_key(const block_t *b) {
#if TLSF_HEAD_KEY
    (void)b;
    return tlsf_head_key;
#else
    return ((uintptr_t)b * 0x9E3779B97F4A7C15ull) & HEAD_TAG_MASK;
#endif
}
static inline size_t block_tag(const block_t *b) {
    return block_key(b) & HEAD_TAG_MASK;
}
/* The owner id bits of a head read at b (still shifted). */
static inline size_t head_owner_bits(const block_t *b, size_t head) {
#if TLSF_HEAD_KEY
    return (head ^ block_key(b)) & HEAD_OWNER_MASK;
#else
    (void)b;
    return head & HEAD_OWNER_MASK;
#endif
}
static inline size_t block_size(const block_t *b) {
    return head_load(b) & HEAD_SIZE_MASK;
}
static inline void block_set_size(block_t *b, size_t size) {
    head_store(b, (head_load(b) & ~HEAD_SIZE_MASK) | size);
}
static inline int block_is_last(const block_t *b) {
    return block_size(b) == 0;
}
static inline int block_is_free(const block_t *b) {
    return (head_load(b) & HEAD_FREE) != 0;
}
static inline void block_set_free(block_t *b) {
    head_store(b, (head_load(b) | HEAD_FREE) & ~HEAD_ALIGN_MASK);
}
static inline void block_set_used(block_t *b) {
    head_store(b, head_load(b) & ~(HEAD_FREE | HEAD_CLEAN));
}
static inline int block_is_prev_free(const block_t *b) {
    return (head_load(b) & HEAD_PREV_FREE) != 0;
}
static inline void block_set_prev_free(block_t *b) {
    head_store(b, head_load(b) | HEAD_PREV_FREE);
}
static inline void block_set_prev_used(block_t *b) {
    head_store(b, head_load(b) & ~HEAD_PREV_FREE);
}
static inline void block_set_align_log(block_t *b, unsigned log2) {
    head_store(b, (head_load(b) & ~HEAD_ALIGN_MASK) | ((size_t)log2 << HEAD_ALIGN_SHIFT));
}
static inline block_t *block_from_ptr(const void *ptr) {
    return (block_t *)((char *)ptr - BLOCK_START_OFFSET);
}
static inline void *block_to_ptr(const block_t *b) {
    return (char *)b + BLOCK_START_OFFSET;
}
static inline block_t *block_at(const void *p, size_t offset) {
    return (block_t *)((char *)p + offset);
}
static inline block_t *block_next(const block_t *b) {
    return block_at(b, block_size(b));
}
static inline block_t *block_prev(const block_t *b) {
    return prev_phys_load(b);
}

/* Records b as the previous physical block of its successor; returns the successor. */
static inline block_t *block_link_next(block_t *b) {
    block_t *next = block_next(b);
    prev_phys_store(next, b);
    return next;
}
/* The two below (and the split and merge in tlsf.c) read a head once and write it once: its
 * accesses are relaxed atomics, which the compiler does not merge on its own. */
static inline void block_mark_as_free(block_t *b) {
    const size_t head = head_load(b);
    block_t *next = block_at(b, head & HEAD_SIZE_MASK);
    prev_phys_store(next, b);
    head_store(next, head_load(next) | HEAD_PREV_FREE);
    head_store(b, (head | HEAD_FREE) & ~HEAD_ALIGN_MASK);
}
static inline void block_mark_as_used(block_t *b) {
    const size_t head = head_load(b);
    block_t *next = block_at(b, head & HEAD_SIZE_MASK);
    head_store(next, head_load(next) & ~HEAD_PREV_FREE);
    head_store(b, head & ~(HEAD_FREE | HEAD_CLEAN));
}

/* Whether the head word of the block at b, whose payload lies inside memory the caller knows
 * to be mapped up to area_hi, is that of a used block: its tag matches its address, it is not
 * free (nor clean), its size is at least the smallest block and its successor's head lies
 * below area_hi; the successor's head has its own tag and b's owner, and says that b is used
 * and is not the first block of a pool. Two words read (b's head and its successor's). */
static inline int block_used_sane(const block_t *b, size_t head, uintptr_t area_hi) {
    const size_t size = head & HEAD_SIZE_MASK;
    if (((head ^ block_tag(b)) & HEAD_TAG_MASK) | (head & (HEAD_FREE | HEAD_CLEAN))) return 0;
    if (size < BLOCK_SIZE_MIN || size > area_hi - (uintptr_t)b - 2 * sizeof(size_t)) return 0;
    const block_t *next = block_at(b, size);
    const size_t nhead = head_load(next);
    return !(((nhead ^ block_key(next) ^ head ^ block_key(b)) & HEAD_KEY_MASK) |
             (nhead & (HEAD_PREV_FREE | HEAD_FIRST)));
}

/* When b says its predecessor is free: that block's head (found through b's prev_phys slot)
 * is a free block's, inside [area_lo, b), and ends at b. */
static inline int block_prev_sane(const block_t *b, uintptr_t area_lo) {
    const block_t *prev = prev_phys_load(b);
    const uintptr_t at = (uintptr_t)prev;
    if (at < area_lo || at >= (uintptr_t)b || (at & (ALIGN_SIZE - 1))) return 0;
    const size_t head = head_load(prev);
    return ((head ^ block_tag(prev)) & HEAD_TAG_MASK) == 0 && (head & HEAD_FREE) &&
           block_at(prev, head & HEAD_SIZE_MASK) == b;
}

#endif
