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
 * allocates far more than expected while initialising; that is reported as a fatal error
 * rather than papered over.
 */
#include <stdint.h>
#include <string.h>

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

HEAPHOOK_LARGE_STORAGE _Alignas(4096) unsigned char hh_arena[HH_BOOTSTRAP_CAPACITY];
/* Offset of the first free byte of hh_arena. */
static _Atomic size_t hh_arena_top = 0;

static hh_bootstrap_header *hh_header_of(const void *ptr) {
    return (hh_bootstrap_header *)((uintptr_t)ptr - sizeof(hh_bootstrap_header));
}

void *hh_bootstrap_alloc(size_t size, size_t align) {
    if (align < HEAPHOOK_DEFAULT_ALIGNMENT) align = HEAPHOOK_DEFAULT_ALIGNMENT;
    hh_assert(hh_is_power_of_two(align));
    if (size > HH_BOOTSTRAP_CAPACITY || align > HH_BOOTSTRAP_CAPACITY) goto exhausted;
    size_t usable = hh_align_up(size, HH_BOOTSTRAP_GRANULE);
    size_t top = atomic_load_explicit(&hh_arena_top, memory_order_relaxed);
    for (;;) {
        uintptr_t base = (uintptr_t)hh_arena;
        uintptr_t payload = hh_align_up(base + top + sizeof(hh_bootstrap_header), align);
        size_t end = (size_t)(payload - base) + usable;
        if (end > HH_BOOTSTRAP_CAPACITY) goto exhausted;
        if (atomic_compare_exchange_weak_explicit(&hh_arena_top, &top, end, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            hh_header_of((void *)payload)->usable_size = usable;
            return (void *)payload;
        }
    }
exhausted:
    heaphook_fatal(
        "the bootstrap arena (%u KiB) cannot serve %zu bytes: the backend allocates too much "
        "before it is ready",
        (unsigned)(HH_BOOTSTRAP_CAPACITY / 1024), size);
}

size_t hh_bootstrap_block_size(const void *ptr) {
    hh_assert(hh_bootstrap_owns(ptr));
    return hh_header_of(ptr)->usable_size;
}

size_t hh_bootstrap_used_bytes(void) {
    return atomic_load_explicit(&hh_arena_top, memory_order_relaxed);
}

size_t hh_bootstrap_capacity(void) {
    return HH_BOOTSTRAP_CAPACITY;
}
