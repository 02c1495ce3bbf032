/*
 * backend_heaps.c — thread heaps: each thread's own TLSF heap of chunks borrowed from the shared
 * heap, its cache of freed blocks and the stack of blocks other threads freed; and the
 * backend's entry points (malloc, free, realloc, malloc_usable_size), whose fast paths are
 * here. See tlsf_backend.c for the overview.
 */
#include "backend_internal.h"

thread_heap *heaps[THREAD_HEAPS_MAX + 1];
_Atomic unsigned heap_count;
pthread_key_t heap_key;
__thread thread_heap *t_heap __attribute__((tls_model("initial-exec")));
__thread bool t_no_heap __attribute__((tls_model("initial-exec")));

/*
 * Thread heaps.
 */
static void cache_flush(thread_heap *h, size_t max);

/* At its thread's exit: the cache is flushed whole (its blocks coalesce, nothing waits for an
 * adopter: a thread's exit is no real-time path), and
 * the heap is left for the next new thread. */
void heap_release(void *arg) {
    thread_heap *h = (thread_heap *)arg;
    if (atomic_load_explicit(&h->trim_wanted, memory_order_relaxed))
        trim_thread_heap(h, 0); /* flushes the cache too */
    cache_flush(h, SIZE_MAX);
    remote_batch_flush(h);
    t_heap = NULL;
    t_no_heap = true; /* what this thread still allocates while exiting goes to the shared heap */
    atomic_store_explicit(&h->state, HEAP_FREE, memory_order_release);
}

static thread_heap *heap_adopt(void) {
    t_no_heap = true; /* allocations made while adopting (pthread_setspecific) go shared */
    thread_heap *h = NULL;
    shared_lock_take();
    const unsigned count = atomic_load_explicit(&heap_count, memory_order_relaxed);
    for (unsigned id = 1; id <= count; id++) {
        if (atomic_load_explicit(&heaps[id]->state, memory_order_acquire) == HEAP_FREE) {
            h = heaps[id];
            break;
        }
    }
    if (!h && count < THREAD_HEAPS_MAX) {
        /* The heap's own structure is a block of the pool: prefaulted and locked with it. Its
         * last bytes, which may share a cache line with the next block of the pool, are the
         * control's list heads of the largest sizes, which a thread heap never uses (the
         * counters every call writes are at the control's start). */
        void *mem = shared_alloc_locked(sizeof(thread_heap) + tlsf_control_size(), 64);
        if (mem) {
            memset(mem, 0, sizeof(thread_heap));
            h = (thread_heap *)mem;
            for (unsigned cls = CACHE_CLASS_MIN; cls < CACHE_CLASSES; cls++)
                h->cache_room[cls] = (uint16_t)cfg.cache_depth;
            h->cache_left = cfg.cache_bytes;
            h->id = count + 1;
            h->tlsf = tlsf_create(h->control, h->id);
            heaps[h->id] = h;
            atomic_store_explicit(&heap_count, h->id, memory_order_release);
        }
    }
    if (h) atomic_store_explicit(&h->state, HEAP_OWNED, memory_order_relaxed);
    shared_lock_give();
    if (!h) return NULL; /* more than 255 threads at once: this one uses the shared heap */
    t_heap = h;
    pthread_setspecific(heap_key, h);
    t_no_heap = false;
    return h;
}

/* Pushes the chain first .. last (linked through their first words) on h's remote stack. */
static void remote_push_chain(thread_heap *h, void *first, void *last) {
    void *head = atomic_load_explicit(&h->remote, memory_order_relaxed);
    do {
        *(void **)last = head;
    } while (!atomic_compare_exchange_weak_explicit(&h->remote, &head, first, memory_order_release,
                                                    memory_order_relaxed));
}

static void remote_push(thread_heap *h, void *ptr) {
    remote_push_chain(h, ptr, ptr);
}

/* Pushes what h's thread holds back for another heap (see REMOTE_BATCH_MAX), if anything. */
void remote_batch_flush(thread_heap *h) {
    if (!h->batch_to) return;
    remote_push_chain(h->batch_to, h->batch_head, h->batch_tail);
    h->batch_to = NULL;
    h->batch_count = 0;
    h->batch_bytes = 0;
}

/* Frees ptr, a block of heap o (not h), from h's thread: held back with the blocks freed into o
 * last, and pushed with them when they come to REMOTE_BATCH_MAX or REMOTE_BATCH_BYTES. A block
 * of another heap than the batch's pushes the batch first: one batch at a time, so what is held
 * back stays bounded whatever the number of heaps. */
static __attribute__((noinline)) void remote_batch_add(thread_heap *h, thread_heap *o, void *ptr,
                                                       size_t bytes) {
    if (h->batch_to != o) {
        remote_batch_flush(h);
        h->batch_to = o;
        h->batch_tail = ptr;
        *(void **)ptr = NULL;
    } else {
        *(void **)ptr = h->batch_head;
    }
    h->batch_head = ptr;
    h->batch_bytes += bytes;
    if (++h->batch_count == REMOTE_BATCH_MAX || h->batch_bytes >= REMOTE_BATCH_BYTES)
        remote_batch_flush(h);
}

/* The largest request the cache serves, and its class (footprint / 16) for size 1..that. */
#define CACHE_REQUEST_MAX (CACHE_CLASSES * 16 - 16 - BLOCK_OVERHEAD)
static inline unsigned cache_class(size_t size) {
    const unsigned cls = (unsigned)((size + BLOCK_OVERHEAD + ALIGN_SIZE - 1) >> 4);
    return cls < BLOCK_SIZE_MIN / 16 ? BLOCK_SIZE_MIN / 16 : cls;
}

/* Head bits of a block the leaf free path does not cache: free, aligned, footprint >= 2 KiB. */
#define CACHE_NOT_CACHED                        \
    (HEAD_FREE | HEAD_CLEAN | HEAD_ALIGN_MASK | \
     (HEAD_SIZE_MASK & ~(size_t)(CACHE_CLASSES * 16 - 1)))

/* The head bit of a block the cache leaves to TLSF although it could take it: its physical
 * predecessor is free (and its class holds other blocks already; see cache_put). Cached, the
 * block would keep that free block from growing by its size; given to TLSF, the two merge at
 * once. Only the predecessor is looked at, not the successor: blocks freed one after the other
 * in address order, as a batch is, then all go to the cache (each one's predecessor is cached,
 * hence used for TLSF), where a test of the successor sent a batch freed newest first to TLSF
 * block by block, each merging into the free block after it. Measured (peak RSS, 5 runs,
 * HEAPHOOK_TLSF_CACHE_BYTES at its default, medians): wl_mixed 8.35 MB -> 7.59 MB (glibc
 * 6.71 MB), wl_larson --threads 2 7.0 MB -> 6.5 MB (glibc 6.3 MB), but wl_batch 3.11 MB ->
 * 3.56 MB (glibc 2.68 MB). */
#define CACHE_NEXT_TO_FREE HEAD_PREV_FREE

_Static_assert(CACHE_DEPTH_MAX <= UINT16_MAX, "a class's room is 16 bits");

/* Frees at most max cached blocks (all h's own) into h's TLSF heap, the largest classes first
 * (the most bytes per free). */
static void cache_flush(thread_heap *h, size_t max) {
    for (unsigned cls = CACHE_CLASSES - 1; cls >= CACHE_CLASS_MIN && max > 0; cls--) {
        void **p;
        while (max > 0 && (p = (void **)h->cache_head[cls])) {
            h->cache_head[cls] = p[0];
            h->cache_room[cls]++;
            h->cache_left += (size_t)cls << 4;
            max--;
            p[1] = NULL;
            TLSF_ASSERT(tlsf_block_owner(p) == h->id);
            check_prev(p);
            tlsf_free(h->tlsf, p);
        }
    }
}

/* Pushes the block at p (of footprint cls * 16, checked) on its class's list, marked as cached
 * in its second word. */
static inline void cache_push(thread_heap *h, void **p, unsigned cls) {
    /* two plain stores: as relaxed atomics the compiler does not pair them through a vector
     * register (4 instructions instead of 2 on the leaf free) */
    void *const key = (void *)cache_key;
    __atomic_store_n(&p[0], h->cache_head[cls], __ATOMIC_RELAXED);
    __atomic_store_n(&p[1], key, __ATOMIC_RELAXED);
    h->cache_head[cls] = p;
    h->cache_room[cls]--;
    h->cache_left -= (size_t)cls << 4;
}

static __attribute__((noinline, noreturn)) void double_free(void *ptr) {
    misuse(ptr, "free", TLSF_ERR_DOUBLE_FREE, ptr);
}

/* Whether a block of footprint < 2 KiB that the cache could take goes to TLSF instead, to
 * merge with its free predecessor (see CACHE_NEXT_TO_FREE): not when its class is empty. */
static inline bool cache_leaves_to_tlsf(const thread_heap *h, size_t head) {
    return (head & CACHE_NEXT_TO_FREE) && h->cache_head[(head & HEAD_SIZE_MASK) >> 4] != NULL;
}

/* Keeps a freed block of h's own of footprint < 2 KiB in h's cache when the cache has room and
 * the block's physical predecessor is not free, or is free but the block's class is empty (a
 * malloc of its size will want it: merged, it would be split off again). Only a heap's own blocks
 * are ever cached: another heap's block goes back to its owner's remote stack with the few
 * freed into that heap last (remote_batch_add), so a thread never hands out memory that lies among
 * the blocks another thread's heap is splitting and merging (cache lines written by two threads,
 * Larson's pattern), and what a consumer frees reaches its producer without waiting in the
 * consumer's cache. Another block whose predecessor is free goes to TLSF, which merges the two (see
 * CACHE_NEXT_TO_FREE). */
static inline bool cache_put(thread_heap *h, void *ptr, size_t head) {
    if (UNLIKELY(head & HEAD_FREE)) double_free(ptr);
    const size_t f = head & HEAD_SIZE_MASK;
    if (f >= CACHE_CLASSES * 16 || (head & HEAD_ALIGN_MASK)) return false;
    const unsigned cls = (unsigned)(f >> 4);
    void **p = (void **)ptr;
    if (UNLIKELY(p[1] == (void *)cache_key)) {
        for (void **c = (void **)h->cache_head[cls]; c; c = (void **)c[0])
            if (c == p) double_free(ptr);
    }
    if (UNLIKELY(cache_leaves_to_tlsf(h, head))) return false;
    if (h->cache_room[cls] == 0 || h->cache_left < f) return false;
    cache_push(h, p, cls);
    return true;
}

/* Takes p, the head of class cls of h's cache, off it (its marker cleared). */
static inline void *cache_take(thread_heap *h, unsigned cls, void **p) {
    h->cache_head[cls] = p[0];
    h->cache_room[cls]++;
    h->cache_left += (size_t)cls << 4;
    p[1] = NULL;
    return p;
}

/* A miss in class cls (footprint f = cls * 16): one TLSF block for n blocks of the class
 * (CACHE_REFILL_MAX, CACHE_REFILL_BYTES and the cache's room bound n further), split; the first is
 * returned, the others cached, lowest address on top. NULL when n < 2 or TLSF has no block
 * that large (the caller then asks TLSF for one block). */
static void *cache_refill(thread_heap *h, unsigned cls, size_t n) {
    const size_t f = (size_t)cls << 4;
    if (n > CACHE_REFILL_BYTES / f) n = CACHE_REFILL_BYTES / f;
    if (n > CACHE_REFILL_MAX) n = CACHE_REFILL_MAX;
    if (n > (size_t)h->cache_room[cls] + 1) n = (size_t)h->cache_room[cls] + 1;
    /* the last block may be up to 16 bytes larger (a rest too small to split stays in it) */
    if (h->cache_left < ALIGN_SIZE) return NULL;
    if (n > (h->cache_left - ALIGN_SIZE) / f + 1) n = (h->cache_left - ALIGN_SIZE) / f + 1;
    if (n < 2) return NULL;
    char *p = tlsf_malloc(h->tlsf, n * f - BLOCK_OVERHEAD);
    if (UNLIKELY(p == NULL)) return NULL;
    tlsf_split_used(h->tlsf, p, f, (unsigned)n);
    /* the last one, of footprint f or f + 16, into its own class when it has room */
    char *last = p + (n - 1) * f;
    const size_t lf = head_load(block_from_ptr(last)) & HEAD_SIZE_MASK;
    const unsigned lcls = (unsigned)(lf >> 4);
    if (lcls < CACHE_CLASSES && h->cache_room[lcls] != 0 && h->cache_left >= lf)
        cache_push(h, (void **)last, lcls);
    else
        tlsf_free(h->tlsf, last);
    for (size_t i = n - 2; i >= 1; i--) cache_push(h, (void **)(p + i * f), cls);
    return p;
}

/* tlsf_free; gives pages back when the heap has been nearly emptied (see above), or, with the
 * trim threshold set, when the free leaves a free block that large (free_trimming). */
static inline void free_block(tlsf_t *t, release_state *r, void *ptr, size_t head) {
    check_prev(ptr);
    const size_t threshold = atomic_load_explicit(&cfg.trim_threshold, memory_order_relaxed);
    if (UNLIKELY(threshold)) {
        free_trimming(t, ptr, threshold);
        return;
    }
    if (LIKELY(cfg.release)) {
        const size_t used = tlsf_used_bytes(t);
        if (used > r->peak) r->peak = used;
        if (UNLIKELY(used - (head & HEAD_SIZE_MASK) <= r->peak / RELEASE_FRACTION) &&
            release_budget(r))
            free_release(t, r, ptr);
        else
            tlsf_free(t, ptr);
    } else {
        tlsf_free(t, ptr);
    }
}

/* Makes room in h's cache: the blocks cached last in one class go back, while they are
 * physically adjacent (at most CACHE_SPILL_MAX), joined with tlsf_join_used (a few stores
 * each) and given to TLSF with one free. So a batch of blocks freed in address order, either way,
 * costs one TLSF free per CACHE_SPILL_MAX blocks, and the worst case is one TLSF free. The class is
 * the first non-empty one at or below h->spill_cursor (CACHE_SPILL_SCAN looked at, at most;
 * wrapping), and the cursor moves on past it: over successive spills every class gives in turn, so
 * blocks of a size the program no longer asks for do not keep the cache's byte budget from the
 * sizes it asks for now. Returns false when it found no block. */
static bool cache_spill(thread_heap *h) {
    unsigned cls = h->spill_cursor;
    for (unsigned looked = 1; h->cache_head[cls] == NULL; looked++) {
        cls = cls > CACHE_CLASS_MIN ? cls - 1 : CACHE_CLASSES - 1;
        if (looked == CACHE_SPILL_SCAN) {
            h->spill_cursor = cls;
            return false;
        }
    }
    h->spill_cursor = cls > CACHE_CLASS_MIN ? cls - 1 : CACHE_CLASSES - 1;
    const size_t f = (size_t)cls << 4; /* a cached block's footprint is its class's */
    char *run = cache_take(h, cls, (void **)h->cache_head[cls]);
    size_t run_bytes = f;
    for (unsigned joined = 1; joined < CACHE_SPILL_MAX; joined++) {
        char *p = h->cache_head[cls];
        if (p == NULL) break;
        if (p == run + run_bytes) {
            tlsf_join_used(h->tlsf, run, cache_take(h, cls, (void **)p));
        } else if (p + f == run) {
            tlsf_join_used(h->tlsf, cache_take(h, cls, (void **)p), run);
            run = p;
        } else {
            break;
        }
        run_bytes += f;
    }
    free_block(h->tlsf, &h->release, run, head_load(block_from_ptr(run)));
    return true;
}

/* Frees a block of this thread's heap: into the cache when it has room (made by a spill when
 * the cache is full), else to TLSF. */
static inline void heap_free_own(thread_heap *h, void *ptr) {
    const size_t head = head_load(block_from_ptr(ptr));
    if (cache_put(h, ptr, head)) return;
    if ((head & HEAD_SIZE_MASK) < CACHE_CLASSES * 16 && !(head & HEAD_ALIGN_MASK) &&
        !cache_leaves_to_tlsf(h, head) && cache_spill(h) && cache_put(h, ptr, head))
        return;
    free_block(h->tlsf, &h->release, ptr, head);
}

/* Frees at most max blocks that other threads returned to h (at least one is there). */
static __attribute__((noinline)) void heap_drain_some(thread_heap *h, int max) {
    void *p = h->pending;
    if (!p) p = atomic_exchange_explicit(&h->remote, NULL, memory_order_acquire);
    for (int i = 0; p && i < max; i++) {
        void *next = *(void **)p;
        /* into the cache when it has room; no spill: a drain of DRAIN_SLOW blocks stays
         * DRAIN_SLOW TLSF frees at most */
        const size_t head = head_load(block_from_ptr(p));
        if (!cache_put(h, p, head)) free_block(h->tlsf, &h->release, p, head);
        p = next;
    }
    h->pending = p;
}

/* Frees at most max blocks that other threads returned to h; false when there were none (two
 * loads, inlined: the common case of every drain's turn). */
static inline bool heap_drain(thread_heap *h, int max) {
    if (LIKELY(!h->pending && !atomic_load_explicit(&h->remote, memory_order_relaxed)))
        return false;
    heap_drain_some(h, max);
    return true;
}

static inline void *heap_try(thread_heap *h, size_t size, size_t align) {
    return align > TLSF_ALIGN ? tlsf_memalign(h->tlsf, align, size) : tlsf_malloc(h->tlsf, size);
}

/* Borrows a chunk from the shared heap for a request (size, align) of h: a quarter of what h has
 * borrowed so far (CHUNK_MIN at least, CHUNK_MAX at most), so a heap of n bytes has borrowed it in
 * O(log n) chunks and holds at most a quarter more than it used. Chunks as large as all borrowed
 * so far (doubling) left the last one mostly unused, and allocations spread into it while freed
 * blocks of the earlier ones waited: peak RSS / glibc's wl_batch 1.41 -> 1.26, wl_xthread 1.02 ->
 * 0.79, wl_xmalloc 0.94 -> 0.87 (5 runs interleaved, medians); instructions within 1 %. */
static bool heap_add_chunk(thread_heap *h, size_t size, size_t align) {
    const size_t need = tlsf_pool_need(size, align);
    if (!need) return false;
    size_t want = h->chunk_bytes / 4 < CHUNK_MIN ? CHUNK_MIN : h->chunk_bytes / 4;
    if (want > CHUNK_MAX) want = CHUNK_MAX;
    if (want < need) want = need;
    const size_t least = need < CHUNK_MIN ? CHUNK_MIN : need;
    shared_lock_take();
    /* The preferred size if the pool has it, else the least that serves, else grow. */
    void *chunk = tlsf_malloc(shared.tlsf, want);
    if (!chunk && want > least) chunk = tlsf_malloc(shared.tlsf, least);
    if (!chunk) chunk = shared_alloc_locked(least, 1);
    shared_lock_give();
    if (!chunk) return false;
    const size_t bytes = tlsf_block_size(chunk);
    if (tlsf_add_pool(h->tlsf, chunk, bytes) != 0) {
        shared_lock_take();
        tlsf_free(shared.tlsf, chunk);
        shared_lock_give();
        return false;
    }
    h->chunk_bytes += bytes;
    return true;
}

/* The thread heap has no block for the request: blocks other threads gave back, then part of the
 * thread cache flushed (CACHE_FLUSH_MAX blocks, the largest first; before a chunk is borrowed,
 * so that cached blocks coalesce before more of the pool is taken: a thread heap keeps what it
 * borrows), then a chunk of the pool. */
static void *heap_alloc_slow(thread_heap *h, size_t size, size_t align) {
    void *p;
    if (UNLIKELY(atomic_load_explicit(&h->trim_wanted, memory_order_relaxed)))
        trim_thread_heap(h, 0);
    if (heap_drain(h, DRAIN_SLOW) && (p = heap_try(h, size, align))) return p;
    if (h->cache_left != cfg.cache_bytes) {
        cache_flush(h, CACHE_FLUSH_MAX);
        if ((p = heap_try(h, size, align))) return p;
    }
    if (heap_add_chunk(h, size, align) && (p = heap_try(h, size, align))) return p;
    return shared_alloc(size, align);
}

/* A heap's owner (or whoever holds it, see malloc_trim) trims it whole: its remote frees
 * drained and its cache flushed first, so those blocks coalesce and are given back too. */
size_t trim_thread_heap(thread_heap *h, size_t pad) {
    atomic_store_explicit(&h->trim_wanted, false, memory_order_relaxed);
    remote_batch_flush(h);  /* the blocks of other heaps, so that they trim them too */
    heap_drain(h, INT_MAX); /* every block other threads gave back so far */
    cache_flush(h, SIZE_MAX);
    return trim_heap(h->tlsf, pad);
}

/*
 * The backend's entry points.
 */
static void *alloc_slow(size_t size, size_t align);
static void *heap_alloc(thread_heap *h, size_t size, size_t align);
static void *heap_alloc_drain_turn(thread_heap *h, unsigned cls);

/* The common case, a cache hit, is a leaf: no call, no register saved. */
void *tlsf_backend_alloc(size_t size, size_t align) {
    thread_heap *h = t_heap;
    if (LIKELY(align == 1 && size <= CACHE_REQUEST_MAX && h != NULL)) {
        const unsigned cls = cache_class(size);
        void **p = (void **)h->cache_head[cls];
        if (LIKELY(p != NULL)) {
            if (LIKELY(--h->drain_tick != 0)) return cache_take(h, cls, p);
            return heap_alloc_drain_turn(h, cls);
        }
    }
    return heap_alloc(h, size, align);
}

/* A cache hit on the drain's turn (every DRAIN_EVERY hits): blocks other threads gave back are
 * taken first when there are any (two loads when there are none, the common case), then the
 * class's head (still there: a drain only adds to the cache). */
static __attribute__((noinline)) void *heap_alloc_drain_turn(thread_heap *h, unsigned cls) {
    h->drain_tick = DRAIN_EVERY;
    heap_drain(h, DRAIN_FAST);
    return cache_take(h, cls, (void **)h->cache_head[cls]);
}

/* A cache miss, or a request the cache does not serve. */
static __attribute__((noinline)) void *heap_alloc(thread_heap *h, size_t size, size_t align) {
    if (LIKELY(h != NULL)) {
        h->drain_tick = DRAIN_EVERY;
        heap_drain(h, DRAIN_FAST);
        remote_batch_flush(h);
        void **p = NULL;
        if (align == 1 && size <= CACHE_REQUEST_MAX) {
            const unsigned cls = cache_class(size);
            if ((p = (void **)h->cache_head[cls]) != NULL) return cache_take(h, cls, p);
            /* a class missed twice in a row or more is being allocated in a run: refilled,
             * with twice as many blocks at each miss of the run (2, 4, then 8) */
            if (h->miss_class == cls) {
                if (h->miss_run < 3) h->miss_run++;
                if ((p = cache_refill(h, cls, (size_t)1 << h->miss_run)) != NULL) return p;
            } else {
                h->miss_class = cls;
                h->miss_run = 0;
            }
        }
        p = heap_try(h, size, align);
        if (LIKELY(p != NULL)) return p;
        if (LIKELY(size < LARGE_REQUEST && align < LARGE_ALIGN))
            return heap_alloc_slow(h, size, align);
        /* A large request the thread heap's free memory cannot serve: the shared heap (no
         * chunk is borrowed for it). */
    }
    return alloc_slow(size, align);
}

static void *alloc_slow(size_t size, size_t align) {
    if (cfg.thread_heaps && !t_heap && !t_no_heap && heap_adopt())
        return tlsf_backend_alloc(size, align);
    return shared_alloc(size, align);
}

static void dealloc_slow(void *ptr);
static void heap_dealloc(thread_heap *h, void *ptr);
static void heap_dealloc_checked(thread_heap *h, void *ptr);

/* The common case, a push on the cache, is a leaf: a block of footprint < 2 KiB, not aligned,
 * not free (nor clean), not marked as cached, of this thread's heap, with room in its class.
 * Everything else (including the double-free checks) goes to heap_dealloc.
 *
 * The check on every free (see "Checks on every call") is folded into the same tests: one
 * compare puts the pointer, 16-byte aligned, in h's last area at least 2 KiB before its end;
 * the owner id is read with the heads' key taken off (one xor), so that a wrong tag makes it
 * larger than any heap's (the owner tests fail); CACHE_NOT_CACHED rejects a free or clean
 * head and bounds the size below 2 KiB (so the successor's head lies inside the area), and the
 * classes below the smallest block (0 and 1) have no room, so a size of 0 or 16 is not cached
 * either. Then the successor's head: the same top 12 bits, its tag and owner (one xor and one
 * shift). The owner is compared with h's id first: a block of h's own is in range by
 * construction, so only another heap's block pays for the range test. Whatever fails goes to
 * heap_dealloc_checked, which checks in full (the successor's flags too) and names the misuse;
 * a checked free that the cache cannot take goes to heap_dealloc. */
void tlsf_backend_dealloc(void *ptr) {
    thread_heap *h = t_heap;
    if (LIKELY(h != NULL)) {
        block_t *b = block_from_ptr(ptr);
        const size_t head = head_load(b);
        void **p = (void **)ptr;
#if TLSF_FREE_CHECK
        if (UNLIKELY(rotr4((uintptr_t)ptr - h->area.from) >= h->area.fast)) goto checked;
        /* The owner id read with the key taken off (tlsf.c): larger than any heap's id (the
         * owner tests below fail) unless the tag matches. */
        const unsigned owner = (unsigned)((head ^ tlsf_head_key) >> HEAD_OWNER_SHIFT);
        if (UNLIKELY(head & CACHE_NOT_CACHED)) goto checked;
        /* CACHE_NOT_CACHED passed: the size is below 2 KiB, the successor's head inside the
         * area. Its tag and owner: the very same top 12 bits as ours (its flags are left to
         * the full check: they add 2 bits to the 12 a damaged head must match by chance). */
        const size_t size = head & (CACHE_CLASSES * 16 - ALIGN_SIZE);
        const unsigned cls = (unsigned)(size >> 4);
        if (LIKELY(owner == h->id)) {
            const size_t nhead = head_load(block_at(b, size));
            if (UNLIKELY((nhead ^ head) >> HEAD_OWNER_SHIFT)) goto checked;
            if (LIKELY(!(head & CACHE_NEXT_TO_FREE) && h->cache_room[cls] != 0 &&
                       h->cache_left >= size && p[1] != (void *)cache_key)) {
                cache_push(h, p, cls);
                return;
            }
            /* Checked but not cached (its class or the cache is full, its predecessor is
             * free, or it may be cached already: the cache's own tests follow); a size of 0
             * or 16 (classes 0 and 1, no room) is no block. */
            if (LIKELY(cls >= CACHE_CLASS_MIN)) {
                heap_dealloc(h, ptr);
                return;
            }
        } else if (owner - 1 < atomic_load_explicit(&heap_count, memory_order_acquire) &&
                   !((head_load(block_at(b, size)) ^ head) >> HEAD_OWNER_SHIFT) &&
                   cls >= CACHE_CLASS_MIN) {
            remote_batch_add(h, heaps[owner], ptr, size); /* another heap's, checked: to it */
            return;
        }
    checked:
        heap_dealloc_checked(h, ptr);
        return;
#else
        const size_t size = head & HEAD_SIZE_MASK;
        const unsigned cls = (unsigned)(size >> 4);
        const unsigned owner = (unsigned)((head & HEAD_OWNER_MASK) >> HEAD_OWNER_SHIFT);
        if (LIKELY(!(head & (CACHE_NOT_CACHED | CACHE_NEXT_TO_FREE)) && owner == h->id &&
                   h->cache_room[cls] != 0 && h->cache_left >= size && p[1] != (void *)cache_key)) {
            cache_push(h, p, cls);
            return;
        }
#endif
    }
    heap_dealloc(h, ptr);
}

/* A free the leaf path did not cache: the full check (which names any misuse), then the free. */
static __attribute__((noinline, unused)) void heap_dealloc_checked(thread_heap *h, void *ptr) {
    if (UNLIKELY(!pointer_sane(ptr, head_load(block_from_ptr(ptr)), h->area.from, h->area.span)))
        check_slow(ptr, "free", &h->area);
    heap_dealloc(h, ptr);
}

static __attribute__((noinline)) void heap_dealloc(thread_heap *h, void *ptr) {
    if (UNLIKELY(h == NULL)) {
        check_pointer(ptr, "free");
        /* A thread that frees before it allocates (a consumer) takes its heap now: what it frees
         * of other heaps then goes back in batches, and its checks use the leaf path's. */
        if (cfg.thread_heaps && !t_no_heap) h = heap_adopt();
    }
    if (LIKELY(h != NULL)) {
        const size_t head = head_load(block_from_ptr(ptr));
        const unsigned owner =
            (unsigned)(head_owner_bits(block_from_ptr(ptr), head) >> HEAD_OWNER_SHIFT);
        if (LIKELY(owner == h->id)) {
            heap_free_own(h, ptr);
            return;
        }
        /* another heap's block goes back to its owner with the next few (see REMOTE_BATCH_MAX) */
        if (owner != 0 && owner <= atomic_load_explicit(&heap_count, memory_order_acquire)) {
            remote_batch_add(h, heaps[owner], ptr, head & HEAD_SIZE_MASK);
            return;
        }
    }
    dealloc_slow(ptr);
}

static void dealloc_slow(void *ptr) {
    if (cfg.check) {
        shared_lock_take();
        check_pointer_locked(ptr, "free");
        tlsf_free(shared.tlsf, ptr);
        shared_lock_give();
        return;
    }
    const unsigned owner = tlsf_block_owner(ptr);
    if (owner == 0) {
        shared_lock_take();
        free_block(shared.tlsf, &shared_release, ptr, head_load(block_from_ptr(ptr)));
        shared_lock_give();
        return;
    }
    thread_heap *o =
        owner <= atomic_load_explicit(&heap_count, memory_order_acquire) ? heaps[owner] : NULL;
    if (UNLIKELY(!o)) misuse(ptr, "free", TLSF_ERR_FOREIGN, ptr);
    remote_push(o, ptr);
}

size_t tlsf_backend_block_size(void *ptr) {
    check_pointer(ptr, "malloc_usable_size");
    if (UNLIKELY(cfg.check)) {
        shared_lock_take();
        check_pointer_locked(ptr, "malloc_usable_size");
        shared_lock_give();
    }
    return tlsf_block_size(ptr);
}

void *tlsf_backend_realloc(void *ptr, size_t size) {
    check_pointer(ptr, "realloc");
    if (UNLIKELY(cfg.check)) {
        shared_lock_take();
        check_pointer_locked(ptr, "realloc");
        const size_t old = tlsf_block_size(ptr);
        void *q = tlsf_resize(shared.tlsf, ptr, size);
        if (!q) {
            const size_t align = tlsf_block_align(ptr);
            q = shared_alloc_locked(size, align > TLSF_ALIGN ? align : 1);
            if (q) {
                memcpy(q, ptr, old < size ? old : size);
                tlsf_free(shared.tlsf, ptr);
            }
        }
        shared_lock_give();
        return q;
    }
    const size_t old = tlsf_block_size(ptr);
    /* The realloc policy (tlsf.h; the addon's replay follows it too): a block within a quarter
     * above the size asked stays; growth to a page or more asks for a quarter more room. */
    if (tlsf_realloc_keeps(old, size)) return ptr;
    if (!cfg.thread_heaps) {
        /* One heap: the policy exactly as the addon replays it (heaphook recommend). */
        shared_lock_take();
        void *q = tlsf_growing_realloc(&shared, ptr, size, 1);
        shared_lock_give();
        return q;
    }
    const size_t roomy = tlsf_realloc_room(old, size);
    thread_heap *h = t_heap;
    const unsigned owner = tlsf_block_owner(ptr);
    if (h && owner == h->id) {
        if (tlsf_resize(h->tlsf, ptr, roomy)) return ptr;
        if (roomy != size && tlsf_resize(h->tlsf, ptr, size)) return ptr;
    } else if (owner == 0) {
        shared_lock_take();
        void *q = tlsf_resize(shared.tlsf, ptr, roomy);
        if (!q && roomy != size) q = tlsf_resize(shared.tlsf, ptr, size);
        shared_lock_give();
        if (q) return q;
    } else if (size <= old) {
        return ptr; /* another thread's block: shrinking it would touch that thread's heap */
    }
    const size_t align = tlsf_block_align(ptr);
    void *q = tlsf_backend_alloc(roomy, align > TLSF_ALIGN ? align : 1);
    if (!q && roomy != size) q = tlsf_backend_alloc(size, align > TLSF_ALIGN ? align : 1);
    if (!q) return NULL;
    memcpy(q, ptr, old < size ? old : size);
    tlsf_backend_dealloc(ptr);
    return q;
}
