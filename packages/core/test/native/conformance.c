/*
 * conformance.c — the heaphook allocator conformance suite (the original heaphook's
 * test_library): one program that checks that whatever serves malloc in this process behaves
 * like glibc's malloc family, and that it is the backend we think it is.
 *
 *   heaphook_conformance_<name> [<expected backend>]     (built by heaphook_add_backend_test,
 *                                                         linked against libheaphook_<name>.so)
 *   LD_PRELOAD=/abs/libheaphook_<name>.so heaphook_conformance <name>
 *   heaphook_conformance glibc                           (no heaphook: checks the suite itself)
 *   heaphook_conformance_<name> <name> fork threads      (only the groups named)
 *
 * The expected backend name is argv[1], else $HEAPHOOK_EXPECTED_BACKEND, else the name the
 * program was built for. Each group prints "ok" or "FAIL" with the first failures and their
 * reasons; the last line is a summary; the exit status is 0 only when every check passed.
 * A group that hangs (a deadlock across fork, say) is stopped by an alarm and reported.
 *
 * HEAPHOOK_CONFORMANCE_SLOWDOWN=<n> (1..1000, default 1) says the machine runs the suite about n
 * times slower than a native one (under user-mode emulation, qemu-aarch64: n = 10): the loops
 * of churn, threads and fork do 1/n of their iterations and the deadlock alarms wait n times
 * longer, so a slow machine is not taken for a deadlock and the run stays within minutes.
 *
 * Built with -fno-builtin: otherwise the compiler removes malloc/free pairs and folds the
 * very calls under test.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaphook/backend.h"

/* The impossible requests below are deliberate. */
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
/* A failed realloc leaves the block valid; gcc assumes every realloc frees it. */
#pragma GCC diagnostic ignored "-Wuse-after-free"

#ifndef HEAPHOOK_CONFORMANCE_BACKEND
#define HEAPHOOK_CONFORMANCE_BACKEND NULL
#endif

/* ---- Constants ----------------------------------------------------------------------------- */

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define DEFAULT_ALIGNMENT HEAPHOOK_DEFAULT_ALIGNMENT
/* A request no allocator can serve: half the address space. */
#define IMPOSSIBLE_SIZE (SIZE_MAX / 2)
#define GROUP_TIMEOUT_SECONDS 120 /* times the slowdown */
#define CHILD_TIMEOUT_SECONDS 20  /* times the slowdown */
#define MAX_SLOWDOWN 1000
#define THREAD_COUNT 8
#define THREAD_ITERATIONS 20000
#define MAILBOX_CAPACITY 256
#define FORK_COUNT 200
#define FORK_BACKGROUND_THREADS 4
#define CHURN_SLOTS 4096
#define CHURN_OPERATIONS 200000
/* Failures printed per group; the rest are only counted. */
#define FAILURES_SHOWN 10

static const size_t test_sizes[] = {
    0,      1,      2,      3,       7,     8,       9,       15,       16,       17,
    24,     31,     32,     33,      48,    63,      64,      65,       100,      127,
    128,    129,    255,    256,     257,   511,     512,     513,      1000,     1023,
    1024,   1025,   2047,   2048,    2049,  4095,    4096,    4097,     8191,     8192,
    8193,   16383,  16384,  16385,   32767, 32768,   32769,   65535,    65536,    65537,
    100000, 131072, 131073, MiB - 1, MiB,   MiB + 1, 4 * MiB, 16 * MiB, 64 * MiB,
};
#define TEST_SIZE_COUNT (sizeof test_sizes / sizeof test_sizes[0])

/* ---- Checks and reporting -------------------------------------------------------------------- */

static const char *expected_backend;
/* HEAPHOOK_CONFORMANCE_SLOWDOWN: divides the loops' iterations, multiplies the alarms. */
static unsigned slowdown = 1;
#define SCALED_ITERATIONS(count) ((count) / (int)slowdown)
static bool against_glibc; /* expected_backend is "glibc": no heaphook in the process */
static const char *current_group = "";
static atomic_ulong group_checks, group_failures, total_checks, total_failures;
static unsigned groups_run, groups_failed;

static void fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        atomic_fetch_add_explicit(&group_checks, 1, memory_order_relaxed); \
        if (!(cond)) fail(__LINE__, __VA_ARGS__);                          \
    } while (0)

static void fail(int line, const char *fmt, ...) {
    unsigned long count = atomic_fetch_add(&group_failures, 1) + 1;
    if (count > FAILURES_SHOWN) return;
    char message[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    fprintf(stdout, "  FAIL [%s] conformance.c:%d: %s\n", current_group, line, message);
    fflush(stdout);
}

static void on_timeout(int signal_number) {
    (void)signal_number;
    char line[256];
    int len = snprintf(line, sizeof line,
                       "FAIL %s: still running after %u s (a deadlock?)\n"
                       "heaphook conformance: backend %s: stopped by timeout\n",
                       current_group, GROUP_TIMEOUT_SECONDS * slowdown, expected_backend);
    if (write(STDOUT_FILENO, line, (size_t)len) < 0) _exit(3);
    _exit(3);
}

/* Group names given after the backend name on the command line; none means all groups. */
static char **selected_groups;
static int selected_group_count;

static bool group_selected(const char *name) {
    if (selected_group_count == 0) return true;
    for (int i = 0; i < selected_group_count; i++) {
        if (strcmp(selected_groups[i], name) == 0) return true;
    }
    return false;
}

static void run_group(const char *name, void (*group)(void)) {
    if (!group_selected(name)) return;
    current_group = name;
    atomic_store(&group_checks, 0);
    atomic_store(&group_failures, 0);
    alarm(GROUP_TIMEOUT_SECONDS * slowdown);
    group();
    alarm(0);
    unsigned long checks = atomic_load(&group_checks), failures = atomic_load(&group_failures);
    atomic_fetch_add(&total_checks, checks);
    atomic_fetch_add(&total_failures, failures);
    groups_run++;
    if (failures == 0) {
        printf("ok   %-22s %lu checks\n", name, checks);
    } else {
        groups_failed++;
        printf("FAIL %-22s %lu of %lu checks failed\n", name, failures, checks);
    }
    fflush(stdout);
}

/* ---- Helpers -----------------------------------------------------------------------------------
 */

static bool is_aligned(const void *ptr, size_t align) {
    return (uintptr_t)ptr % align == 0;
}

/* A pattern that depends on the block and the offset, so overlapping or moved blocks are
 * noticed. It is made of 8-byte words, written and compared a word at a time: the churn group
 * fills and checks about a gigabyte, which byte by byte was most of the suite's time. Byte i is
 * byte i % 8 of word i / 8 in memory order, so any offset can still be checked on its own. */
/* __builtin_memcpy: the suite is built with -fno-builtin, and a call per word would cost
 * more than the byte loop it replaces. */
static uint64_t pattern_word(uintptr_t seed, size_t index) {
    return ((uint64_t)seed * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)index * 0x100000001b3ULL) ^
           ((uint64_t)index >> 5);
}

static unsigned char pattern_byte(uintptr_t seed, size_t offset) {
    uint64_t word = pattern_word(seed, offset / sizeof word);
    unsigned char bytes[sizeof word];
    __builtin_memcpy(bytes, &word, sizeof word);
    return bytes[offset % sizeof word];
}

static void fill(void *ptr, size_t size, uintptr_t seed) {
    unsigned char *bytes = ptr;
    size_t words = size / sizeof(uint64_t);
    for (size_t k = 0; k < words; k++) {
        uint64_t word = pattern_word(seed, k);
        __builtin_memcpy(bytes + k * sizeof word, &word, sizeof word);
    }
    for (size_t i = words * sizeof(uint64_t); i < size; i++) bytes[i] = pattern_byte(seed, i);
}

/* The first offset where the pattern is broken, or size when it is intact. */
static size_t verify(const void *ptr, size_t size, uintptr_t seed) {
    const unsigned char *bytes = ptr;
    size_t words = size / sizeof(uint64_t);
    for (size_t k = 0; k < words; k++) {
        uint64_t word;
        __builtin_memcpy(&word, bytes + k * sizeof word, sizeof word);
        if (word == pattern_word(seed, k)) continue;
        for (size_t i = k * sizeof word;; i++)
            if (bytes[i] != pattern_byte(seed, i)) return i;
    }
    for (size_t i = words * sizeof(uint64_t); i < size; i++) {
        if (bytes[i] != pattern_byte(seed, i)) return i;
    }
    return size;
}

static bool all_zero(const void *ptr, size_t size) {
    const unsigned char *bytes = ptr;
    for (size_t i = 0; i < size; i++) {
        if (bytes[i] != 0) return false;
    }
    return true;
}

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t rng_next(rng *r) {
    uint64_t x = r->state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return r->state = x;
}

/* Mostly small sizes, sometimes medium, rarely large: the shape of real programs. */
static size_t random_size(rng *r) {
    uint64_t pick = rng_next(r) % 1000;
    if (pick < 700) return rng_next(r) % 256;
    if (pick < 950) return rng_next(r) % 8192;
    if (pick < 995) return rng_next(r) % (128 * KiB);
    return rng_next(r) % (2 * MiB);
}

/* ---- Groups
 * -------------------------------------------------------------------------------------- */

static const char *const family[] = {
    "malloc",   "free",          "calloc",      "realloc", "reallocarray",       "posix_memalign",
    "memalign", "aligned_alloc", "valloc",      "pvalloc", "malloc_usable_size", "mallinfo2",
    "mallinfo", "malloc_stats",  "malloc_trim", "mallopt",
};

/* Which backend serves malloc, and that it is a heaphook library at all. */
static void group_backend(void) {
    const char *(*active)(void) =
        (const char *(*)(void))dlsym(RTLD_DEFAULT, "heaphook_active_backend");
    if (against_glibc) {
        CHECK(active == NULL, "expected glibc, but a heaphook library (%s) is loaded",
              active ? active() : "");
        return;
    }
    CHECK(active != NULL,
          "heaphook_active_backend not found: no heaphook library serves this process "
          "(link it or LD_PRELOAD it)");
    if (active == NULL) return;
    CHECK(strcmp(active(), expected_backend) == 0, "active backend is \"%s\", expected \"%s\"",
          active(), expected_backend);
    Dl_info heaphook_object;
    CHECK(dladdr((void *)active, &heaphook_object) != 0, "dladdr(heaphook_active_backend)");
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
        void *symbol = dlsym(RTLD_DEFAULT, family[i]);
        Dl_info object;
        CHECK(symbol != NULL && dladdr(symbol, &object) != 0 &&
                  object.dli_fbase == heaphook_object.dli_fbase,
              "%s is served by %s, not by the heaphook library %s", family[i],
              symbol && dladdr(symbol, &object) ? object.dli_fname : "nothing",
              heaphook_object.dli_fname);
    }
    /* When the backend keeps statistics, blocks from malloc must show up in them. */
    int (*get_stats)(heaphook_stats *) =
        (int (*)(heaphook_stats *))dlsym(RTLD_DEFAULT, "heaphook_get_stats");
    CHECK(get_stats != NULL, "heaphook_get_stats not exported");
    heaphook_stats before, after;
    if (get_stats != NULL && get_stats(&before) == 0) {
        enum { BLOCKS = 64 };
        void *blocks[BLOCKS];
        for (int i = 0; i < BLOCKS; i++) blocks[i] = malloc(100);
        CHECK(get_stats(&after) == 0, "heaphook_get_stats failed the second time");
        CHECK(after.used_blocks >= before.used_blocks + BLOCKS,
              "64 blocks from malloc are not in the backend's statistics (used_blocks %zu -> %zu):"
              " is malloc really served by the backend?",
              before.used_blocks, after.used_blocks);
        for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
    }
}

/* Every size from 0 to 64 MiB: non-NULL, aligned, usable size, contents, no overlap. */
static void group_sizes(void) {
    void *blocks[TEST_SIZE_COUNT];
    for (size_t i = 0; i < TEST_SIZE_COUNT; i++) {
        size_t size = test_sizes[i];
        blocks[i] = malloc(size);
        CHECK(blocks[i] != NULL, "malloc(%zu) returned NULL", size);
        if (blocks[i] == NULL) continue;
        CHECK(is_aligned(blocks[i], DEFAULT_ALIGNMENT), "malloc(%zu) = %p is not %d-byte aligned",
              size, blocks[i], DEFAULT_ALIGNMENT);
        CHECK(malloc_usable_size(blocks[i]) >= size, "malloc_usable_size(malloc(%zu)) = %zu", size,
              malloc_usable_size(blocks[i]));
        fill(blocks[i], size, (uintptr_t)blocks[i]);
    }
    /* All blocks live at once: a broken pattern means two blocks overlap. */
    for (size_t i = 0; i < TEST_SIZE_COUNT; i++) {
        if (blocks[i] == NULL) continue;
        size_t size = test_sizes[i];
        size_t bad = verify(blocks[i], size, (uintptr_t)blocks[i]);
        CHECK(bad == size, "malloc(%zu): byte %zu changed while other blocks were written", size,
              bad);
        /* The whole usable size is writable. */
        memset(blocks[i], 0xa5, malloc_usable_size(blocks[i]));
    }
    for (size_t i = 0; i < TEST_SIZE_COUNT; i++) free(blocks[i]);

    void *first = malloc(0), *second = malloc(0);
    CHECK(first != NULL && second != NULL && first != second,
          "malloc(0) must return unique non-NULL pointers (%p, %p)", first, second);
    free(first);
    free(second);
    free(NULL);
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu",
          malloc_usable_size(NULL));
    int saved = errno = EDOM;
    free(malloc(2 * MiB));
    free(malloc(10));
    CHECK(errno == saved, "free changed errno to %d", errno);
}

static void group_calloc(void) {
    for (size_t i = 0; i < TEST_SIZE_COUNT; i++) {
        size_t size = test_sizes[i];
        /* Dirty memory first, so recycled blocks must really be cleared. */
        void *dirty = malloc(size);
        if (dirty != NULL) memset(dirty, 0xff, size);
        free(dirty);
        unsigned char *zeroed = calloc(1, size);
        CHECK(zeroed != NULL, "calloc(1, %zu) returned NULL", size);
        if (zeroed == NULL) continue;
        CHECK(is_aligned(zeroed, DEFAULT_ALIGNMENT), "calloc(1, %zu) misaligned", size);
        CHECK(all_zero(zeroed, size), "calloc(1, %zu) is not zeroed", size);
        free(zeroed);
    }
    unsigned int *array = calloc(1000, sizeof(unsigned int));
    CHECK(array != NULL && all_zero(array, 1000 * sizeof(unsigned int)), "calloc(1000, 4)");
    free(array);
    void *empty = calloc(0, 16);
    CHECK(empty != NULL, "calloc(0, 16) returned NULL");
    free(empty);
    errno = 0;
    CHECK(calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM,
          "calloc(SIZE_MAX / 2, 3) overflows: expected NULL and ENOMEM (errno %d)", errno);
    errno = 0;
    CHECK(calloc(SIZE_MAX, SIZE_MAX) == NULL && errno == ENOMEM,
          "calloc(SIZE_MAX, SIZE_MAX): expected NULL and ENOMEM (errno %d)", errno);
}

static void group_realloc(void) {
    /* Grow from 1 byte to 8 MiB, then shrink back, keeping the contents. */
    size_t size = 1;
    unsigned char *block = malloc(size);
    fill(block, size, 42);
    for (size_t next = 2; next <= 8 * MiB; next = next * 2 + (next & 1 ? 0 : 3)) {
        unsigned char *moved = realloc(block, next);
        CHECK(moved != NULL, "realloc(%zu -> %zu) returned NULL", size, next);
        if (moved == NULL) break;
        CHECK(is_aligned(moved, DEFAULT_ALIGNMENT), "realloc to %zu misaligned", next);
        size_t bad = verify(moved, size, 42);
        CHECK(bad == size, "realloc(%zu -> %zu) lost byte %zu", size, next, bad);
        fill(moved, next, 42);
        block = moved;
        size = next;
        CHECK(malloc_usable_size(block) >= size, "usable size after realloc to %zu", size);
    }
    for (size_t next = size / 3; next > 0; next /= 3) {
        unsigned char *moved = realloc(block, next);
        CHECK(moved != NULL, "realloc shrink to %zu returned NULL", next);
        if (moved == NULL) break;
        size_t bad = verify(moved, next, 42);
        CHECK(bad == next, "realloc shrink %zu -> %zu lost byte %zu", size, next, bad);
        block = moved;
        size = next;
    }
    free(block);

    void *fresh = realloc(NULL, 100);
    CHECK(fresh != NULL && malloc_usable_size(fresh) >= 100, "realloc(NULL, 100) is malloc(100)");
    CHECK(realloc(fresh, 0) == NULL, "realloc(p, 0) frees p and returns NULL (glibc)");

    /* Aligned blocks: contents kept; the result is at least default-aligned (glibc does not
     * keep a larger alignment either). */
    for (size_t align = 64; align <= 64 * KiB; align *= 16) {
        unsigned char *aligned = memalign(align, 100);
        CHECK(aligned != NULL && is_aligned(aligned, align), "memalign(%zu, 100)", align);
        if (aligned == NULL) continue;
        fill(aligned, 100, align);
        unsigned char *grown = realloc(aligned, 10000);
        CHECK(grown != NULL && is_aligned(grown, DEFAULT_ALIGNMENT) &&
                  verify(grown, 100, align) == 100,
              "realloc(memalign(%zu, 100), 10000) lost contents or alignment", align);
        if (grown == NULL) continue;
        unsigned char *shrunk = realloc(grown, 50);
        CHECK(shrunk != NULL && verify(shrunk, 50, align) == 50,
              "realloc(.., 50) of a grown aligned block lost contents");
        free(shrunk);
        aligned = aligned_alloc(align, 3 * align);
        CHECK(aligned != NULL, "aligned_alloc(%zu, %zu)", align, 3 * align);
        fill(aligned, 3 * align, 7);
        shrunk = realloc(aligned, align / 2);
        CHECK(shrunk != NULL && verify(shrunk, align / 2, 7) == align / 2,
              "realloc shrink of aligned_alloc(%zu) lost contents", align);
        free(shrunk);
    }

    /* A failed realloc leaves the block alone. */
    unsigned char *kept = malloc(100);
    fill(kept, 100, 9);
    errno = 0;
    CHECK(realloc(kept, IMPOSSIBLE_SIZE) == NULL && errno == ENOMEM,
          "realloc(p, SIZE_MAX / 2): expected NULL and ENOMEM (errno %d)", errno);
    CHECK(verify(kept, 100, 9) == 100, "a failed realloc changed the block");
    free(kept);
}

static void group_reallocarray(void) {
    int *array = reallocarray(NULL, 10, sizeof(int));
    CHECK(array != NULL, "reallocarray(NULL, 10, 4)");
    for (int i = 0; i < 10; i++) array[i] = i * i;
    int *grown = reallocarray(array, 100000, sizeof(int));
    CHECK(grown != NULL, "reallocarray(p, 100000, 4)");
    if (grown != NULL) {
        bool kept = true;
        for (int i = 0; i < 10; i++) kept = kept && grown[i] == i * i;
        CHECK(kept, "reallocarray lost contents");
        array = grown;
    }
    errno = 0;
    CHECK(reallocarray(array, SIZE_MAX / 2, 4) == NULL && errno == ENOMEM,
          "reallocarray overflow: expected NULL and ENOMEM (errno %d)", errno);
    CHECK(array[9] == 81, "a failed reallocarray changed the block");
    free(array);
}

/* posix_memalign, memalign, aligned_alloc for every power-of-two alignment up to 16 MiB. */
static void group_alignment(void) {
    for (size_t align = 8; align <= 16 * MiB; align *= 2) {
        if (align > 64 * KiB && align != MiB && align != 16 * MiB) continue;
        const size_t sizes[] = {0, 1, align - 1, align, align + 1, 3 * align, 100000};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t size = sizes[s];
            size_t expected_align = align < DEFAULT_ALIGNMENT ? DEFAULT_ALIGNMENT : align;
            void *ptr = NULL;
            int error = posix_memalign(&ptr, align, size);
            CHECK(error == 0 && ptr != NULL, "posix_memalign(%zu, %zu) = %d", align, size, error);
            CHECK(is_aligned(ptr, expected_align), "posix_memalign(%zu, %zu) = %p misaligned",
                  align, size, ptr);
            CHECK(ptr == NULL || malloc_usable_size(ptr) >= size,
                  "posix_memalign(%zu, %zu): usable size %zu", align, size,
                  malloc_usable_size(ptr));
            if (ptr != NULL) fill(ptr, size, align);

            void *by_memalign = memalign(align, size);
            CHECK(by_memalign != NULL && is_aligned(by_memalign, expected_align),
                  "memalign(%zu, %zu) = %p", align, size, by_memalign);
            CHECK(by_memalign == NULL || malloc_usable_size(by_memalign) >= size,
                  "memalign(%zu, %zu) usable size", align, size);
            if (by_memalign != NULL) fill(by_memalign, size, align + 1);

            void *by_aligned_alloc = aligned_alloc(align, size);
            CHECK(by_aligned_alloc != NULL && is_aligned(by_aligned_alloc, expected_align),
                  "aligned_alloc(%zu, %zu) = %p", align, size, by_aligned_alloc);
            CHECK(by_aligned_alloc == NULL || malloc_usable_size(by_aligned_alloc) >= size,
                  "aligned_alloc(%zu, %zu) usable size", align, size);
            if (by_aligned_alloc != NULL) fill(by_aligned_alloc, size, align + 2);

            CHECK(ptr == NULL || verify(ptr, size, align) == size,
                  "posix_memalign(%zu, %zu) block overwritten", align, size);
            CHECK(by_memalign == NULL || verify(by_memalign, size, align + 1) == size,
                  "memalign(%zu, %zu) block overwritten", align, size);
            free(ptr);
            free(by_memalign);
            free(by_aligned_alloc);
        }
    }

    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *page_block = valloc(100);
    CHECK(page_block != NULL && is_aligned(page_block, page), "valloc(100) = %p", page_block);
    free(page_block);
    page_block = pvalloc(page + 1);
    CHECK(page_block != NULL && is_aligned(page_block, page) &&
              malloc_usable_size(page_block) >= 2 * page,
          "pvalloc(page + 1) must give two whole pages");
    free(page_block);
    page_block = pvalloc(0);
    CHECK(page_block != NULL && is_aligned(page_block, page), "pvalloc(0) = %p", page_block);
    if (!against_glibc) {
        CHECK(page_block == NULL || malloc_usable_size(page_block) >= page,
              "pvalloc(0) should give a whole page");
    }
    free(page_block);

    /* memalign rounds an alignment that is not a power of two up to the next one (glibc). */
    void *rounded = memalign(24, 10);
    CHECK(rounded != NULL && is_aligned(rounded, 32), "memalign(24, 10) = %p, not 32-aligned",
          rounded);
    free(rounded);
    rounded = memalign(3000, 10);
    CHECK(rounded != NULL && is_aligned(rounded, 4096), "memalign(3000, 10) = %p", rounded);
    free(rounded);
    rounded = memalign(3, 10);
    CHECK(rounded != NULL && is_aligned(rounded, DEFAULT_ALIGNMENT), "memalign(3, 10) = %p",
          rounded);
    free(rounded);
}

/* Invalid arguments: EINVAL where glibc gives it, with errno untouched by posix_memalign. */
static void group_invalid_alignment(void) {
    const size_t bad_posix[] = {0, 1, 2, 4, 12, 24, 48, 100, 4097};
    for (size_t i = 0; i < sizeof bad_posix / sizeof bad_posix[0]; i++) {
        void *ptr = (void *)0x1;
        errno = EDOM;
        int error = posix_memalign(&ptr, bad_posix[i], 16);
        CHECK(error == EINVAL, "posix_memalign(align %zu) = %d, expected EINVAL", bad_posix[i],
              error);
        CHECK(errno == EDOM, "posix_memalign(align %zu) changed errno to %d", bad_posix[i], errno);
    }
    errno = 0;
    CHECK(memalign(SIZE_MAX, 16) == NULL && errno == EINVAL,
          "memalign(SIZE_MAX, 16): expected NULL and EINVAL (errno %d)", errno);
    errno = 0;
    CHECK(memalign(SIZE_MAX / 2 + 2, 16) == NULL && errno == EINVAL,
          "memalign(SIZE_MAX / 2 + 2, 16): expected NULL and EINVAL (errno %d)", errno);
    /* glibc 2.38 and heaphook: aligned_alloc with an alignment that is not a power of two is
     * EINVAL. (Older glibc rounded it up like memalign, so not checked against glibc.) */
    if (!against_glibc) {
        const size_t bad_c11[] = {0, 3, 24, 100, 4097};
        for (size_t i = 0; i < sizeof bad_c11 / sizeof bad_c11[0]; i++) {
            errno = 0;
            void *ptr = aligned_alloc(bad_c11[i], 64);
            CHECK(ptr == NULL && errno == EINVAL,
                  "aligned_alloc(%zu, 64) = %p errno %d, expected NULL and EINVAL", bad_c11[i], ptr,
                  errno);
            free(ptr);
        }
    }
}

/* Requests nobody can serve fail cleanly with ENOMEM. */
static void group_exhaustion(void) {
    const size_t impossible[] = {IMPOSSIBLE_SIZE, SIZE_MAX, SIZE_MAX - 4096, (size_t)1 << 50};
    for (size_t i = 0; i < sizeof impossible / sizeof impossible[0]; i++) {
        size_t size = impossible[i];
        errno = 0;
        CHECK(malloc(size) == NULL && errno == ENOMEM,
              "malloc(%zu): expected NULL and ENOMEM (errno %d)", size, errno);
        errno = 0;
        CHECK(calloc(1, size) == NULL && errno == ENOMEM, "calloc(1, %zu): expected ENOMEM", size);
        void *ptr = NULL;
        CHECK(posix_memalign(&ptr, 64, size) == ENOMEM, "posix_memalign(64, %zu): expected ENOMEM",
              size);
        errno = 0;
        CHECK(aligned_alloc(4096, size) == NULL && errno == ENOMEM,
              "aligned_alloc(4096, %zu): expected ENOMEM (errno %d)", size, errno);
        errno = 0;
        CHECK(memalign(MiB, size) == NULL && errno == ENOMEM,
              "memalign(1 MiB, %zu): expected ENOMEM (errno %d)", size, errno);
        errno = 0;
        CHECK(valloc(size) == NULL && errno == ENOMEM, "valloc(%zu): expected ENOMEM", size);
        errno = 0;
        CHECK(pvalloc(size) == NULL && errno == ENOMEM, "pvalloc(%zu): expected ENOMEM", size);
    }
    /* An alignment of half the address space cannot be served either. */
    errno = 0;
    CHECK(memalign(SIZE_MAX / 2 + 1, 16) == NULL && errno == ENOMEM,
          "memalign(2^63, 16): expected NULL and ENOMEM (errno %d)", errno);
    /* And the heap still works afterwards. */
    void *ptr = malloc(1000);
    CHECK(ptr != NULL, "malloc(1000) after failed requests");
    free(ptr);
}

static void group_statistics(void) {
    void *big = malloc(MiB);
    void *small[100];
    for (int i = 0; i < 100; i++) small[i] = malloc(100);
#if __GLIBC_PREREQ(2, 33)
    struct mallinfo2 info = mallinfo2();
#else /* mallinfo2 is newer than this C library's headers: ask mallinfo, which may saturate */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo old_info = mallinfo();
#pragma GCC diagnostic pop
    struct {
        size_t uordblks, hblkhd;
    } info = {(size_t)old_info.uordblks, (size_t)old_info.hblkhd};
#endif
    int (*get_stats)(heaphook_stats *) =
        (int (*)(heaphook_stats *))dlsym(RTLD_DEFAULT, "heaphook_get_stats");
    heaphook_stats stats;
    bool has_stats = against_glibc || (get_stats != NULL && get_stats(&stats) == 0);
    if (has_stats) {
        CHECK(info.uordblks + info.hblkhd >= MiB + 100 * 100,
              "mallinfo2: uordblks %zu + hblkhd %zu < the 1 MiB + 10000 bytes in use",
              info.uordblks, info.hblkhd);
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo narrow = mallinfo();
#pragma GCC diagnostic pop
    CHECK(narrow.uordblks >= 0 && narrow.hblkhd >= 0 && narrow.arena >= 0,
          "mallinfo fields must saturate, not go negative");
    int trimmed = malloc_trim(0);
    CHECK(trimmed == 0 || trimmed == 1, "malloc_trim(0) = %d", trimmed);
    int accepted = mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    CHECK(accepted == 0 || accepted == 1, "mallopt = %d", accepted);
    /* malloc_stats writes a report (to stderr or heaphook's report fd); it must not crash. */
    if (getenv("HEAPHOOK_CONFORMANCE_QUIET") == NULL) malloc_stats();
    for (int i = 0; i < 100; i++) free(small[i]);
    free(big);
}

/* One thread, many blocks, random operations: contents must survive everything. */
static void group_churn(void) {
    static struct {
        unsigned char *ptr;
        size_t size;
    } slots[CHURN_SLOTS];
    rng r = {0x9e3779b97f4a7c15ULL};
    unsigned long corrupted = 0;
    for (int op = 0; op < SCALED_ITERATIONS(CHURN_OPERATIONS); op++) {
        size_t i = rng_next(&r) % CHURN_SLOTS;
        if (slots[i].ptr != NULL) {
            if (verify(slots[i].ptr, slots[i].size, (uintptr_t)&slots[i]) != slots[i].size) {
                corrupted++;
            }
            if (rng_next(&r) % 4 == 0) { /* resize instead of free */
                size_t size = random_size(&r);
                unsigned char *moved = realloc(slots[i].ptr, size);
                if (size == 0) {
                    slots[i].ptr = NULL;
                    continue;
                }
                CHECK(moved != NULL, "realloc(%zu) returned NULL", size);
                if (moved == NULL) continue;
                size_t kept = slots[i].size < size ? slots[i].size : size;
                if (verify(moved, kept, (uintptr_t)&slots[i]) != kept) corrupted++;
                fill(moved, size, (uintptr_t)&slots[i]);
                slots[i].ptr = moved;
                slots[i].size = size;
                continue;
            }
            free(slots[i].ptr);
            slots[i].ptr = NULL;
            continue;
        }
        size_t size = random_size(&r);
        unsigned char *ptr;
        switch (rng_next(&r) % 4) {
            case 0:
                ptr = calloc(1, size);
                CHECK(ptr == NULL || all_zero(ptr, size), "calloc(1, %zu) not zeroed", size);
                break;
            case 1: {
                size_t align = (size_t)16 << (rng_next(&r) % 9);
                ptr = memalign(align, size);
                CHECK(ptr == NULL || is_aligned(ptr, align), "memalign(%zu) misaligned", align);
                break;
            }
            default:
                ptr = malloc(size);
                break;
        }
        CHECK(ptr != NULL, "allocation of %zu bytes returned NULL", size);
        if (ptr == NULL) continue;
        CHECK(malloc_usable_size(ptr) >= size, "usable size %zu < %zu", malloc_usable_size(ptr),
              size);
        fill(ptr, size, (uintptr_t)&slots[i]);
        slots[i].ptr = ptr;
        slots[i].size = size;
    }
    CHECK(corrupted == 0, "%lu blocks had their contents changed", corrupted);
    for (size_t i = 0; i < CHURN_SLOTS; i++) {
        free(slots[i].ptr);
        slots[i].ptr = NULL;
    }
}

/* ---- Threads: each one allocates and sends half its blocks to the next to free ----------------
 */

typedef struct mail {
    unsigned char *ptr;
    size_t size;
} mail;

typedef struct mailbox {
    pthread_mutex_t lock;
    mail items[MAILBOX_CAPACITY];
    size_t count;
} mailbox;

static mailbox mailboxes[THREAD_COUNT];

static bool mailbox_put(mailbox *box, mail item) {
    pthread_mutex_lock(&box->lock);
    bool stored = box->count < MAILBOX_CAPACITY;
    if (stored) box->items[box->count++] = item;
    pthread_mutex_unlock(&box->lock);
    return stored;
}

static bool mailbox_take(mailbox *box, mail *item) {
    pthread_mutex_lock(&box->lock);
    bool taken = box->count > 0;
    if (taken) *item = box->items[--box->count];
    pthread_mutex_unlock(&box->lock);
    return taken;
}

static void release_mail(mail item) {
    CHECK(verify(item.ptr, item.size, (uintptr_t)item.ptr) == item.size,
          "a block of %zu bytes changed between threads", item.size);
    free(item.ptr);
}

static void *thread_worker(void *arg) {
    size_t self = (size_t)(uintptr_t)arg;
    rng r = {0x12345678ULL + self * 7919};
    mailbox *next = &mailboxes[(self + 1) % THREAD_COUNT];
    for (int i = 0; i < SCALED_ITERATIONS(THREAD_ITERATIONS); i++) {
        size_t size = random_size(&r) % (256 * KiB);
        unsigned char *ptr = rng_next(&r) % 8 == 0 ? aligned_alloc(64, size) : malloc(size);
        CHECK(ptr != NULL, "thread %zu: allocation of %zu returned NULL", self, size);
        if (ptr == NULL) continue;
        fill(ptr, size, (uintptr_t)ptr);
        mail item = {ptr, size};
        if (rng_next(&r) % 2 == 0 || !mailbox_put(next, item)) release_mail(item);
        mail received;
        if (mailbox_take(&mailboxes[self], &received)) release_mail(received);
    }
    return NULL;
}

static void group_threads(void) {
    pthread_t threads[THREAD_COUNT];
    for (size_t i = 0; i < THREAD_COUNT; i++) pthread_mutex_init(&mailboxes[i].lock, NULL);
    for (size_t i = 0; i < THREAD_COUNT; i++) {
        CHECK(pthread_create(&threads[i], NULL, thread_worker, (void *)(uintptr_t)i) == 0,
              "pthread_create");
    }
    for (size_t i = 0; i < THREAD_COUNT; i++) pthread_join(threads[i], NULL);
    mail item;
    for (size_t i = 0; i < THREAD_COUNT; i++) {
        while (mailbox_take(&mailboxes[i], &item)) release_mail(item);
    }
}

/* ---- Fork: 200 forks while other threads allocate ------------------------------------------- */

static atomic_bool fork_stop;

static void *fork_background(void *arg) {
    rng r = {0xabcdef12345ULL + (uintptr_t)arg};
    void *held[16] = {0};
    while (!atomic_load_explicit(&fork_stop, memory_order_relaxed)) {
        size_t i = rng_next(&r) % 16;
        free(held[i]);
        held[i] =
            rng_next(&r) % 16 == 0 ? memalign(4096, random_size(&r)) : malloc(random_size(&r));
    }
    for (size_t i = 0; i < 16; i++) free(held[i]);
    return NULL;
}

static void *child_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) free(malloc((size_t)i * 100));
    return arg;
}

/* What a child does: allocate in every way, check, and report by exit status only (no stdio:
 * the parent's buffers were copied into the child). */
static int child_work(int index) {
    rng r = {0x5151ULL + (uint64_t)index};
    int failures = 0;
    void *blocks[64];
    for (int i = 0; i < 64; i++) {
        size_t size = random_size(&r);
        blocks[i] = malloc(size);
        if (blocks[i] == NULL) return 10;
        fill(blocks[i], size, (uintptr_t)blocks[i]);
        if (verify(blocks[i], size, (uintptr_t)blocks[i]) != size) failures++;
    }
    for (int i = 0; i < 64; i++) free(blocks[i]);
    void *aligned = NULL;
    if (posix_memalign(&aligned, 4096, 10000) != 0 || !is_aligned(aligned, 4096)) return 11;
    free(aligned);
    unsigned char *zeroed = calloc(1000, 10);
    if (zeroed == NULL || !all_zero(zeroed, 10000)) return 12;
    unsigned char *grown = realloc(zeroed, 3 * MiB);
    if (grown == NULL) return 13;
    free(grown);
    if (index % 10 == 0) { /* a new thread in the child allocates too */
        pthread_t thread;
        if (pthread_create(&thread, NULL, child_thread, NULL) != 0) return 14;
        pthread_join(thread, NULL);
    }
    return failures == 0 ? 0 : 15;
}

static void group_fork(void) {
    pthread_t threads[FORK_BACKGROUND_THREADS];
    atomic_store(&fork_stop, false);
    for (size_t i = 0; i < FORK_BACKGROUND_THREADS; i++) {
        CHECK(pthread_create(&threads[i], NULL, fork_background, (void *)(uintptr_t)i) == 0,
              "pthread_create");
    }
    for (int i = 0; i < SCALED_ITERATIONS(FORK_COUNT); i++) {
        void *parent_block = malloc(1000); /* allocations right around the fork */
        pid_t pid = fork();
        if (pid == 0) {
            alarm(CHILD_TIMEOUT_SECONDS * slowdown); /* a deadlocked child dies by SIGALRM */
            _exit(child_work(i));
        }
        free(parent_block);
        CHECK(pid > 0, "fork failed: errno %d", errno);
        if (pid < 0) break;
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "child %d: %s %d (signal 14 = deadlocked in the child)", i,
              WIFEXITED(status) ? "exit status" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    atomic_store(&fork_stop, true);
    for (size_t i = 0; i < FORK_BACKGROUND_THREADS; i++) pthread_join(threads[i], NULL);
}

/* ---- Extra checks from the backend's own sources (heaphook_add_backend_test) ------------------
 */

int heaphook_conformance_extra(const char *backend) __attribute__((weak));

static void group_extra(void) {
    int failures = heaphook_conformance_extra(expected_backend);
    CHECK(failures == 0, "heaphook_conformance_extra reported %d failures", failures);
}

/* ---- main
 * ------------------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    expected_backend = argc > 1 ? argv[1] : getenv("HEAPHOOK_EXPECTED_BACKEND");
    if (expected_backend == NULL) expected_backend = HEAPHOOK_CONFORMANCE_BACKEND;
    if (expected_backend == NULL) {
        fprintf(stderr, "usage: %s <expected backend name, or glibc>\n", argv[0]);
        return 2;
    }
    against_glibc = strcmp(expected_backend, "glibc") == 0;
    const char *slowdown_text = getenv("HEAPHOOK_CONFORMANCE_SLOWDOWN");
    if (slowdown_text != NULL) {
        char *end = NULL;
        unsigned long value = strtoul(slowdown_text, &end, 10);
        if (end == slowdown_text || *end != '\0' || value < 1 || value > MAX_SLOWDOWN) {
            fprintf(stderr,
                    "HEAPHOOK_CONFORMANCE_SLOWDOWN=%s: expected a whole number from 1 to %d "
                    "(e.g. HEAPHOOK_CONFORMANCE_SLOWDOWN=10 under qemu-aarch64)\n",
                    slowdown_text, MAX_SLOWDOWN);
            return 2;
        }
        slowdown = (unsigned)value;
    }
    if (argc > 2) {
        selected_groups = argv + 2;
        selected_group_count = argc - 2;
    }
    signal(SIGALRM, on_timeout);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("heaphook conformance: backend %s\n", expected_backend);

    run_group("backend", group_backend);
    run_group("sizes", group_sizes);
    run_group("calloc", group_calloc);
    run_group("realloc", group_realloc);
    run_group("reallocarray", group_reallocarray);
    run_group("alignment", group_alignment);
    run_group("invalid-alignment", group_invalid_alignment);
    run_group("exhaustion", group_exhaustion);
    run_group("statistics", group_statistics);
    run_group("churn", group_churn);
    run_group("threads", group_threads);
    run_group("fork", group_fork);
    if (heaphook_conformance_extra != NULL) run_group("extra", group_extra);

    unsigned long checks = atomic_load(&total_checks), failures = atomic_load(&total_failures);
    printf("heaphook conformance: backend %s: %u groups, %lu checks, %lu failed%s\n",
           expected_backend, groups_run, checks, failures,
           groups_failed ? " (see FAIL lines above)" : "");
    return failures == 0 ? 0 : 1;
}
