/*
 * tlsf_unit.c — unit test of the TLSF core (native/tlsf.c, native/tlsf_grow.c) without the
 * heaphook core: random sequences checked against a shadow model, alignment, in-place
 * realloc, validation of bad frees, growth. Prints "N passed, N failed" and exits non-zero
 * on failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tlsf.h"
#include "tlsf_grow.h"

static int passed, failed;
#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (cond) {                                                         \
            passed++;                                                       \
        } else {                                                            \
            failed++;                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
        }                                                                   \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void *map(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static tlsf_t *make_heap(size_t pool) {
    void *control = map(tlsf_control_size());
    tlsf_t *t = tlsf_create(control, 7);
    if (pool) tlsf_add_pool(t, map(pool), pool);
    return t;
}

static int heap_ok(tlsf_t *t) {
    char msg[256];
    if (tlsf_check(t, msg, sizeof msg) == 0) return 1;
    fprintf(stderr, "check: %s\n", msg);
    return 0;
}

#define SLOTS 512
typedef struct slot {
    unsigned char *p;
    size_t size;
    size_t align;
    unsigned char fill;
} slot;

static int contents_ok(const slot *s) {
    for (size_t i = 0; i < s->size; i++)
        if (s->p[i] != s->fill) return 0;
    return 1;
}

static void test_random(void) {
    tlsf_t *t = make_heap(64 << 20);
    slot slots[SLOTS] = {0};
    int bad_contents = 0, bad_align = 0, bad_size = 0, bad_check = 0;
    for (int step = 0; step < 200000; step++) {
        slot *s = &slots[next_rand() % SLOTS];
        const unsigned op = next_rand() % 10;
        if (s->p && op < 4) {
            if (!contents_ok(s)) bad_contents++;
            if (tlsf_block_owner(s->p) != 7) bad_contents++;
            tlsf_free(t, s->p);
            s->p = NULL;
        } else if (s->p && op < 6) {
            size_t size = 1 + next_rand() % (next_rand() % 4 == 0 ? 20000 : 300);
            if (!contents_ok(s)) bad_contents++;
            void *q = tlsf_resize(t, s->p, size);
            if (q) {
                if (q != s->p) bad_contents++;
                if (size < s->size) s->size = size;
                memset(s->p, s->fill, size);
                s->size = size;
                if (tlsf_block_size(s->p) < size) bad_size++;
                if ((uintptr_t)s->p % s->align) bad_align++;
            }
        } else if (!s->p) {
            size_t size = 1 + next_rand() % (next_rand() % 8 == 0 ? 100000 : 256);
            size_t align = next_rand() % 4 == 0 ? (size_t)1 << (next_rand() % 17) : 1;
            unsigned char *p = tlsf_memalign(t, align, size);
            if (!p) continue;
            s->p = p;
            s->size = size;
            s->align = align < 16 ? 16 : align;
            s->fill = (unsigned char)next_rand();
            memset(p, s->fill, size);
            if ((uintptr_t)p % s->align) bad_align++;
            if (tlsf_block_size(p) < size) bad_size++;
            if (tlsf_block_align(p) != s->align) bad_align++;
        }
        if (step % 5000 == 0 && !heap_ok(t)) bad_check++;
    }
    EXPECT(bad_contents == 0, "%d blocks lost their contents (overlap)", bad_contents);
    EXPECT(bad_align == 0, "%d misaligned", bad_align);
    EXPECT(bad_size == 0, "%d too small", bad_size);
    EXPECT(bad_check == 0, "%d integrity failures", bad_check);
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p) tlsf_free(t, slots[i].p);
    tlsf_stats st;
    tlsf_get_stats(t, &st);
    EXPECT(st.used_blocks == 0 && st.free_blocks == 1,
           "everything coalesces back: %zu used %zu free", st.used_blocks, st.free_blocks);
    EXPECT(st.largest_free == st.pool_bytes - TLSF_POOL_OVERHEAD - TLSF_BLOCK_OVERHEAD,
           "largest free %zu", st.largest_free);
    EXPECT(heap_ok(t), "final check");
}

static void test_overhead_and_inplace(void) {
    tlsf_t *t = make_heap(1 << 20);
    tlsf_stats before, after;
    tlsf_get_stats(t, &before);
    char *a = tlsf_malloc(t, 100);
    tlsf_get_stats(t, &after);
    EXPECT(after.used_bytes <= 100 + 8 + 15, "one word of overhead: used %zu", after.used_bytes);
    EXPECT(((uintptr_t)a & 15) == 0, "16-byte aligned");
    char *b = tlsf_malloc(t, 100);
    char *c = tlsf_malloc(t, 100);
    tlsf_free(t, b);
    EXPECT(tlsf_resize(t, a, 200) == a, "grows into the free successor");
    EXPECT(tlsf_resize(t, a, 5000) == NULL, "cannot grow past a used block");
    EXPECT(tlsf_resize(t, c, 5000) == c, "last block grows into the pool");
    EXPECT(tlsf_resize(t, c, 16) == c, "shrinks in place");
    EXPECT(heap_ok(t), "check");
    tlsf_free(t, a);
    tlsf_free(t, c);
    tlsf_get_stats(t, &after);
    EXPECT(after.free_blocks == 1 && after.used_blocks == 0, "coalesced");
    /* Big alignments. */
    for (int log2 = 4; log2 <= 18; log2++) {
        void *p = tlsf_memalign(t, (size_t)1 << log2, 24);
        EXPECT(p && ((uintptr_t)p & (((size_t)1 << log2) - 1)) == 0, "align 2^%d", log2);
        void *q = tlsf_resize(t, p, 3000);
        if (q) EXPECT(q == p && tlsf_block_align(q) == ((size_t)1 << log2), "aligned resize keeps");
        tlsf_free(t, p);
    }
    EXPECT(heap_ok(t), "check after aligned");
    tlsf_get_stats(t, &after);
    EXPECT(after.free_blocks == 1, "aligned gaps coalesce back");
    EXPECT(tlsf_malloc(t, 2 << 20) == NULL, "too large for the pool");
    EXPECT(tlsf_malloc(t, (size_t)1 << 60) == NULL, "absurd size");
    EXPECT(tlsf_pool_need((size_t)1 << 60, 1) == 0, "absurd size needs no pool");
}

static void test_validate(void) {
    tlsf_t *t = make_heap(1 << 20);
    const void *where;
    char *a = tlsf_malloc(t, 64);
    char *b = tlsf_malloc(t, 64);
    char *c = tlsf_malloc(t, 64);
    EXPECT(tlsf_validate(t, a, &where) == TLSF_OK, "valid");
    int local;
    EXPECT(tlsf_validate(t, &local, &where) == TLSF_ERR_FOREIGN, "foreign");
    EXPECT(tlsf_validate(t, a + 16, &where) == TLSF_ERR_INTERIOR, "interior");
    EXPECT(tlsf_validate(t, a + 3, &where) == TLSF_ERR_INTERIOR, "misaligned interior");
    tlsf_free(t, b);
    EXPECT(tlsf_validate(t, b, &where) == TLSF_ERR_DOUBLE_FREE, "double free");
    tlsf_free(t, a); /* merges with b */
    EXPECT(tlsf_validate(t, b, &where) == TLSF_ERR_DOUBLE_FREE, "double free after merge");
    EXPECT(tlsf_validate(t, a, &where) == TLSF_ERR_DOUBLE_FREE, "double free of the merged");
    char *d = tlsf_malloc(t, 64);
    char *e = tlsf_malloc(t, 64);
    memset(d, 0x41, tlsf_block_size(d) + 8); /* overflow into e's head */
    EXPECT(tlsf_validate(t, e, &where) == TLSF_ERR_HEADER && where == e, "overwritten head");
    EXPECT(tlsf_validate(t, d, &where) == TLSF_ERR_HEADER && where == e, "neighbour overwritten");
    memset(c - 8, 0, 8);
    EXPECT(tlsf_validate(t, c, &where) == TLSF_ERR_HEADER, "zeroed head");
    char msg[200];
    EXPECT(tlsf_check(t, msg, sizeof msg) != 0, "check notices");
}

static size_t grew_log[64];
static size_t grew_count;
static void *grow_map(void *ctx, size_t bytes) {
    (void)ctx;
    return map(bytes);
}
static void grow_grew(void *ctx, size_t added, size_t total, size_t count) {
    (void)ctx;
    (void)total;
    (void)count;
    grew_log[grew_count++] = added;
}

static void test_growth(void) {
    void *control = map(tlsf_control_size());
    tlsf_growing g;
    tlsf_grow_ops ops = {grow_map, NULL, grow_grew, NULL};
    EXPECT(tlsf_growing_init(&g, tlsf_create(control, 0), 1 << 20, 1 << 20, &ops) == 0, "init");
    void *p = tlsf_growing_alloc(&g, 7 << 20, 1);
    EXPECT(p != NULL, "grown allocation");
    EXPECT(grew_count == 4 && grew_log[0] == 1 << 20 && grew_log[1] == 2 << 20 &&
               grew_log[2] == 4 << 20 && grew_log[3] == 8 << 20,
           "N, 2N, 4N, 8N (got %zu additions)", grew_count);
    EXPECT(g.growth_count == 4 && g.total == (1 << 20) + (15 << 20), "totals");
    void *q = tlsf_growing_alloc(&g, 3 << 20, 1);
    EXPECT(q != NULL && grew_count == 4, "served from an earlier addition");
    errno = 0;
    EXPECT(tlsf_growing_alloc(&g, (size_t)1 << 50, 1) == NULL && errno == ENOMEM,
           "too large fails at once");
    EXPECT(grew_count == 4, "no growth for an impossible request");
    void *r = tlsf_growing_alloc(&g, 100, 1 << 22);
    EXPECT(r && ((uintptr_t)r & ((1 << 22) - 1)) == 0, "aligned with growth");
    EXPECT(heap_ok(g.tlsf), "check");
}

/* tlsf_free_span and the clean flag: which pages a free may give back. */
static void test_clean_spans(void) {
    const size_t page = 4096, pool = 4 << 20;
    void *control = map(tlsf_control_size());
    tlsf_t *t = tlsf_create(control, 7);
    char *mem = map(pool);
    EXPECT(tlsf_add_pool_clean(t, mem, pool) == 0, "clean pool");
    EXPECT(heap_ok(t), "a clean pool passes the check");
    char *a = tlsf_malloc(t, 200 << 10);
    char *b = tlsf_malloc(t, 200 << 10);
    char *c = tlsf_malloc(t, 100);
    memset(a, 1, 200 << 10);
    memset(b, 2, 200 << 10);
    uintptr_t lo, hi;
    /* a: no free neighbour; its pages but the one holding its head and links. */
    void *fa = tlsf_free_span(t, a, page, &lo, &hi);
    EXPECT(fa == a, "a is the free block");
    EXPECT(lo % page == 0 && hi % page == 0, "whole pages");
    EXPECT(lo >= (uintptr_t)a + 16 && hi <= (uintptr_t)a + (200 << 10), "inside a: %p-%p of %p",
           (void *)lo, (void *)hi, (void *)a);
    EXPECT(hi - lo >= (200 << 10) - 2 * page, "nearly all of a: %zu", (size_t)(hi - lo));
    tlsf_mark_clean(fa);
    EXPECT(heap_ok(t), "check after mark_clean");
    /* b merges with a (clean) and nothing else: only b's pages (rounded out) are reported. */
    void *fb = tlsf_free_span(t, b, page, &lo, &hi);
    EXPECT(fb == a, "b merged into a");
    EXPECT(lo >= ((uintptr_t)b & ~(page - 1)) && hi <= (uintptr_t)b + (200 << 10) + page,
           "b's pages only: %p-%p, b %p", (void *)lo, (void *)hi, (void *)b);
    EXPECT(hi - lo >= (200 << 10) - page, "all of b's pages: %zu", (size_t)(hi - lo));
    tlsf_mark_clean(fb);
    /* A block split from a clean block leaves a clean rest: freeing it reports its own pages. */
    char *d = tlsf_malloc(t, 64 << 10);
    void *fd = tlsf_free_span(t, d, page, &lo, &hi);
    EXPECT(hi - lo <= (64 << 10) + 2 * page, "a clean neighbour is not reported again: %zu",
           (size_t)(hi - lo));
    tlsf_mark_clean(fd);
    /* A neighbour freed without release is dirty: reported with the next free next to it. */
    char *e = tlsf_malloc(t, 300 << 10);
    char *f = tlsf_malloc(t, 100);
    tlsf_free(t, e);
    void *ff = tlsf_free_span(t, f, page, &lo, &hi);
    EXPECT(lo <= (uintptr_t)e + page && hi >= (uintptr_t)e + (300 << 10) - page,
           "the dirty neighbour's pages: %p-%p, e %p", (void *)lo, (void *)hi, (void *)e);
    (void)ff;
    EXPECT(heap_ok(t), "check after dirty merge");
    /* A plain pool is dirty: its first free reports the pages around the freed block. */
    tlsf_free(t, c);
    tlsf_stats st;
    tlsf_get_stats(t, &st);
    EXPECT(st.used_blocks == 0 && st.free_blocks == 1, "coalesced: %zu used %zu free",
           st.used_blocks, st.free_blocks);
    EXPECT(tlsf_used_bytes(t) == 0, "used bytes %zu", tlsf_used_bytes(t));
    EXPECT(heap_ok(t), "final check");
    /* The clean bit is for free blocks only: on a used block it is a corrupted head. */
    char *g = tlsf_malloc(t, 100);
    size_t *head = (size_t *)(g - 8);
    *head |= (size_t)1 << 3;
    const void *where;
    EXPECT(tlsf_validate(t, g, &where) == TLSF_ERR_HEADER, "clean bit on a used block");
    char msg[128];
    EXPECT(tlsf_check(t, msg, sizeof msg) != 0, "the check sees it too");
    *head &= ~((size_t)1 << 3);
    EXPECT(heap_ok(t), "repaired");
}

/* tlsf_trim: every free block's whole interior pages, once each, none of a used block's. */
typedef struct trim_record {
    uintptr_t lo[64], hi[64];
    int count;
} trim_record;
static void record_discard(void *addr, size_t bytes, void *user) {
    trim_record *r = user;
    if (r->count < 64) {
        r->lo[r->count] = (uintptr_t)addr;
        r->hi[r->count] = (uintptr_t)addr + bytes;
    }
    r->count++;
}

static void test_trim(void) {
    const size_t page = 4096, pool = 4 << 20;
    tlsf_t *t = make_heap(0);
    char *mem = map(pool);
    EXPECT(tlsf_add_pool(t, mem, pool) == 0, "pool");
    enum { N = 8 };
    char *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = tlsf_malloc(t, 100 << 10);
        memset(blocks[i], 0x5a, 100 << 10);
    }
    for (int i = 0; i < N; i += 2) tlsf_free(t, blocks[i]); /* four free blocks, kept apart */
    trim_record r = {0};
    const size_t given = tlsf_trim(t, page, 0, 0, record_discard, &r);
    /* The four freed blocks and the pool's free tail: five ranges of whole pages. */
    EXPECT(r.count == 5, "ranges: %d", r.count);
    size_t sum = 0;
    for (int k = 0; k < r.count && k < 64; k++) {
        EXPECT(r.lo[k] % page == 0 && r.hi[k] % page == 0 && r.hi[k] > r.lo[k], "whole pages");
        for (int i = 1; i < N; i += 2) /* never a page of a used block (nor its head's page) */
            EXPECT(r.hi[k] <= ((uintptr_t)blocks[i] & ~(page - 1)) ||
                       r.lo[k] >= (uintptr_t)blocks[i] + (100 << 10),
                   "range %p-%p overlaps used block %p", (void *)r.lo[k], (void *)r.hi[k],
                   (void *)blocks[i]);
        sum += r.hi[k] - r.lo[k];
    }
    EXPECT(given == sum, "returns what it handed over: %zu vs %zu", given, sum);
    EXPECT(given >= pool - 5 * (100 << 10) - 12 * page, "nearly all free memory: %zu", given);
    /* Given back once: the blocks are clean now, a second pass skips them (unless clean_too). */
    trim_record again = {0};
    EXPECT(tlsf_trim(t, page, 0, 0, record_discard, &again) == 0 && again.count == 0,
           "second pass: %d ranges", again.count);
    EXPECT(tlsf_trim(t, page, 0, 1, record_discard, &again) == given, "clean_too: all again");
    /* keep: the first free blocks met, smallest classes first, up to that many bytes, stay. */
    for (int i = 1; i < N; i += 2) tlsf_free(t, blocks[i]); /* all merge: one free block */
    tlsf_stats st;
    tlsf_get_stats(t, &st);
    EXPECT(st.free_blocks == 1, "one free block: %zu", st.free_blocks);
    trim_record kept = {0};
    EXPECT(tlsf_trim(t, page, 1, 1, record_discard, &kept) == 0 && kept.count == 0,
           "a keep of 1 byte keeps the one block");
    EXPECT(heap_ok(t), "check after trims");
    /* What was given back reads as zero and is usable again. */
    char *z = tlsf_malloc(t, 1 << 20);
    EXPECT(z != NULL, "allocates after a trim");
    memset(z, 1, 1 << 20);
    EXPECT(heap_ok(t), "final check");
}

/* tlsf_trim_largest: the unclean free blocks of the largest classes first, no more than the
 * visits given (a free that nearly empties a heap calls it: its work must stay bounded). */
static void test_trim_largest(void) {
    const size_t page = 4096;
    tlsf_t *t = make_heap(0);
    /* Three pools, wholly free and unclean: 1, 2 and 3 MiB. */
    char *pools[3];
    for (int i = 0; i < 3; i++) {
        pools[i] = map((size_t)(i + 1) << 20);
        EXPECT(tlsf_add_pool(t, pools[i], (size_t)(i + 1) << 20) == 0, "pool %d", i);
    }
    trim_record r = {0};
    const size_t given = tlsf_trim_largest(t, page, 2, record_discard, &r);
    EXPECT(r.count == 2, "two blocks looked at, two given back: %d", r.count);
    for (int k = 0; k < r.count && k < 64; k++)
        EXPECT(!(r.lo[k] >= (uintptr_t)pools[0] && r.lo[k] < (uintptr_t)pools[0] + (1u << 20)),
               "from the 2 and 3 MiB pools, not the 1 MiB one");
    EXPECT(given >= (5u << 20) - 8 * page, "nearly all of them: %zu", given);
    /* The clean blocks count as visits: with two, the 1 MiB pool is not reached. */
    trim_record again = {0};
    EXPECT(tlsf_trim_largest(t, page, 2, record_discard, &again) == 0 && again.count == 0,
           "clean blocks are looked at, not given back twice: %d", again.count);
    EXPECT(tlsf_trim_largest(t, page, 3, record_discard, &again) >= (1u << 20) - 8 * page &&
               again.count == 1,
           "a third visit reaches the smallest: %d", again.count);
    EXPECT(heap_ok(t), "check after trims");
}

/* tlsf_growing_realloc: the backend's realloc policy, as the addon's replay runs it. */
static void test_growing_realloc(void) {
    void *control = map(tlsf_control_size());
    tlsf_growing g;
    tlsf_grow_ops ops = {grow_map, NULL, grow_grew, NULL};
    EXPECT(tlsf_growing_init(&g, tlsf_create(control, 0), 1 << 20, 1 << 20, &ops) == 0, "init");
    const size_t grown_before = g.growth_count;
    char *a = tlsf_growing_alloc(&g, 8192, 1);
    char *wall = tlsf_growing_alloc(&g, 100, 1); /* a cannot grow in place */
    memset(a, 7, 8192);
    char *b = tlsf_growing_realloc(&g, a, 16384, 1);
    EXPECT(b && b != a, "moved");
    EXPECT(tlsf_block_size(b) >= 16384 + 4096, "a quarter more room: %zu", tlsf_block_size(b));
    EXPECT(b[0] == 7 && b[8191] == 7, "contents copied");
    EXPECT(tlsf_growing_realloc(&g, b, 20000, 1) == b, "growth within the room stays");
    EXPECT(tlsf_growing_realloc(&g, b, tlsf_block_size(b) - 100, 1) == b, "small shrink stays");
    EXPECT(tlsf_growing_realloc(&g, b, 100, 1) == b, "a large shrink is in place");
    EXPECT(tlsf_block_size(b) < 1024, "and gives the tail back: %zu", tlsf_block_size(b));
    char *small = tlsf_growing_alloc(&g, 1000, 1);
    EXPECT(tlsf_growing_realloc(&g, small, 2000, 1) != NULL, "below a page: no room asked");
    /* When the room does not fit in the pool but the size does, the pool does not grow. */
    char *big = tlsf_growing_alloc(&g, 100, 1);
    char *grown = tlsf_growing_realloc(&g, big, 900 << 10, 0);
    EXPECT(grown != NULL && g.growth_count == grown_before, "served without growth (%zu)",
           g.growth_count - grown_before);
    EXPECT(tlsf_block_size(grown) >= (900 << 10), "at least the size asked");
    EXPECT(heap_ok(g.tlsf), "check");
    (void)wall;
}

/* tlsf_join_used, as the thread cache's spill uses it: a run of adjacent used blocks joined
 * into one, freed with one tlsf_free, leaves the heap as freeing each would. */
static void test_join_used(void) {
    tlsf_t *t = make_heap(1 << 20);
    enum { RUN = 8 };
    char *b[RUN];
    for (int i = 0; i < RUN; i++) b[i] = tlsf_malloc(t, 100);
    char *keep = tlsf_malloc(t, 100); /* so the run's successor is a used block */
    for (int i = 1; i < RUN; i++)
        EXPECT(b[i] == b[i - 1] + tlsf_block_size(b[0]) + 8, "consecutive blocks %d", i);
    tlsf_stats s;
    /* Upwards from the middle, then the run's first block absorbs the joined rest. */
    for (int i = RUN / 2 + 1; i < RUN; i++) tlsf_join_used(t, b[RUN / 2], b[i]);
    for (int i = 1; i <= RUN / 2; i++) tlsf_join_used(t, b[0], b[i]);
    tlsf_get_stats(t, &s);
    EXPECT(s.used_blocks == 2, "one block for the run, one kept: %zu", s.used_blocks);
    EXPECT(tlsf_block_size(b[0]) == RUN * (tlsf_block_size(keep) + 8) - 8, "the run's size: %zu",
           tlsf_block_size(b[0]));
    EXPECT(heap_ok(t), "check after joining");
    tlsf_free(t, b[0]);
    EXPECT(heap_ok(t), "check after the run's free");
    char *again = tlsf_malloc(t, RUN * 100);
    EXPECT(again == b[0], "the run's memory is one free block again");
    tlsf_free(t, again);
    tlsf_free(t, keep);
    tlsf_get_stats(t, &s);
    EXPECT(s.free_blocks == 1 && s.used_blocks == 0, "all coalesced");
}

/* tlsf_split_used, as the thread cache's refill uses it: one used block becomes n used blocks
 * of one footprint (the last one the rest), each freed on its own as any block is. */
static void test_split_used(void) {
    tlsf_t *t = make_heap(1 << 20);
    enum { N = 8, F = 112 };
    char *run = tlsf_malloc(t, N * F - 8 + 16); /* 16 bytes more: the last block keeps them */
    char *keep = tlsf_malloc(t, 100);
    tlsf_split_used(t, run, F, N);
    tlsf_stats s;
    tlsf_get_stats(t, &s);
    EXPECT(s.used_blocks == N + 1, "the run's blocks and the one kept: %zu", s.used_blocks);
    for (int i = 0; i < N - 1; i++)
        EXPECT(tlsf_block_size(run + i * F) == F - 8, "block %d's size: %zu", i,
               tlsf_block_size(run + i * F));
    EXPECT(tlsf_block_size(run + (N - 1) * F) == F + 16 - 8, "the last block's size: %zu",
           tlsf_block_size(run + (N - 1) * F));
    EXPECT(heap_ok(t), "check after splitting");
    for (int i = 0; i < N; i += 2) tlsf_free(t, run + i * F);
    EXPECT(heap_ok(t), "check after freeing every other block");
    for (int i = 1; i < N; i += 2) tlsf_free(t, run + i * F);
    EXPECT(heap_ok(t), "check after freeing the rest");
    char *again = tlsf_malloc(t, N * F - 8 + 16);
    EXPECT(again == run, "the run's memory is one free block again");
    tlsf_free(t, again);
    tlsf_free(t, keep);
    tlsf_get_stats(t, &s);
    EXPECT(s.free_blocks == 1 && s.used_blocks == 0, "all coalesced");
}

/* A free block of exactly the size asked for serves the request, although the rounded search
 * (which guarantees a fit without walking a list) looks only in the classes above its own: a
 * hole one block wide among used blocks is reused, not left while the heap's remainder is cut. */
static void test_exact_class_fit(void) {
    tlsf_t *t = make_heap(1 << 20);
    const size_t sizes[] = {600, 1032, 1500, 4000, 20000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *before = tlsf_malloc(t, sizes[i]);
        char *hole = tlsf_malloc(t, sizes[i]);
        char *after = tlsf_malloc(t, sizes[i]);
        tlsf_free(t, hole);
        char *again = tlsf_malloc(t, sizes[i]);
        EXPECT(again == hole, "size %zu: the hole %p is reused, got %p", sizes[i], (void *)hole,
               (void *)again);
        /* A request one step larger than the hole does not fit it: it is served elsewhere. */
        tlsf_free(t, again);
        char *larger = tlsf_malloc(t, sizes[i] + 16);
        EXPECT(larger != hole, "size %zu: a larger request is not put in the hole", sizes[i]);
        EXPECT(heap_ok(t), "check after size %zu", sizes[i]);
        tlsf_free(t, larger);
        tlsf_free(t, before);
        tlsf_free(t, after);
    }
    tlsf_stats s;
    tlsf_get_stats(t, &s);
    EXPECT(s.free_blocks == 1 && s.used_blocks == 0, "all coalesced");
}

int main(void) {
    test_random();
    test_overhead_and_inplace();
    test_validate();
    test_growth();
    test_clean_spans();
    test_trim();
    test_trim_largest();
    test_growing_realloc();
    test_join_used();
    test_split_used();
    test_exact_class_fit();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
