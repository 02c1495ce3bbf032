/*
 * backend_trim.c — memory given back to the system: by a free that nearly empties its heap
 * (rate-limited), by malloc_trim, and by a free past HEAPHOOK_TLSF_TRIM_THRESHOLD.
 */
#include "backend_internal.h"

/* Returning memory (the lazy pool only: not with PREFAULT, MLOCK or checking mode).
 * Each heap keeps the high-water mark of its used bytes, read at every free that reaches TLSF
 * (not the thread cache's). While the heap holds less than RELEASE_FRACTION of that mark (it
 * has been nearly emptied: the end of a phase, of a burst, of the program's work), each such
 * free gives back to the system the pages of the free block the freed block became part of
 * that may hold data (tlsf_free_span: its own and its unclean neighbours'; clean memory is not
 * given back twice), when they come to RELEASE_MIN bytes or more: one madvise(MADV_DONTNEED),
 * bounded by the size of what was freed since the block was last clean. A heap whose use stays
 * above that fraction (a loop that frees and allocates again, however large its blocks) never
 * releases, so its pages are not faulted in twice.
 *
 * A loop that empties its heap and fills it again at every round (a batch of blocks allocated,
 * then all freed) is nearly emptied at every round: it would give the same pages back and fault
 * them in again each time (335,000 page faults and 1.7x the time for 4 M batch frees of 16-128
 * bytes). So what a heap gives back is rate-limited, a bucket of bytes: RELEASE_BURST at once
 * (what a phase's end gives back), refilled at RELEASE_RATE per second. A span larger than the
 * tokens left is given back only when the bucket is full (nothing was given back for a while:
 * a real phase's end), and empties it. A span not given back stays unclean: a later free that
 * merges with it gives it back then. */
bool release_budget(release_state *r) {
    const unsigned long long now = heaphook_os_coarse_ns();
    const unsigned long long us = (now - r->stamp) / 1000;
    r->stamp = now;
    const unsigned long long full_us = (unsigned long long)RELEASE_BURST / RELEASE_RATE * 1000000;
    if (us >= full_us)
        r->tokens = RELEASE_BURST;
    else {
        r->tokens += (size_t)(us * RELEASE_RATE / 1000000);
        if (r->tokens > RELEASE_BURST) r->tokens = RELEASE_BURST;
    }
    return r->tokens >= RELEASE_MIN;
}

static void trim_discard(void *addr, size_t bytes, void *user);

/* The first such free after a while (the bucket full: a real phase's end, not a loop that
 * empties its heap at every round) also gives back the other free blocks of the heap that may
 * hold data, the largest first, RELEASE_SWEEP_VISITS free blocks looked at at most (so the free
 * stays O(1)): the blocks freed while the heap was still above the fraction, which no later free
 * merges with when they lie in a chunk of their own (a heap emptied in the order it was filled
 * frees its first chunks whole before it reaches the fraction: 33 of 64 MiB stayed resident in
 * tlsf_probe release). */
__attribute__((noinline)) void free_release(tlsf_t *t, release_state *r, void *ptr) {
    const bool phase_end = r->tokens >= RELEASE_BURST;
    uintptr_t lo, hi;
    void *block = tlsf_free_span(t, ptr, heaphook_os_page_size(), &lo, &hi);
    const size_t bytes = hi - lo;
    if (bytes >= RELEASE_MIN) {
        if (bytes > r->tokens && r->tokens < RELEASE_BURST) return; /* stays unclean */
        heaphook_os_discard((void *)lo, bytes);
        r->tokens = bytes > r->tokens ? 0 : r->tokens - bytes;
    }
    /* Smaller remains (a few pages around a small block) are not worth a system call: they are
     * forgotten rather than given back with the next neighbour. */
    tlsf_mark_clean(block);
    if (phase_end) {
        size_t swept = 0;
        tlsf_trim_largest(t, heaphook_os_page_size(), RELEASE_SWEEP_VISITS, trim_discard, &swept);
        r->tokens = swept > r->tokens ? 0 : r->tokens - swept;
    }
}

/*
 * Giving memory back on request: malloc_trim(pad) and HEAPHOOK_TLSF_TRIM_THRESHOLD.
 *
 * A trim gives back the pages of every free block of a heap that may hold data (tlsf_trim:
 * one madvise(MADV_DONTNEED) per such block, O(free blocks) of the heap), keeping the first
 * `pad` bytes of them. malloc_trim trims the calling thread's heap (its remote frees drained
 * and its cache flushed first, so that those blocks coalesce), the shared heap (under its
 * mutex: the pool's areas, added by growth or not, and what thread heaps have not borrowed),
 * and every heap left by an exited thread (taken as an adopter would take it). A heap owned by
 * another live thread is that thread's alone (no lock guards it): it is asked to trim itself,
 * which it does at its next malloc that misses its cache or at its exit. Areas are not unmapped:
 * their pages are given back, their addresses stay, since any thread may be reading the area
 * list with no lock to check a pointer.
 *
 * The threshold (glibc's M_TRIM_THRESHOLD, which trims the top of the heap when a free leaves
 * it larger than that): a free that leaves a free block of the threshold or more, or a whole
 * chunk or area free, gives back the pages of it that may hold data (tlsf_free_span), one
 * madvise; a smaller free block stays as it is until it merges into one that large. It
 * replaces the nearly-emptied rule above.
 *
 * Never with a prefaulted or locked pool (HEAPHOOK_TLSF_PREFAULT, HEAPHOOK_TLSF_MLOCK): that
 * memory is kept resident on purpose, for the real-time paths, so their worst case never
 * includes a trim (a threshold is refused there).
 */
static void trim_discard(void *addr, size_t bytes, void *user) {
    (void)heaphook_os_discard(addr, bytes);
    *(size_t *)user += bytes;
}

/* Every free block, clean ones too: free_release marks small remains clean without giving them
 * back. */
size_t trim_heap(tlsf_t *t, size_t pad) {
    size_t given = 0;
    tlsf_trim(t, heaphook_os_page_size(), pad, true, trim_discard, &given);
    return given;
}

__attribute__((noinline)) void free_trimming(tlsf_t *t, void *ptr, size_t threshold) {
    uintptr_t lo, hi;
    void *block = tlsf_free_span(t, ptr, heaphook_os_page_size(), &lo, &hi);
    /* Smaller: stays unclean, given back once it is part of a larger free block (or of a whole
     * free chunk, which a thread heap's chunks smaller than the threshold can only become). */
    if (tlsf_block_size(block) < threshold && !tlsf_block_is_whole_pool(block)) return;
    if (hi > lo) heaphook_os_discard((void *)lo, hi - lo);
    tlsf_mark_clean(block);
}

int tlsf_backend_trim(size_t pad) {
    if (!cfg.trim) return 0; /* the pool stays resident: prefaulted or locked */
    size_t given = 0;
    thread_heap *own = t_heap;
    if (own) given += trim_thread_heap(own, pad);
    shared_lock_take();
    given += trim_heap(shared.tlsf, pad);
    const unsigned count = atomic_load_explicit(&heap_count, memory_order_relaxed);
    for (unsigned id = 1; id <= count; id++) {
        thread_heap *h = heaps[id];
        if (h == own) continue;
        int state = HEAP_FREE;
        /* A heap left by an exited thread: held as an adopter holds it (adoption takes the
         * shared lock, held here), trimmed, left again. */
        if (atomic_compare_exchange_strong_explicit(&h->state, &state, HEAP_OWNED,
                                                    memory_order_acquire, memory_order_relaxed)) {
            given += trim_thread_heap(h, pad);
            atomic_store_explicit(&h->state, HEAP_FREE, memory_order_release);
        } else if (state == HEAP_OWNED) {
            atomic_store_explicit(&h->trim_wanted, true, memory_order_relaxed);
        }
    }
    shared_lock_give();
    return given > 0;
}
