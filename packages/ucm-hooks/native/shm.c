/*
 * shm.c — the sizes of attached System V segments, for the VM events of shmdt: recorded by the
 * shmat hook, read by the shmdt hook, and /proc/self/maps for the addresses not recorded.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "heaphook/os.h"
#include "ucm_internal.h"

/* The size of the mapping starting at address, from /proc/self/maps (no allocation). */
size_t ucm_mapping_size(const void *address) {
    int fd = (int)HEAPHOOK_OS_UNOBSERVED(SYS_openat, AT_FDCWD, "/proc/self/maps",
                                         O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0) return 0;
    char buf[4096];
    size_t have = 0, size = 0;
    bool done = false;
    while (!done) {
        long n = HEAPHOOK_OS_UNOBSERVED(SYS_read, fd, buf + have, sizeof buf - 1 - have, 0, 0, 0);
        if (n <= 0) break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf;
        char *newline;
        while ((newline = strchr(line, '\n')) != NULL) {
            *newline = '\0';
            char *end;
            unsigned long start = strtoul(line, &end, 16);
            if (*end == '-' && start == (uintptr_t)address) {
                size = strtoul(end + 1, NULL, 16) - start;
                done = true;
                break;
            }
            line = newline + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    HEAPHOOK_OS_UNOBSERVED(SYS_close, fd, 0, 0, 0, 0, 0);
    return size;
}

/* ---- Attached segments: (address, size) recorded by shmat, read by shmdt ------------------
 *
 * A fixed open-addressing table (linear probing), lock-free: a slot's key goes empty ->
 * reserved (CAS, by the one inserting thread) -> address (release, after the size is written)
 * -> tombstone (CAS, by the one detaching thread, after it read the size). No allocation, no
 * lock, so nothing to take around fork (the child inherits the table with the attachments).
 * shmdt falls back to /proc/self/maps for addresses not in the table: segments attached
 * before the hooks were installed, while no handler was set, from inside a handler, or when
 * the table was full. */

#define UCM_SHM_SLOTS 1024 /* power of two */
#define UCM_SHM_EMPTY ((uintptr_t)0)
#define UCM_SHM_RESERVED ((uintptr_t)1)
#define UCM_SHM_TOMBSTONE ((uintptr_t)2)

static struct {
    _Atomic uintptr_t key;
    size_t size;
} ucm_shm_table[UCM_SHM_SLOTS];
static _Atomic int ucm_shm_live; /* entries present (approximate while inserts run) */

static size_t ucm_shm_hash(uintptr_t address) {
    uint64_t h = (uint64_t)address >> 12;
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 40) & (UCM_SHM_SLOTS - 1);
}

/* Removes the entry of address; returns its size, or 0 when absent. */
size_t ucm_shm_forget(const void *address) {
    uintptr_t key = (uintptr_t)address;
    if (key <= UCM_SHM_TOMBSTONE) return 0;
    if (atomic_load_explicit(&ucm_shm_live, memory_order_acquire) == 0) return 0;
    size_t i = ucm_shm_hash(key);
    for (size_t n = 0; n < UCM_SHM_SLOTS; ++n, i = (i + 1) & (UCM_SHM_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&ucm_shm_table[i].key, memory_order_acquire);
        if (k == UCM_SHM_EMPTY) return 0;
        if (k != key) continue;
        size_t size = ucm_shm_table[i].size;
        if (atomic_compare_exchange_strong_explicit(&ucm_shm_table[i].key, &k, UCM_SHM_TOMBSTONE,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            atomic_fetch_sub_explicit(&ucm_shm_live, 1, memory_order_relaxed);
            return size;
        }
        return 0; /* another thread detached the same address at the same time */
    }
    return 0;
}

/* Records (address, size), replacing a stale entry of the same address. */
void ucm_shm_remember(const void *address, size_t size) {
    uintptr_t key = (uintptr_t)address;
    if (key <= UCM_SHM_TOMBSTONE || size == 0) return;
    ucm_shm_forget(address);
    size_t i = ucm_shm_hash(key);
    for (size_t n = 0; n < UCM_SHM_SLOTS; ++n, i = (i + 1) & (UCM_SHM_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&ucm_shm_table[i].key, memory_order_relaxed);
        if (k != UCM_SHM_EMPTY && k != UCM_SHM_TOMBSTONE) continue;
        if (!atomic_compare_exchange_strong_explicit(&ucm_shm_table[i].key, &k, UCM_SHM_RESERVED,
                                                     memory_order_acquire, memory_order_relaxed)) {
            continue;
        }
        ucm_shm_table[i].size = size;
        atomic_fetch_add_explicit(&ucm_shm_live, 1, memory_order_relaxed);
        atomic_store_explicit(&ucm_shm_table[i].key, key, memory_order_release);
        return;
    }
    /* Full: shmdt of this address will read /proc/self/maps. */
}
