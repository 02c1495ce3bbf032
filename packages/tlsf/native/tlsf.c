/*
 * tlsf.c — Two-Level Segregated Fit allocator core. See tlsf.h for the contract.
 *
 * Sections, top-down: the control structure; size-class mapping; free lists; block
 * split/merge/trim; the public API; validation and checking. The block, its head and their
 * helpers are in tlsf_block.h.
 */
#include "tlsf.h"
#include "tlsf_block.h"

#include <stdio.h>
#include <string.h>

#define LIKELY_TLSF(x) __builtin_expect(!!(x), 1)

#if TLSF_HEAD_KEY
size_t tlsf_head_key = (size_t)0x5a5 << HEAD_OWNER_SHIFT;
#endif

/* What every call reads or writes (bitmaps, owner, counters) comes first, in a few cache lines
 * of one page; the free-list heads follow, of which a process uses a handful: a fresh control
 * costs two or three page faults, not one per page of its ~11 KiB. */
struct tlsf_control {
    uint64_t fl_bitmap;
    uint32_t sl_bitmap[FL_INDEX_COUNT];
    tlsf_pool *pools;
    size_t owner_bits;
    unsigned owner;
    /* Counters. */
    size_t pool_bytes;
    size_t pool_count;
    size_t block_bytes; /* footprint of all blocks of all pools */
    size_t free_bytes;
    size_t free_blocks;
    size_t used_blocks;
    block_t *blocks[FL_INDEX_COUNT][SL_INDEX_COUNT];
};

/* Writes a fresh head: size, flags, the allocator's owner id and the address tag. */
static inline void block_init(const tlsf_t *t, block_t *b, size_t size, size_t flags) {
    head_store(b, size | flags | (t->owner_bits ^ block_key(b)));
}

/* Footprint for a request of size usable bytes; 0 when it can never be served. */
static inline size_t adjust_request_size(size_t size) {
    if (size == 0 || size >= TLSF_BLOCK_MAX / 2) return 0;
    size_t f = align_up(size + BLOCK_OVERHEAD, ALIGN_SIZE);
    return f < BLOCK_SIZE_MIN ? BLOCK_SIZE_MIN : f;
}

/*
 * Size-class mapping: the first level is the power of two, the second level splits it into
 * SL_INDEX_COUNT linear steps. Blocks below SMALL_BLOCK_SIZE go to class 0 in 16-byte steps.
 */
static inline void mapping_insert(size_t size, int *fli, int *sli) {
    int fl, sl;
    if (size < SMALL_BLOCK_SIZE) {
        fl = 0;
        sl = (int)(size >> ALIGN_SIZE_LOG2);
    } else {
        fl = tlsf_fls(size);
        sl = (int)(size >> (fl - SL_INDEX_COUNT_LOG2)) ^ SL_INDEX_COUNT;
        fl -= FL_INDEX_SHIFT - 1;
    }
    *fli = fl;
    *sli = sl;
}

/* Rounds size up to the next class boundary, so that every block of the class found fits:
 * this is what makes the search O(1) (no walk along a list). */
static inline size_t mapping_round(size_t size) {
    if (size >= SMALL_BLOCK_SIZE) size += ((size_t)1 << (tlsf_fls(size) - SL_INDEX_COUNT_LOG2)) - 1;
    return size;
}

/*
 * Free lists.
 */
static block_t *search_suitable_block(const tlsf_t *t, int *fli, int *sli) {
    int fl = *fli;
    int sl = *sli;
    uint32_t sl_map = t->sl_bitmap[fl] & (~(uint32_t)0 << sl);
    if (!sl_map) {
        const uint64_t fl_map = t->fl_bitmap & (~(uint64_t)0 << (fl + 1));
        if (!fl_map) return NULL;
        fl = tlsf_ffs(fl_map);
        sl_map = t->sl_bitmap[fl];
    }
    sl = tlsf_ffs(sl_map);
    *fli = fl;
    *sli = sl;
    return t->blocks[fl][sl];
}

static inline void remove_free_block(tlsf_t *t, block_t *b, int fl, int sl) {
    block_t *prev = b->prev_free;
    block_t *next = b->next_free;
    if (next) next->prev_free = prev;
    if (prev) {
        prev->next_free = next;
    } else {
        t->blocks[fl][sl] = next;
        if (!next) {
            t->sl_bitmap[fl] &= ~((uint32_t)1 << sl);
            if (!t->sl_bitmap[fl]) t->fl_bitmap &= ~((uint64_t)1 << fl);
        }
    }
    t->free_bytes -= block_size(b);
    t->free_blocks--;
}

static inline void insert_free_block(tlsf_t *t, block_t *b, int fl, int sl) {
    block_t *current = t->blocks[fl][sl];
    b->next_free = current;
    b->prev_free = NULL;
    if (current) current->prev_free = b;
    t->blocks[fl][sl] = b;
    t->fl_bitmap |= (uint64_t)1 << fl;
    t->sl_bitmap[fl] |= (uint32_t)1 << sl;
    t->free_bytes += block_size(b);
    t->free_blocks++;
}

/* Puts b in old's place in list (fl, sl): for a free block that moved or shrank within its
 * class, this saves the unlink, the bitmap updates and the relink. Reads old's links before
 * b's head is written (the two may overlap). */
static inline void replace_free_block(tlsf_t *t, block_t *old, block_t *b, int fl, int sl) {
    block_t *next = old->next_free;
    block_t *prev = old->prev_free;
    t->free_bytes -= block_size(old);
    b->next_free = next;
    b->prev_free = prev;
    if (next) next->prev_free = b;
    if (prev) {
        prev->next_free = b;
    } else {
        t->blocks[fl][sl] = b;
    }
}

static inline void block_remove(tlsf_t *t, block_t *b) {
    int fl, sl;
    mapping_insert(block_size(b), &fl, &sl);
    remove_free_block(t, b, fl, sl);
}

static inline void block_insert(tlsf_t *t, block_t *b) {
    int fl, sl;
    mapping_insert(block_size(b), &fl, &sl);
    insert_free_block(t, b, fl, sl);
}

/*
 * Split, merge, trim.
 */
static inline int block_can_split(const block_t *b, size_t size) {
    return block_size(b) >= size + BLOCK_SIZE_MIN;
}

/* Cuts b to size; the rest becomes a new free block (not inserted), which is returned. */
static inline block_t *block_split(const tlsf_t *t, block_t *b, size_t size) {
    const size_t head = head_load(b);
    const size_t rest_size = (head & HEAD_SIZE_MASK) - size;
    block_t *rest = block_at(b, size);
    /* Free (a free b's rest stays clean), and its successor told so. */
    block_init(t, rest, rest_size, HEAD_FREE | (head & HEAD_CLEAN));
    head_store(b, (head & ~HEAD_SIZE_MASK) | size);
    block_t *next = block_at(rest, rest_size);
    prev_phys_store(next, rest);
    head_store(next, head_load(next) | HEAD_PREV_FREE);
    return rest;
}

/* prev absorbs its physical successor b (both already out of the free lists). */
static inline block_t *block_absorb(block_t *prev, block_t *b) {
    const size_t head = head_load(prev), b_head = head_load(b);
    const size_t size = (head & HEAD_SIZE_MASK) + (b_head & HEAD_SIZE_MASK);
    const size_t clean = head & b_head & HEAD_CLEAN; /* clean only if both were */
    head_store(prev, (head & ~(HEAD_SIZE_MASK | HEAD_CLEAN)) | size | clean);
    prev_phys_store(block_at(prev, size), prev);
    return prev;
}

static inline block_t *block_merge_prev(tlsf_t *t, block_t *b) {
    if (block_is_prev_free(b)) {
        block_t *prev = block_prev(b);
        block_remove(t, prev);
        b = block_absorb(prev, b);
    }
    return b;
}

static inline block_t *block_merge_next(tlsf_t *t, block_t *b) {
    block_t *next = block_next(b);
    if (block_is_free(next)) {
        block_remove(t, next);
        b = block_absorb(b, next);
    }
    return b;
}

/* Gives the tail of a free block (about to be used) back to the lists. */
static inline void block_trim_free(tlsf_t *t, block_t *b, size_t size) {
    if (block_can_split(b, size)) {
        block_t *rest = block_split(t, b, size);
        block_link_next(b);
        block_set_prev_free(rest);
        block_insert(t, rest);
    }
}

/* Gives the tail of a used block back to the lists, coalescing it with a free successor. */
static inline void block_trim_used(tlsf_t *t, block_t *b, size_t size) {
    if (block_can_split(b, size)) {
        block_t *rest = block_split(t, b, size);
        block_set_prev_used(rest);
        rest = block_merge_next(t, rest);
        block_insert(t, rest);
    }
}

/* Splits the leading gap of a free block off as a free block; returns the rest. */
static inline block_t *block_trim_free_leading(tlsf_t *t, block_t *b, size_t gap) {
    block_t *rest = block_split(t, b, gap);
    block_set_prev_free(rest);
    block_link_next(b);
    block_insert(t, b);
    return rest;
}

static inline block_t *block_locate_free(tlsf_t *t, size_t size) {
    int fl, sl;
    size = mapping_round(size);
    if (size >= TLSF_BLOCK_MAX) return NULL;
    mapping_insert(size, &fl, &sl);
    block_t *b = search_suitable_block(t, &fl, &sl);
    if (b) remove_free_block(t, b, fl, sl);
    return b;
}

static inline void *block_prepare_used(tlsf_t *t, block_t *b, size_t size) {
    block_trim_free(t, b, size);
    block_mark_as_used(b);
    t->used_blocks++;
    return block_to_ptr(b);
}

static inline block_t *pool_first_block(const tlsf_pool *pool) {
    return block_at(pool, sizeof(tlsf_pool));
}
static inline block_t *pool_sentinel(const tlsf_pool *pool) {
    return block_at(pool, pool->bytes - 2 * sizeof(size_t));
}

/*
 * Public API.
 */
size_t tlsf_control_size(void) {
    return align_up(sizeof(tlsf_t), ALIGN_SIZE);
}

tlsf_t *tlsf_create_in_zeroed(void *mem, unsigned owner) {
    if (!mem || ((uintptr_t)mem & (ALIGN_SIZE - 1)) || owner > TLSF_OWNER_MAX) return NULL;
    tlsf_t *t = (tlsf_t *)mem;
    t->owner = owner;
    t->owner_bits = (size_t)owner << HEAD_OWNER_SHIFT;
    return t;
}

tlsf_t *tlsf_create(void *mem, unsigned owner) {
    if (!mem || ((uintptr_t)mem & (ALIGN_SIZE - 1)) || owner > TLSF_OWNER_MAX) return NULL;
    memset(mem, 0, sizeof(tlsf_t));
    return tlsf_create_in_zeroed(mem, owner);
}

static int add_pool(tlsf_t *t, void *mem, size_t bytes, size_t clean) {
    uintptr_t start = align_up((uintptr_t)mem, ALIGN_SIZE);
    size_t lost = start - (uintptr_t)mem;
    if (bytes < lost) return -1;
    bytes = (bytes - lost) & ~(ALIGN_SIZE - 1);
    if (bytes < TLSF_POOL_OVERHEAD + BLOCK_SIZE_MIN) return -1;
    if (bytes - TLSF_POOL_OVERHEAD >= TLSF_BLOCK_MAX) return -1;

    tlsf_pool *pool = (tlsf_pool *)start;
    pool->bytes = bytes;
    pool->magic = POOL_MAGIC;
    pool->prev = NULL;
    pool->next = t->pools;
    if (t->pools) t->pools->prev = pool;
    t->pools = pool;

    /* One free block spanning the pool, then a zero-sized used sentinel. */
    block_t *b = pool_first_block(pool);
    const size_t size = bytes - TLSF_POOL_OVERHEAD;
    block_init(t, b, size, HEAD_FREE | HEAD_FIRST | clean);
    block_insert(t, b);
    block_t *sentinel = block_link_next(b);
    block_init(t, sentinel, 0, HEAD_PREV_FREE);

    t->pool_bytes += bytes;
    t->pool_count++;
    t->block_bytes += size;
    return 0;
}

int tlsf_add_pool(tlsf_t *t, void *mem, size_t bytes) {
    return add_pool(t, mem, bytes, 0);
}

int tlsf_add_pool_clean(tlsf_t *t, void *mem, size_t bytes) {
    return add_pool(t, mem, bytes, HEAD_CLEAN);
}

size_t tlsf_pool_need(size_t size, size_t align) {
    size_t f = adjust_request_size(size);
    if (!f) return 0;
    if (align > ALIGN_SIZE) {
        if (align >= TLSF_BLOCK_MAX / 2) return 0;
        f += align + BLOCK_SIZE_MIN;
    }
    f = align_up(mapping_round(f), ALIGN_SIZE);
    if (f >= TLSF_BLOCK_MAX) return 0;
    return f + TLSF_POOL_OVERHEAD;
}

/* The first block of the request's own class, when it is large enough (one load and one
 * compare more than the rounded search; still O(1)). The rounded search never looks in that
 * class, so without this a free block of exactly the size asked for (a hole one block wide
 * among blocks a thread cache keeps, the common case under tlsf_backend's cache) could not
 * serve the request, and the heap grew instead: wl_batch's last phase (1,600 blocks of 1,040
 * bytes) touched 1.21 MB more of the heap where glibc touched 0.79 MB. Only classes above
 * SMALL_BLOCK_SIZE span more than one size. */
static inline block_t *exact_class_fit(const tlsf_t *t, size_t adjusted, int *fl, int *sl) {
    if (adjusted < SMALL_BLOCK_SIZE || adjusted >= TLSF_BLOCK_MAX) return NULL;
    mapping_insert(adjusted, fl, sl);
    block_t *b = t->blocks[*fl][*sl];
    return b && block_size(b) >= adjusted ? b : NULL;
}

void *tlsf_malloc(tlsf_t *t, size_t size) {
    const size_t adjusted = adjust_request_size(size);
    if (!adjusted) return NULL;
    int fl, sl;
    block_t *b = exact_class_fit(t, adjusted, &fl, &sl);
    if (!b) {
        const size_t rounded = mapping_round(adjusted);
        if (rounded >= TLSF_BLOCK_MAX) return NULL;
        mapping_insert(rounded, &fl, &sl);
        b = search_suitable_block(t, &fl, &sl);
        if (!b) return NULL;
    }
    const size_t size_b = block_size(b);
    if (size_b >= adjusted + BLOCK_SIZE_MIN) {
        /* Carving from a large block usually leaves a remainder of the same class: it takes
         * the block's place at the head of the list, the bitmaps stay as they are. */
        int rfl, rsl;
        const size_t rest_size = size_b - adjusted;
        mapping_insert(rest_size, &rfl, &rsl);
        if (rfl == fl && rsl == sl) {
            block_t *rest = block_at(b, adjusted);
            block_t *next = b->next_free;
            block_init(t, rest, rest_size, HEAD_FREE | (head_load(b) & HEAD_CLEAN));
            rest->next_free = next;
            rest->prev_free = NULL;
            if (next) next->prev_free = rest;
            t->blocks[fl][sl] = rest;
            t->free_bytes -= adjusted;
            block_set_size(b, adjusted);
            block_link_next(rest); /* its successor keeps its prev-free bit */
            block_set_used(b);
            t->used_blocks++;
            return block_to_ptr(b);
        }
    }
    remove_free_block(t, b, fl, sl);
    return block_prepare_used(t, b, adjusted);
}

void *tlsf_memalign(tlsf_t *t, size_t align, size_t size) {
    if (align <= ALIGN_SIZE) return tlsf_malloc(t, size);
    if (align & (align - 1)) return NULL;
    const size_t adjusted = adjust_request_size(size);
    if (!adjusted || align >= TLSF_BLOCK_MAX / 2) return NULL;

    /* Room for the payload at any alignment offset, plus a leading gap large enough to be a
     * free block of its own. */
    const size_t search = adjusted + align + BLOCK_SIZE_MIN;
    block_t *b = block_locate_free(t, search);
    if (!b) return NULL;

    const uintptr_t ptr = (uintptr_t)block_to_ptr(b);
    uintptr_t aligned = align_up(ptr, align);
    size_t gap = aligned - ptr;
    if (gap && gap < BLOCK_SIZE_MIN) {
        aligned = align_up(ptr + BLOCK_SIZE_MIN, align);
        gap = aligned - ptr;
    }
    if (gap) b = block_trim_free_leading(t, b, gap);
    void *p = block_prepare_used(t, b, adjusted);
    block_set_align_log(b, (unsigned)tlsf_fls(align));
    return p;
}

void tlsf_free(tlsf_t *t, void *ptr) {
    block_t *b = block_from_ptr(ptr);
    t->used_blocks--;
    block_mark_as_free(b);
    b = block_merge_prev(t, b);
    b = block_merge_next(t, b);
    block_insert(t, b);
}

void tlsf_join_used(tlsf_t *t, void *ptr, void *next) {
    block_t *b = block_from_ptr(ptr);
    const size_t head = head_load(b);
    const size_t next_size = head_load(block_from_ptr(next)) & HEAD_SIZE_MASK;
    TLSF_ASSERT(!(head & (HEAD_FREE | HEAD_ALIGN_MASK)) &&
                block_at(b, head & HEAD_SIZE_MASK) == block_from_ptr(next));
    head_store(b, head + next_size); /* the size field cannot carry: blocks are < 2^46 */
    t->used_blocks--;
}

void tlsf_split_used(tlsf_t *t, void *ptr, size_t f, unsigned n) {
    block_t *b = block_from_ptr(ptr);
    const size_t head = head_load(b);
    const size_t size = head & HEAD_SIZE_MASK;
    TLSF_ASSERT(!(head & (HEAD_FREE | HEAD_ALIGN_MASK)) && n >= 1 && f >= BLOCK_SIZE_MIN &&
                !(f & (ALIGN_SIZE - 1)) && size >= (size_t)n * f);
    if (n < 2) return;
    head_store(b, (head & ~HEAD_SIZE_MASK) | f);
    block_t *c = b;
    for (unsigned i = 1; i + 1 < n; i++) {
        c = block_at(c, f);
        block_init(t, c, f, 0); /* used, its predecessor used */
    }
    block_init(t, block_at(c, f), size - (size_t)(n - 1) * f, 0);
    t->used_blocks += n - 1;
}

void *tlsf_free_span(tlsf_t *t, void *ptr, size_t page, uintptr_t *lo, uintptr_t *hi) {
    block_t *b = block_from_ptr(ptr);
    t->used_blocks--;
    block_mark_as_free(b);
    /* What may hold data: b, and each neighbour it merges with unless that one is clean.
     * (Block X spans [X + 8, X + 8 + size): its head, then payload up to the next head.) */
    uintptr_t dirty_lo = (uintptr_t)b + 8, dirty_hi = (uintptr_t)b + 8 + block_size(b);
    if (block_is_prev_free(b) && !(head_load(block_prev(b)) & HEAD_CLEAN))
        dirty_lo = (uintptr_t)block_prev(b) + 8;
    const block_t *next = block_next(b);
    if (block_is_free(next) && !(head_load(next) & HEAD_CLEAN))
        dirty_hi = (uintptr_t)next + 8 + block_size(next);
    b = block_merge_prev(t, b);
    b = block_merge_next(t, b);
    block_insert(t, b);
    /* Whole pages: the dirty range rounded out (a page it touches may hold its data), within
     * the pages lying wholly between the merged block's links and its boundary tag. */
    uintptr_t from = dirty_lo & ~(uintptr_t)(page - 1);
    uintptr_t to = (dirty_hi + page - 1) & ~(uintptr_t)(page - 1);
    const uintptr_t first = ((uintptr_t)b + sizeof(block_t) + page - 1) & ~(uintptr_t)(page - 1);
    const uintptr_t last = ((uintptr_t)b + block_size(b)) & ~(uintptr_t)(page - 1);
    if (from < first) from = first;
    if (to > last) to = last;
    *lo = from;
    *hi = to > from ? to : from;
    return block_to_ptr(b);
}

/* Hands discard the pages of free block b lying wholly between its links and its boundary tag
 * (as in tlsf_free_span) and marks it clean; returns their bytes. */
static size_t block_discard_pages(block_t *b, size_t page, tlsf_discarder discard, void *user) {
    const uintptr_t first = ((uintptr_t)b + sizeof(block_t) + page - 1) & ~(uintptr_t)(page - 1);
    const uintptr_t last = ((uintptr_t)b + block_size(b)) & ~(uintptr_t)(page - 1);
    size_t given = 0;
    if (last > first) {
        discard((void *)first, last - first, user);
        given = last - first;
    }
    head_store(b, head_load(b) | HEAD_CLEAN);
    return given;
}

size_t tlsf_trim(tlsf_t *t, size_t page, size_t keep, int clean_too, tlsf_discarder discard,
                 void *user) {
    size_t given = 0;
    for (uint64_t fl_map = t->fl_bitmap; fl_map; fl_map &= fl_map - 1) {
        const int fl = tlsf_ffs(fl_map);
        for (uint32_t sl_map = t->sl_bitmap[fl]; sl_map; sl_map &= sl_map - 1) {
            for (block_t *b = t->blocks[fl][tlsf_ffs(sl_map)]; b; b = b->next_free) {
                if ((head_load(b) & HEAD_CLEAN) && !clean_too) continue;
                if (keep) { /* the smallest blocks first stay as they are, up to `keep` bytes */
                    keep = block_size(b) < keep ? keep - block_size(b) : 0;
                    continue;
                }
                given += block_discard_pages(b, page, discard, user);
            }
        }
    }
    return given;
}

size_t tlsf_trim_largest(tlsf_t *t, size_t page, unsigned visits, tlsf_discarder discard,
                         void *user) {
    size_t given = 0;
    for (uint64_t fl_map = t->fl_bitmap; fl_map && visits;
         fl_map &= ~((uint64_t)1 << tlsf_fls(fl_map))) {
        const int fl = tlsf_fls(fl_map);
        for (uint32_t sl_map = t->sl_bitmap[fl]; sl_map && visits;
             sl_map &= ~((uint32_t)1 << tlsf_fls(sl_map))) {
            for (block_t *b = t->blocks[fl][tlsf_fls(sl_map)]; b && visits; b = b->next_free) {
                visits--;
                if (!(head_load(b) & HEAD_CLEAN))
                    given += block_discard_pages(b, page, discard, user);
            }
        }
    }
    return given;
}

int tlsf_block_is_whole_pool(const void *ptr) {
    const block_t *b = block_from_ptr(ptr);
    return (head_load(b) & HEAD_FIRST) && block_is_last(block_next(b));
}

void tlsf_mark_clean(void *free_ptr) {
    head_store(block_from_ptr(free_ptr), head_load(block_from_ptr(free_ptr)) | HEAD_CLEAN);
}

size_t tlsf_used_bytes(const tlsf_t *t) {
    return t->block_bytes - t->free_bytes;
}

void *tlsf_resize(tlsf_t *t, void *ptr, size_t size) {
    block_t *b = block_from_ptr(ptr);
    const size_t current = block_size(b);
    const size_t adjusted = adjust_request_size(size);
    if (!adjusted) return NULL;
    if (adjusted > current) {
        block_t *next = block_next(b);
        if (!block_is_free(next) || current + block_size(next) < adjusted) return NULL;
        const size_t rest_size = current + block_size(next) - adjusted;
        if (rest_size >= BLOCK_SIZE_MIN) {
            /* Growing into a large free successor: its remainder often keeps the class, and
             * then simply takes the successor's place in its list. */
            int fl, sl, rfl, rsl;
            mapping_insert(block_size(next), &fl, &sl);
            mapping_insert(rest_size, &rfl, &rsl);
            if (fl == rfl && sl == rsl) {
                block_t *rest = block_at(b, adjusted);
                const size_t clean = head_load(next) & HEAD_CLEAN;
                replace_free_block(t, next, rest, fl, sl);
                block_init(t, rest, rest_size, HEAD_FREE | clean);
                t->free_bytes += rest_size;
                block_set_size(b, adjusted);
                block_link_next(rest);
                return ptr;
            }
        }
        block_remove(t, next);
        block_absorb(b, next);
        block_mark_as_used(b);
    }
    block_trim_used(t, b, adjusted);
    return ptr;
}

size_t tlsf_block_size(const void *ptr) {
    return block_size(block_from_ptr(ptr)) - BLOCK_OVERHEAD;
}

unsigned tlsf_block_owner(const void *ptr) {
    const block_t *b = block_from_ptr(ptr);
    return (unsigned)(head_owner_bits(b, head_load(b)) >> HEAD_OWNER_SHIFT);
}

size_t tlsf_block_align(const void *ptr) {
    const unsigned log2 =
        (unsigned)((head_load(block_from_ptr(ptr)) & HEAD_ALIGN_MASK) >> HEAD_ALIGN_SHIFT);
    return log2 ? (size_t)1 << log2 : ALIGN_SIZE;
}

void tlsf_get_counters(const tlsf_t *t, tlsf_stats *out) {
    out->pool_bytes = t->pool_bytes;
    out->pool_count = t->pool_count;
    out->free_bytes = t->free_bytes;
    out->free_blocks = t->free_blocks;
    out->used_bytes = t->block_bytes - t->free_bytes;
    out->used_blocks = t->used_blocks;
    out->largest_free = 0;
}

void tlsf_get_stats(const tlsf_t *t, tlsf_stats *out) {
    out->pool_bytes = t->pool_bytes;
    out->pool_count = t->pool_count;
    out->free_bytes = t->free_bytes;
    out->free_blocks = t->free_blocks;
    out->used_bytes = t->block_bytes - t->free_bytes;
    out->used_blocks = t->used_blocks;
    out->largest_free = 0;
    /* The largest free block is in the highest non-empty list; that one list is scanned. */
    const int fl = tlsf_fls(t->fl_bitmap);
    if (fl >= 0) {
        const int sl = tlsf_fls(t->sl_bitmap[fl]);
        size_t largest = 0;
        for (const block_t *b = t->blocks[fl][sl]; b; b = b->next_free)
            if (block_size(b) > largest) largest = block_size(b);
        out->largest_free = largest - BLOCK_OVERHEAD;
    }
}

void *tlsf_find_pool(const tlsf_t *t, const void *ptr) {
    const uintptr_t p = (uintptr_t)ptr;
    for (const tlsf_pool *pool = t->pools; pool; pool = pool->next)
        if (p >= (uintptr_t)pool && p < (uintptr_t)pool + pool->bytes) return (void *)pool;
    return NULL;
}

void *tlsf_next_pool(const tlsf_t *t, void *prev, size_t *bytes) {
    const tlsf_pool *pool = prev ? ((const tlsf_pool *)prev)->next : t->pools;
    if (pool && bytes) *bytes = pool->bytes;
    return (void *)pool;
}

void tlsf_walk(const tlsf_t *t, tlsf_walker fn, void *user) {
    for (const tlsf_pool *pool = t->pools; pool; pool = pool->next) {
        for (block_t *b = pool_first_block(pool); !block_is_last(b); b = block_next(b))
            fn(block_to_ptr(b), block_size(b) - BLOCK_OVERHEAD, !block_is_free(b), user);
    }
}

/*
 * The check on every free (the backend's default): O(1), no pool lookup.
 */

tlsf_error tlsf_check_used(const void *ptr, uintptr_t area_lo, uintptr_t area_hi,
                           const void **where) {
    *where = ptr;
    const uintptr_t p = (uintptr_t)ptr;
    if (p < area_lo || p >= area_hi) return TLSF_ERR_FOREIGN;
    /* A payload is aligned and follows at least a pool descriptor and a head. */
    if ((p & (ALIGN_SIZE - 1)) || p - area_lo < sizeof(tlsf_pool) + BLOCK_START_OFFSET)
        return TLSF_ERR_INTERIOR;
    const block_t *b = block_from_ptr(ptr);
    const size_t head = head_load(b);
    if (LIKELY_TLSF(block_used_sane(b, head, area_hi))) {
        if (!(head & HEAD_PREV_FREE) || block_prev_sane(b, area_lo)) return TLSF_OK;
        return TLSF_ERR_PREV_HEADER;
    }
    /* Not a used block's head: which part failed? */
    const size_t size = head & HEAD_SIZE_MASK;
    if ((head ^ block_tag(b)) & HEAD_TAG_MASK) return TLSF_ERR_INTERIOR;
    if (head & HEAD_FREE) return TLSF_ERR_DOUBLE_FREE;
    if ((head & HEAD_CLEAN) || size < BLOCK_SIZE_MIN ||
        size > area_hi - (uintptr_t)b - 2 * sizeof(size_t))
        return TLSF_ERR_INTERIOR;
    *where = block_to_ptr(block_at(b, size));
    return TLSF_ERR_NEXT_HEADER;
}

/*
 * Validation (the backend's checking mode and the addon) and the integrity walk.
 */

/* Whether b's head is one this allocator could have written: the right tag and owner, no
 * reserved bit, a size that stays inside the pool, the sentinel only at the pool's end. */
static int head_plausible(const tlsf_t *t, const tlsf_pool *pool, const block_t *b) {
    const uintptr_t lo = (uintptr_t)pool_first_block(pool);
    const uintptr_t end = (uintptr_t)pool_sentinel(pool);
    const uintptr_t at = (uintptr_t)b;
    if (at < lo || at > end || (at & (ALIGN_SIZE - 1))) return 0;
    const size_t head = head_load(b);
    if ((head & HEAD_TAG_MASK) != block_tag(b)) return 0;
    if (head_owner_bits(b, head) != t->owner_bits) return 0;
    if ((head & HEAD_CLEAN) && !(head & HEAD_FREE)) return 0;
    const size_t size = head & HEAD_SIZE_MASK;
    if (at == end) return size == 0 && !(head & HEAD_FREE);
    if (size < BLOCK_SIZE_MIN || size > end - at) return 0;
    if (((head & HEAD_FIRST) != 0) != (at == lo)) return 0;
    return 1;
}

tlsf_error tlsf_validate(const tlsf_t *t, const void *ptr, const void **where) {
    *where = ptr;
    const tlsf_pool *pool = (const tlsf_pool *)tlsf_find_pool(t, ptr);
    if (!pool) return TLSF_ERR_FOREIGN;
    const uintptr_t p = (uintptr_t)ptr;
    const block_t *sentinel = pool_sentinel(pool);
    if ((p & (ALIGN_SIZE - 1)) || p < (uintptr_t)block_to_ptr(pool_first_block(pool)) ||
        p > (uintptr_t)sentinel)
        return TLSF_ERR_INTERIOR;

    const block_t *b = block_from_ptr(ptr);
    if (head_plausible(t, pool, b) && b != sentinel) {
        if (block_is_free(b)) return TLSF_ERR_DOUBLE_FREE;
        const block_t *next = block_next(b);
        if (!head_plausible(t, pool, next) || block_is_prev_free(next)) {
            *where = block_to_ptr(next);
            return TLSF_ERR_HEADER;
        }
        if (block_is_prev_free(b)) {
            const block_t *prev = block_prev(b);
            if (!head_plausible(t, pool, prev) || !block_is_free(prev) || block_next(prev) != b)
                return TLSF_ERR_HEADER;
        }
        return TLSF_OK;
    }

    /* Explain: walk the pool from its start to the block that holds ptr. */
    for (const block_t *c = pool_first_block(pool); c != sentinel; c = block_next(c)) {
        if (!head_plausible(t, pool, c)) {
            *where = block_to_ptr(c);
            return TLSF_ERR_HEADER;
        }
        const block_t *next = block_next(c);
        if (p > (uintptr_t)block_to_ptr(c) - BLOCK_OVERHEAD && p < (uintptr_t)block_to_ptr(next)) {
            if (c == b) return TLSF_ERR_HEADER;
            return block_is_free(c) ? TLSF_ERR_DOUBLE_FREE : TLSF_ERR_INTERIOR;
        }
    }
    return TLSF_ERR_HEADER;
}

const char *tlsf_error_name(tlsf_error e) {
    switch (e) {
        case TLSF_OK:
            return "ok";
        case TLSF_ERR_FOREIGN:
            return "free of a foreign pointer (not allocated by this heap)";
        case TLSF_ERR_INTERIOR:
            return "free of an interior pointer (not the start of a block)";
        case TLSF_ERR_DOUBLE_FREE:
            return "double free";
        case TLSF_ERR_HEADER:
            return "overwritten block header (heap corruption)";
        case TLSF_ERR_NEXT_HEADER:
            return "heap corruption after the block: the next block's header is damaged";
        case TLSF_ERR_PREV_HEADER:
            return "heap corruption before the block: the previous free block's header is "
                   "damaged";
    }
    return "unknown error";
}

#define CHECK_FAIL(...)                           \
    do {                                          \
        if (cap) snprintf(msg, cap, __VA_ARGS__); \
        return -1;                                \
    } while (0)

int tlsf_check(const tlsf_t *t, char *msg, size_t cap) {
    size_t walked_free = 0, walked_free_bytes = 0, walked_used = 0, pool_bytes = 0;
    size_t block_bytes = 0, pools = 0;
    for (const tlsf_pool *pool = t->pools; pool; pool = pool->next) {
        pools++;
        if (pool->magic != POOL_MAGIC) CHECK_FAIL("pool %p: descriptor overwritten", (void *)pool);
        pool_bytes += pool->bytes;
        block_bytes += pool->bytes - TLSF_POOL_OVERHEAD;
        const block_t *sentinel = pool_sentinel(pool);
        int prev_free = 0;
        const block_t *b = pool_first_block(pool);
        for (;;) {
            if (!head_plausible(t, pool, b))
                CHECK_FAIL("block %p: head overwritten (0x%zx)", block_to_ptr(b), head_load(b));
            if (block_is_prev_free(b) != prev_free)
                CHECK_FAIL("block %p: prev-free flag wrong", block_to_ptr(b));
            if (b == sentinel) break;
            if (block_is_free(b)) {
                if (prev_free) CHECK_FAIL("block %p: two adjacent free blocks", block_to_ptr(b));
                if (prev_phys_load(block_next(b)) != b)
                    CHECK_FAIL("block %p: boundary tag wrong", block_to_ptr(b));
                if (head_load(b) & HEAD_ALIGN_MASK)
                    CHECK_FAIL("block %p: free block with an alignment", block_to_ptr(b));
                walked_free++;
                walked_free_bytes += block_size(b);
            } else {
                walked_used++;
            }
            prev_free = block_is_free(b);
            b = block_next(b);
        }
    }
    if (pools != t->pool_count || pool_bytes != t->pool_bytes || block_bytes != t->block_bytes)
        CHECK_FAIL("pool counters wrong");

    size_t listed = 0;
    for (int fl = 0; fl < FL_INDEX_COUNT; fl++) {
        if (((t->fl_bitmap >> fl) & 1) != (t->sl_bitmap[fl] != 0))
            CHECK_FAIL("first-level bitmap wrong at %d", fl);
        for (int sl = 0; sl < SL_INDEX_COUNT; sl++) {
            const block_t *head = t->blocks[fl][sl];
            if (((t->sl_bitmap[fl] >> sl) & 1) != (head != NULL))
                CHECK_FAIL("second-level bitmap wrong at %d/%d", fl, sl);
            const block_t *prev = NULL;
            for (const block_t *b = head; b; b = b->next_free) {
                int bfl, bsl;
                if (!block_is_free(b)) CHECK_FAIL("block %p: listed but used", block_to_ptr(b));
                mapping_insert(block_size(b), &bfl, &bsl);
                if (bfl != fl || bsl != sl)
                    CHECK_FAIL("block %p: in the wrong list", block_to_ptr(b));
                if (b->prev_free != prev) CHECK_FAIL("block %p: list link wrong", block_to_ptr(b));
                prev = b;
                if (++listed > walked_free) CHECK_FAIL("free lists longer than the free blocks");
            }
        }
    }
    if (listed != walked_free) CHECK_FAIL("%zu free blocks, %zu listed", walked_free, listed);
    if (walked_free != t->free_blocks || walked_free_bytes != t->free_bytes)
        CHECK_FAIL("free counters wrong");
    if (walked_used != t->used_blocks)
        CHECK_FAIL("used counter wrong (%zu walked, %zu counted)", walked_used, t->used_blocks);
    if (cap) msg[0] = '\0';
    return 0;
}
