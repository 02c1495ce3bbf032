/*
 * bootstrap.c — the static arena that serves allocations made before the backend is ready.
 *
 * Who allocates that early: the backend's own heaphook_backend_get() and init() (a C++
 * static constructor, a config reader, pthread_key_create...), dlsym (which calls calloc for
 * its error buffer), TLS set-up. These calls must not reach a backend that is half built, and
 * must not recurse into its initialisation; they get memory from here instead.
 *
 * Layout: one static array with an atomic bump pointer. Each block is preceded by a header
 * holding its usable size, so malloc_usable_size and realloc work on arena blocks. Blocks
 * are never reused: free() of an arena pointer (recognised by its address) does nothing, and
 * realloc() moves the block into the backend. Because nothing is reused, the memory handed
 * out is always zero (the array is in .bss), which calloc relies on.
 *
 * The arena is small on purpose: it serves start-up only. Running out means a backend that
 * allocates far more than expected while initialising; the core reports that as a fatal error
 * rather than papering over it (hh_bootstrap_alloc), the interposers as a failed allocation.
 *
 * The same file gives the libraries that interpose the malloc family themselves (heaptrack,
 * agent, rtcheck) the allocator after them, found with dlsym(RTLD_NEXT): that lookup is what
 * allocates before they can, so it lives beside the arena that serves it. The contract of
 * both is written at their declaration, heaphook/bootstrap.h.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "heaphook/bootstrap.h"
#include "heaphook/log.h"
#include "internal.h"

/* Sizes are rounded to this, and so every block's header stays aligned. */
#define HH_BOOTSTRAP_GRANULE HEAPHOOK_DEFAULT_ALIGNMENT

typedef struct hh_bootstrap_header {
    size_t usable_size;
    size_t reserved; /* pads the header to HEAPHOOK_DEFAULT_ALIGNMENT */
} hh_bootstrap_header;

_Static_assert(sizeof(hh_bootstrap_header) == HEAPHOOK_DEFAULT_ALIGNMENT,
               "the header keeps payloads 16-byte aligned");

HEAPHOOK_LARGE_STORAGE _Alignas(
    4096) unsigned char heaphook_bootstrap_arena[HEAPHOOK_BOOTSTRAP_CAPACITY];
/* Offset of the first free byte of the arena. */
static _Atomic size_t hh_arena_top = 0;

static hh_bootstrap_header *hh_header_of(const void *ptr) {
    return (hh_bootstrap_header *)((uintptr_t)ptr - sizeof(hh_bootstrap_header));
}

void *heaphook_bootstrap_alloc(size_t size, size_t align) {
    if (align < HEAPHOOK_DEFAULT_ALIGNMENT) align = HEAPHOOK_DEFAULT_ALIGNMENT;
    hh_assert(hh_is_power_of_two(align));
    if (size > HEAPHOOK_BOOTSTRAP_CAPACITY || align > HEAPHOOK_BOOTSTRAP_CAPACITY) goto exhausted;
    size_t usable = hh_align_up(size, HH_BOOTSTRAP_GRANULE);
    size_t top = atomic_load_explicit(&hh_arena_top, memory_order_relaxed);
    for (;;) {
        uintptr_t base = (uintptr_t)heaphook_bootstrap_arena;
        uintptr_t payload = hh_align_up(base + top + sizeof(hh_bootstrap_header), align);
        size_t end = (size_t)(payload - base) + usable;
        if (end > HEAPHOOK_BOOTSTRAP_CAPACITY) goto exhausted;
        if (atomic_compare_exchange_weak_explicit(&hh_arena_top, &top, end, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            hh_header_of((void *)payload)->usable_size = usable;
            return (void *)payload;
        }
    }
exhausted:
    errno = ENOMEM;
    return NULL;
}

void *hh_bootstrap_alloc(size_t size, size_t align) {
    void *p = heaphook_bootstrap_alloc(size, align);
    if (HH_LIKELY(p != NULL)) return p;
    heaphook_fatal(
        "the bootstrap arena (%u KiB) cannot serve %zu bytes: the backend allocates too much "
        "before it is ready",
        (unsigned)(HEAPHOOK_BOOTSTRAP_CAPACITY / 1024), size);
}

size_t heaphook_bootstrap_block_size(const void *ptr) {
    hh_assert(heaphook_bootstrap_owns(ptr));
    return hh_header_of(ptr)->usable_size;
}

size_t heaphook_bootstrap_used_bytes(void) {
    return atomic_load_explicit(&hh_arena_top, memory_order_relaxed);
}

void heaphook_bootstrap_range(uintptr_t *lo, uintptr_t *hi) {
    *lo = (uintptr_t)heaphook_bootstrap_arena;
    *hi = *lo + heaphook_bootstrap_used_bytes();
}

/* ---- The next allocator ---------------------------------------------------------------------- */

heaphook_next_allocator heaphook_next;
_Atomic int heaphook_next_state = HEAPHOOK_NEXT_UNRESOLVED;

/* write(2) of a constant string: the logger may not be set up this early, and this is the one
 * line the program prints before it stops. */
static void hh_write_all(const char *s, size_t len) {
    while (len > 0) {
        ssize_t n = write(2, s, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        s += n;
        len -= (size_t)n;
    }
}

HH_COLD HH_NOINLINE __attribute__((noreturn)) static void hh_no_next_allocator(
    const char *library) {
    static const char head[] = "heaphook ";
    static const char mid[] = ": no allocator after libheaphook_";
    static const char tail[] =
        ".so in the lookup order (dlsym(RTLD_NEXT, \"malloc\") failed); preload it before the "
        "backend\n";
    hh_write_all(head, sizeof head - 1);
    hh_write_all(library, strlen(library));
    hh_write_all(mid, sizeof mid - 1);
    hh_write_all(library, strlen(library));
    hh_write_all(tail, sizeof tail - 1);
    _exit(127);
}

/* Out of line and cold: it runs once, and inlining it would fatten every hook. */
HH_COLD HH_NOINLINE bool heaphook_next_resolve(const char *library) {
    int expected = HEAPHOOK_NEXT_UNRESOLVED;
    if (!atomic_compare_exchange_strong(&heaphook_next_state, &expected, HEAPHOOK_NEXT_RESOLVING)) {
        return expected == HEAPHOOK_NEXT_READY; /* another thread resolves: use the arena */
    }
    heaphook_next_allocator next;
#define HH_NEXT(field, name) next.field = (__typeof__(next.field))dlsym(RTLD_NEXT, name)
    HH_NEXT(malloc, "malloc");
    HH_NEXT(free, "free");
    HH_NEXT(calloc, "calloc");
    HH_NEXT(realloc, "realloc");
    HH_NEXT(reallocarray, "reallocarray");
    HH_NEXT(posix_memalign, "posix_memalign");
    HH_NEXT(memalign, "memalign");
    HH_NEXT(aligned_alloc, "aligned_alloc");
    HH_NEXT(valloc, "valloc");
    HH_NEXT(pvalloc, "pvalloc");
    HH_NEXT(malloc_usable_size, "malloc_usable_size");
#undef HH_NEXT
    if (next.malloc == NULL || next.free == NULL || next.calloc == NULL || next.realloc == NULL)
        hh_no_next_allocator(library);
    heaphook_next = next;
    atomic_store_explicit(&heaphook_next_state, HEAPHOOK_NEXT_READY, memory_order_release);
    return true;
}

void heaphook_next_forward_to(const heaphook_next_allocator *table) {
    heaphook_next = *table;
    atomic_store_explicit(&heaphook_next_state, HEAPHOOK_NEXT_READY, memory_order_release);
}
