/*
 * ucm_events.c — the behaviour of UCX's own ucm tests (test/gtest/ucm/malloc_hook.cc and
 * mmap_hook.cc), ported to heaphook's memory events. Written against libucm's names through
 * heaphook/ucm_compat.h.
 *
 *   ucm_events preload <group> <dlopen-lib>            libheaphook_ucm.so preloaded
 *   ucm_events reloc:<libheaphook_ucm.so> <group> <dlopen-lib>   dlopen'ed at start (GOT patching)
 *
 * group: all, or one of the names below; "malloc" only under a heaphook backend preload.
 * Prints "FAIL <group>: ..." per failed check and "<group>: N checks, M failed" at the end.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaphook/reloc.h"
#include "heaphook/ucm_compat.h"

/* The API, looked up at run time so that the program works in both modes. */
static ucs_status_t (*set_handler)(int, int, ucm_event_callback_t, void *);
static void (*unset_handler)(int, ucm_event_callback_t, void *);
static ucs_status_t (*test_events)(int);
static const char *(*install_mode)(void);
#undef ucm_set_event_handler
#undef ucm_unset_event_handler
#define ucm_set_event_handler set_handler
#define ucm_unset_event_handler unset_handler

static const char *group = "?";
static int checks, failures;
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        ++checks;                                                            \
        if (!(cond)) {                                                       \
            ++failures;                                                      \
            printf("FAIL %s:%d %s: %s: ", group, __LINE__, __func__, #cond); \
            printf(__VA_ARGS__);                                             \
            printf("\n");                                                    \
            fflush(stdout);                                                  \
        }                                                                    \
    } while (0)

/* ---- Recording ------------------------------------------------------------------------- */

struct record {
    int type;
    void *address; /* result for native events that return one */
    size_t size;
    long result;
};
#define MAX_RECORDS 65536
static struct record records[MAX_RECORDS];
static int record_count;
static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;
static const int ALL = UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_MREMAP | UCM_EVENT_SHMAT |
                       UCM_EVENT_SHMDT | UCM_EVENT_SBRK | UCM_EVENT_MADVISE | UCM_EVENT_BRK |
                       UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED;

static void recorder(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    (void)arg;
    struct record r = {.type = type};
    switch (type) {
        case UCM_EVENT_MMAP:
            r.address = ev->mmap.result, r.size = ev->mmap.size;
            break;
        case UCM_EVENT_MUNMAP:
            r.address = ev->munmap.address, r.size = ev->munmap.size, r.result = ev->munmap.result;
            break;
        case UCM_EVENT_MREMAP:
            r.address = ev->mremap.result, r.size = ev->mremap.new_size;
            break;
        case UCM_EVENT_SHMAT:
            r.address = ev->shmat.result;
            break;
        case UCM_EVENT_SHMDT:
            r.address = (void *)ev->shmdt.shmaddr, r.result = ev->shmdt.result;
            break;
        case UCM_EVENT_SBRK:
            r.address = ev->sbrk.result, r.size = (size_t)ev->sbrk.increment;
            break;
        case UCM_EVENT_BRK:
            r.address = ev->brk.addr, r.result = ev->brk.result;
            break;
        case UCM_EVENT_MADVISE:
            r.address = ev->madvise.addr, r.size = ev->madvise.length,
            r.result = ev->madvise.advice;
            break;
        case UCM_EVENT_VM_MAPPED:
            r.address = ev->vm_mapped.address, r.size = ev->vm_mapped.size;
            break;
        case UCM_EVENT_VM_UNMAPPED:
            r.address = ev->vm_unmapped.address, r.size = ev->vm_unmapped.size;
            break;
        default:
            break;
    }
    pthread_mutex_lock(&record_lock);
    if (record_count < MAX_RECORDS) records[record_count++] = r;
    pthread_mutex_unlock(&record_lock);
}

static void reset(void) {
    pthread_mutex_lock(&record_lock);
    record_count = 0;
    pthread_mutex_unlock(&record_lock);
}

/* Index of the first record of type at address (any size when size is 0) from index from. */
static int find(int from, int type, void *address, size_t size) {
    for (int i = from; i < record_count; ++i) {
        if (records[i].type == type && records[i].address == address &&
            (size == 0 || records[i].size == size)) {
            return i;
        }
    }
    return -1;
}
static int count_type(int type) {
    int n = 0;
    for (int i = 0; i < record_count; ++i) n += records[i].type == type;
    return n;
}
/* A VM_MAPPED / VM_UNMAPPED record covering [p, p + size). */
static bool covered(int type, void *p, size_t size) {
    for (int i = 0; i < record_count; ++i) {
        char *a = records[i].address;
        if (records[i].type == type && (char *)p >= a && (char *)p + size <= a + records[i].size) {
            return true;
        }
    }
    return false;
}

static size_t page;

/* ---- Groups ---------------------------------------------------------------------------- */

static void test_mmap(void) {
    reset();
    size_t size = 256 * page;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    int m = find(0, UCM_EVENT_MMAP, p, size);
    int v = find(0, UCM_EVENT_VM_MAPPED, p, size);
    CHECK(m >= 0 && v > m, "MMAP then VM_MAPPED (%d, %d)", m, v);
    reset();
    CHECK(munmap(p, size) == 0, "munmap");
    int u = find(0, UCM_EVENT_VM_UNMAPPED, p, size);
    int mu = find(0, UCM_EVENT_MUNMAP, p, size);
    CHECK(u >= 0 && mu > u, "VM_UNMAPPED before MUNMAP (%d, %d)", u, mu);
    CHECK(mu >= 0 && records[mu].result == 0, "MUNMAP result");
}

static void test_map_fixed(void) {
    size_t size = 4 * page;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    reset();
    char *q = mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(q == p, "MAP_FIXED");
    int u = find(0, UCM_EVENT_VM_UNMAPPED, p, size);
    int m = find(0, UCM_EVENT_MMAP, p, size);
    int v = find(0, UCM_EVENT_VM_MAPPED, p, size);
    CHECK(u >= 0 && m > u && v > m, "VM_UNMAPPED, MMAP, VM_MAPPED (%d %d %d)", u, m, v);
    munmap(p, size);
}

static void test_mremap(void) {
    size_t size = 4 * page;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* grow */
    reset();
    char *q = mremap(p, size, 64 * page, MREMAP_MAYMOVE);
    CHECK(q != MAP_FAILED, "grow");
    int u = find(0, UCM_EVENT_VM_UNMAPPED, p, size);
    int r = find(0, UCM_EVENT_MREMAP, q, 64 * page);
    int v = find(0, UCM_EVENT_VM_MAPPED, q, 64 * page);
    CHECK(u >= 0 && r > u && v > r, "grow events (%d %d %d)", u, r, v);
    /* shrink */
    reset();
    char *s = mremap(q, 64 * page, 2 * page, 0);
    CHECK(s == q, "shrink");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, q, 64 * page) >= 0, "shrink VM_UNMAPPED");
    CHECK(find(0, UCM_EVENT_VM_MAPPED, q, 2 * page) >= 0, "shrink VM_MAPPED");
    /* MREMAP_FIXED onto a reserved range */
    char *target = mmap(NULL, 8 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    reset();
    char *f = mremap(s, 2 * page, 8 * page, MREMAP_MAYMOVE | MREMAP_FIXED, target);
    CHECK(f == target, "MREMAP_FIXED");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, s, 2 * page) >= 0, "fixed: old range unmapped");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, target, 8 * page) >= 0, "fixed: target replaced");
    CHECK(find(0, UCM_EVENT_VM_MAPPED, target, 8 * page) >= 0, "fixed: mapped");
    munmap(target, 8 * page);
}

static void test_shm(void) {
    size_t size = 64 * page;
    int id = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    int id2 = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    if (id < 0 || id2 < 0) {
        printf("SKIP shm: shmget: %s\n", strerror(errno));
        return;
    }
    reset();
    char *a = shmat(id, NULL, 0);
    CHECK(a != (void *)-1, "shmat");
    int s = find(0, UCM_EVENT_SHMAT, a, 0);
    int v = find(0, UCM_EVENT_VM_MAPPED, a, size);
    CHECK(s >= 0 && v > s, "SHMAT then VM_MAPPED (%d %d)", s, v);
    reset();
    char *b = shmat(id2, a, SHM_REMAP);
    CHECK(b == a, "SHM_REMAP");
    int u = find(0, UCM_EVENT_VM_UNMAPPED, a, size);
    v = find(0, UCM_EVENT_VM_MAPPED, a, size);
    CHECK(u >= 0 && v > u, "SHM_REMAP: VM_UNMAPPED then VM_MAPPED (%d %d)", u, v);
    reset();
    CHECK(shmdt(b) == 0, "shmdt");
    u = find(0, UCM_EVENT_VM_UNMAPPED, a, size);
    int d = find(0, UCM_EVENT_SHMDT, a, 0);
    CHECK(u >= 0 && d > u, "VM_UNMAPPED then SHMDT (%d %d)", u, d);
    shmctl(id, IPC_RMID, NULL);
    shmctl(id2, IPC_RMID, NULL);
}

/* A segment attached before the hooks were installed (before the dlopen in relocation mode;
 * in preload mode before any handler was set, so the hook did not record it): shmdt finds its
 * size in /proc/self/maps. Then one attached with no handler at an address the table had
 * recorded for another segment: the stale entry is not used. */
static int pre_id = -1;
static char *pre_segment = (char *)-1;
static size_t pre_size;
static void test_shm_preinstalled(void) {
    if (pre_id < 0 || pre_segment == (char *)-1) {
        printf("SKIP shm_preinstalled: no segment attached before install\n");
        return;
    }
    reset();
    CHECK(shmdt(pre_segment) == 0, "shmdt");
    int u = find(0, UCM_EVENT_VM_UNMAPPED, pre_segment, pre_size);
    int d = find(0, UCM_EVENT_SHMDT, pre_segment, 0);
    CHECK(u >= 0 && d > u, "VM_UNMAPPED of %zu bytes then SHMDT (%d %d)", pre_size, u, d);
    CHECK(count_type(UCM_EVENT_VM_UNMAPPED) == 1, "one VM_UNMAPPED");
    shmctl(pre_id, IPC_RMID, NULL);

    /* Recorded at a, detached and re-attached (smaller) while no handler was set. */
    int id = shmget(IPC_PRIVATE, 16 * page, IPC_CREAT | 0600);
    int id2 = shmget(IPC_PRIVATE, 3 * page, IPC_CREAT | 0600);
    CHECK(id >= 0 && id2 >= 0, "shmget");
    char *a = shmat(id, NULL, 0);
    CHECK(a != (char *)-1, "shmat");
    unset_handler(ALL, recorder, NULL);
    CHECK(shmdt(a) == 0, "shmdt without handler");
    char *b = shmat(id2, a, 0);
    CHECK(b == a, "shmat at the same address without handler");
    CHECK(set_handler(ALL, 0, recorder, NULL) == UCS_OK, "set recorder");
    reset();
    CHECK(shmdt(b) == 0, "shmdt");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, b, 3 * page) >= 0, "VM_UNMAPPED of the new segment");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, b, 16 * page) < 0, "not the stale size");
    shmctl(id, IPC_RMID, NULL);
    shmctl(id2, IPC_RMID, NULL);
}

/* Two threads attach and detach their own segments (different sizes) at the same time. */
#define SHM_THREAD_LOOPS 2000
static _Atomic int shm_counts[2][4]; /* per size: VM_MAPPED, VM_UNMAPPED, SHMAT, SHMDT */
static _Atomic int shm_wrong;
static size_t shm_thread_size[2];
static __thread int in_shm_loop; /* count only the loop's events (not a backend's mappings) */
static void shm_counter(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    (void)arg;
    if (!in_shm_loop) return;
    if (type == UCM_EVENT_VM_MAPPED || type == UCM_EVENT_VM_UNMAPPED) {
        int which = ev->vm_mapped.size == shm_thread_size[0]   ? 0
                    : ev->vm_mapped.size == shm_thread_size[1] ? 1
                                                               : -1;
        if (which < 0) {
            ++shm_wrong;
            return;
        }
        ++shm_counts[which][type == UCM_EVENT_VM_MAPPED ? 0 : 1];
    } else if (type == UCM_EVENT_SHMAT) {
        ++shm_counts[0][2];
    } else if (type == UCM_EVENT_SHMDT) {
        ++shm_counts[0][3];
    }
}
struct shm_thread_arg {
    int id;
    int failures;
};
static void *shm_thread(void *argp) {
    struct shm_thread_arg *arg = argp;
    in_shm_loop = 1;
    for (int i = 0; i < SHM_THREAD_LOOPS; ++i) {
        char *p = shmat(arg->id, NULL, 0);
        if (p == (char *)-1) {
            ++arg->failures;
            continue;
        }
        p[0] = 1;
        if (shmdt(p) != 0) ++arg->failures;
    }
    in_shm_loop = 0;
    return NULL;
}
static void test_shm_threads(void) {
    shm_thread_size[0] = 5 * page;
    shm_thread_size[1] = 9 * page;
    int ids[2];
    for (int t = 0; t < 2; ++t) ids[t] = shmget(IPC_PRIVATE, shm_thread_size[t], IPC_CREAT | 0600);
    if (ids[0] < 0 || ids[1] < 0) {
        printf("SKIP shm_threads: shmget: %s\n", strerror(errno));
        return;
    }
    unset_handler(ALL, recorder, NULL); /* only the counter, so the threads do not serialise */
    int events = UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED | UCM_EVENT_SHMAT | UCM_EVENT_SHMDT;
    CHECK(set_handler(events, 0, shm_counter, NULL) == UCS_OK, "set counter");
    pthread_t threads[2];
    struct shm_thread_arg args[2] = {{.id = ids[0]}, {.id = ids[1]}};
    for (int t = 0; t < 2; ++t) pthread_create(&threads[t], NULL, shm_thread, &args[t]);
    for (int t = 0; t < 2; ++t) pthread_join(threads[t], NULL);
    unset_handler(events, shm_counter, NULL);
    CHECK(set_handler(ALL, 0, recorder, NULL) == UCS_OK, "set recorder");
    CHECK(args[0].failures == 0 && args[1].failures == 0, "shmat/shmdt failed %d %d",
          args[0].failures, args[1].failures);
    for (int t = 0; t < 2; ++t) {
        CHECK(shm_counts[t][0] == SHM_THREAD_LOOPS, "thread %d VM_MAPPED %d", t, shm_counts[t][0]);
        CHECK(shm_counts[t][1] == SHM_THREAD_LOOPS, "thread %d VM_UNMAPPED %d", t,
              shm_counts[t][1]);
    }
    CHECK(shm_counts[0][2] == 2 * SHM_THREAD_LOOPS, "SHMAT %d", shm_counts[0][2]);
    CHECK(shm_counts[0][3] == 2 * SHM_THREAD_LOOPS, "SHMDT %d", shm_counts[0][3]);
    CHECK(shm_wrong == 0, "%d VM events of another size", shm_wrong);
    for (int t = 0; t < 2; ++t) shmctl(ids[t], IPC_RMID, NULL);
}

static void test_sbrk(void) {
    intptr_t inc = 64 * (intptr_t)page;
    reset();
    char *old = sbrk(inc);
    CHECK(old != (void *)-1, "sbrk up");
    CHECK(find(0, UCM_EVENT_SBRK, old, (size_t)inc) >= 0, "SBRK event");
    CHECK(find(0, UCM_EVENT_VM_MAPPED, old, (size_t)inc) >= 0, "sbrk up: VM_MAPPED");
    reset();
    CHECK(sbrk(-inc) != (void *)-1, "sbrk down");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, old, (size_t)inc) >= 0, "sbrk down: VM_UNMAPPED");
    CHECK(count_type(UCM_EVENT_VM_MAPPED) == 0, "sbrk down: no VM_MAPPED");
    char *current = sbrk(0);
    reset();
    CHECK(brk(current + inc) == 0, "brk up");
    CHECK(find(0, UCM_EVENT_BRK, current + inc, 0) >= 0, "BRK event");
    CHECK(find(0, UCM_EVENT_VM_MAPPED, current, (size_t)inc) >= 0, "brk up: VM_MAPPED");
    reset();
    CHECK(brk(current) == 0, "brk down");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, current, (size_t)inc) >= 0, "brk down: VM_UNMAPPED");
    /* The break the C library caches (its malloc grows the heap with it) stays the kernel's:
     * hooked sbrk/brk interleaved with malloc, then sbrk(0) against the brk system call. */
    void *blocks[64];
    for (int round = 0; round < 50; ++round) {
        char *top = sbrk(inc);
        CHECK(top != (void *)-1, "round %d: sbrk up", round);
        for (int i = 0; i < 64; ++i) blocks[i] = malloc(100 + 997 * (size_t)i);
        for (int i = 0; i < 64; ++i) free(blocks[i]);
        if (sbrk(0) == top + inc) CHECK(sbrk(-inc) == top + inc, "round %d: sbrk down", round);
        CHECK(brk(sbrk(0)) == 0, "round %d: brk", round);
    }
    CHECK(sbrk(0) == (void *)syscall(SYS_brk, 0), "sbrk(0) %p, kernel's break %p", sbrk(0),
          (void *)syscall(SYS_brk, 0));
    errno = 0;
    CHECK(brk((void *)-1) == -1 && errno == ENOMEM, "brk((void *)-1): errno %d", errno);
}

static void test_madvise(void) {
    size_t size = 16 * page;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 1, size);
    reset();
    CHECK(madvise(p, size, MADV_DONTNEED) == 0, "DONTNEED");
    int u = find(0, UCM_EVENT_VM_UNMAPPED, p, size);
    int m = find(0, UCM_EVENT_MADVISE, p, size);
    CHECK(u >= 0 && m > u, "VM_UNMAPPED then MADVISE (%d %d)", u, m);
    CHECK(p[0] == 0, "DONTNEED really happened");
    reset();
    CHECK(madvise(p, size, MADV_WILLNEED) == 0, "WILLNEED");
    CHECK(find(0, UCM_EVENT_MADVISE, p, size) >= 0, "WILLNEED: MADVISE");
    CHECK(count_type(UCM_EVENT_VM_UNMAPPED) == 0, "WILLNEED: no VM_UNMAPPED");
    reset();
    CHECK(madvise(p, size, MADV_FREE) == 0 || errno == EINVAL, "FREE");
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, p, size) >= 0, "FREE: VM_UNMAPPED");
    munmap(p, size);
}

/* Handlers that modify parameters or set the result. */
static char fake_mapping[4096] __attribute__((aligned(4096)));
static size_t magic_grow, magic_fake;
static void *post_result;
static void modifier(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    (void)type, (void)arg;
    if (ev->mmap.size == magic_grow) ev->mmap.size = 8 * page;
    if (ev->mmap.size == magic_fake) ev->mmap.result = fake_mapping;
}
static void observer(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    (void)type, (void)arg;
    post_result = ev->mmap.result;
}

static void test_modify(void) {
    magic_grow = 3 * page + 7;
    magic_fake = 5 * page + 3;
    CHECK(set_handler(UCM_EVENT_MMAP, -1, modifier, NULL) == UCS_OK, "set modifier");
    CHECK(set_handler(UCM_EVENT_MMAP, 1, observer, NULL) == UCS_OK, "set observer");
    reset();
    char *p = mmap(NULL, magic_grow, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    CHECK(find(0, UCM_EVENT_VM_MAPPED, p, 8 * page) >= 0, "size changed by the handler");
    p[8 * page - 1] = 1; /* the 8th page exists */
    CHECK(post_result == p, "observer after the call saw the result");
    munmap(p, 8 * page);
    reset();
    char *f = mmap(NULL, magic_fake, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(f == fake_mapping, "result set by the handler: %p", (void *)f);
    CHECK(post_result == fake_mapping, "observer saw the set result");
    unset_handler(UCM_EVENT_MMAP, modifier, NULL);
    unset_handler(UCM_EVENT_MMAP, observer, NULL);
    p = mmap(NULL, magic_grow, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED && p != fake_mapping, "handlers removed");
    reset();
    munmap(p, magic_grow);
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, p, 4 * page) >= 0, "unmapped the 4 pages");
}

static void test_failed(void) {
    reset();
    errno = 0;
    void *p = mmap(NULL, page, PROT_READ, MAP_PRIVATE, -1, 0); /* no fd, not anonymous */
    CHECK(p == MAP_FAILED && errno == EBADF, "mmap fails with EBADF (errno %d)", errno);
    CHECK(find(0, UCM_EVENT_MMAP, MAP_FAILED, page) >= 0, "MMAP event with the failure");
    CHECK(count_type(UCM_EVENT_VM_MAPPED) == 0, "no VM_MAPPED");
    reset();
    errno = 0;
    CHECK(munmap((char *)fake_mapping + 1, page) == -1 && errno == EINVAL, "munmap EINVAL");
    int m = find(0, UCM_EVENT_MUNMAP, (char *)fake_mapping + 1, page);
    CHECK(m >= 0 && records[m].result == -1, "MUNMAP result -1");
}

static const char *dl_library;
static void test_dlopen(void) {
    void *handle = dlopen(dl_library, RTLD_NOW | RTLD_LOCAL);
    CHECK(handle != NULL, "dlopen %s: %s", dl_library, dlerror());
    if (handle == NULL) return;
    void *(*lib_map)(size_t) = (void *(*)(size_t))dlsym(handle, "ucm_test_lib_map");
    int (*lib_unmap)(void *, size_t) = (int (*)(void *, size_t))dlsym(handle, "ucm_test_lib_unmap");
    reset();
    void *p = lib_map(32 * page);
    CHECK(p != MAP_FAILED && find(0, UCM_EVENT_VM_MAPPED, p, 32 * page) >= 0,
          "mmap from a library dlopen'ed after install");
    lib_unmap(p, 32 * page);
    CHECK(find(0, UCM_EVENT_VM_UNMAPPED, p, 32 * page) >= 0, "munmap from that library");
    dlclose(handle);
}

static _Atomic int stop;
static void *dlopen_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; ++i) {
        void *handle = dlopen(dl_library, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) continue;
        void *(*lib_map)(size_t) = (void *(*)(size_t))dlsym(handle, "ucm_test_lib_map");
        int (*lib_unmap)(void *, size_t) =
            (int (*)(void *, size_t))dlsym(handle, "ucm_test_lib_unmap");
        void *p = lib_map(page);
        lib_unmap(p, page);
        dlclose(handle);
    }
    return NULL;
}
static void *map_thread(void *arg) {
    (void)arg;
    while (!stop) {
        void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(p, page);
    }
    return NULL;
}

static void test_dlopen_threads(void) {
    alarm(60); /* a deadlock fails the test instead of hanging it */
    pthread_t t[3];
    stop = 0;
    pthread_create(&t[0], NULL, dlopen_thread, NULL);
    pthread_create(&t[1], NULL, dlopen_thread, NULL);
    pthread_create(&t[2], NULL, map_thread, NULL);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    stop = 1;
    pthread_join(t[2], NULL);
    alarm(0);
    CHECK(record_count > 0, "events while dlopen ran");
}

static int counted[32];
static void counter(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    size_t expected = *(size_t *)arg;
    size_t size = 0;
    if (type == UCM_EVENT_MMAP) size = ev->mmap.size;
    if (type == UCM_EVENT_MUNMAP) size = ev->munmap.size;
    if (type == UCM_EVENT_VM_MAPPED || type == UCM_EVENT_VM_UNMAPPED) size = ev->vm_mapped.size;
    if (size == expected) __atomic_fetch_add(&counted[__builtin_ctz(type)], 1, __ATOMIC_RELAXED);
}

static void test_counts(void) {
    static size_t size;
    size = 7 * page;
    memset(counted, 0, sizeof counted);
    int events = UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED;
    CHECK(set_handler(events, 0, counter, &size) == UCS_OK, "set counter");
    const int loops = 1000;
    for (int i = 0; i < loops; ++i) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(p, size);
    }
    unset_handler(events, counter, &size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, size);
    CHECK(counted[0] == loops, "MMAP %d", counted[0]);
    CHECK(counted[1] == loops, "MUNMAP %d", counted[1]);
    CHECK(counted[16] == loops, "VM_MAPPED %d", counted[16]);
    CHECK(counted[17] == loops, "VM_UNMAPPED %d", counted[17]);
}

/* A handler that allocates: no deadlock, no recursion. */
static _Atomic int malloc_handler_calls;
static void allocating(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    (void)type, (void)ev, (void)arg;
    void *big = malloc(1 << 20); /* large enough to be mapped by a backend */
    void *small = malloc(100);
    free(small);
    free(big);
    ++malloc_handler_calls;
}

static void test_handler_malloc(void) {
    malloc_handler_calls = 0;
    CHECK(set_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 0, allocating, NULL) == UCS_OK,
          "set");
    for (int i = 0; i < 100; ++i) {
        void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(p, page);
        free(malloc(4 << 20));
    }
    unset_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, allocating, NULL);
    CHECK(malloc_handler_calls >= 200, "calls %d", malloc_handler_calls);
}

/* Handlers added and removed while other threads map memory. */
static _Atomic long churn_calls;
static void churn_handler(ucm_event_type_t type, ucm_event_t *ev, void *arg) {
    (void)type, (void)ev, (void)arg;
    ++churn_calls;
}

static void test_add_remove(void) {
    alarm(60); /* writer starvation fails the test instead of hanging it */
    pthread_t t[2];
    stop = 0;
    pthread_create(&t[0], NULL, map_thread, NULL);
    pthread_create(&t[1], NULL, map_thread, NULL);
    /* The mapping threads reach the handler at least once (on a loaded machine they may get no
     * CPU inside the short windows of the churn below, which would leave "never called"). */
    set_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_MMAP, 0, churn_handler, NULL);
    while (churn_calls == 0) usleep(100);
    unset_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_MMAP, churn_handler, NULL);
    for (int i = 0; i < 2000; ++i) {
        set_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_MMAP, i % 7 - 3, churn_handler, NULL);
        if (i % 100 == 0) usleep(100);
        unset_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_MMAP, churn_handler, NULL);
    }
    long after = churn_calls;
    usleep(20000);
    CHECK(churn_calls == after, "called after removal");
    stop = 1;
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    alarm(0);
    CHECK(after > 0, "never called");
}

/* More threads than the library has reader slots (256), all alive at once and each having
 * mapped once before the others go on, so that some take the fallback path: exact counts while a
 * handler is added and removed 200 times, and the removed handler is never called afterwards. Then
 * 600 short-lived threads one after another (a slot is freed when its thread exits and claimed
 * again): exact counts. */
#define MANY_THREADS 300
#define MANY_LOOPS 20
#define SHORT_THREADS 600
static pthread_barrier_t many_barrier;
static void *many_thread(void *arg) {
    size_t size = *(size_t *)arg;
    /* each maps once (a thread claims its slot then), waits for all, then the rest */
    void *first = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(first, size);
    pthread_barrier_wait(&many_barrier);
    for (int i = 1; i < MANY_LOOPS; ++i) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(p, size);
    }
    return NULL;
}
static void *short_thread(void *arg) {
    size_t size = *(size_t *)arg;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, size);
    return NULL;
}

static void test_threads(void) {
    alarm(120);
    static size_t size;
    size = 11 * page;
    memset(counted, 0, sizeof counted);
    int events = UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED;
    CHECK(set_handler(events, 0, counter, &size) == UCS_OK, "set counter");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_barrier_init(&many_barrier, NULL, MANY_THREADS + 1);
    static pthread_t threads[MANY_THREADS];
    for (int i = 0; i < MANY_THREADS; ++i) {
        if (pthread_create(&threads[i], &attr, many_thread, &size) != 0) {
            printf("FAIL threads: pthread_create %d: %s\n", i, strerror(errno));
            exit(1); /* the barrier would never open */
        }
    }
    pthread_barrier_wait(&many_barrier);
    for (int i = 0; i < 200; ++i) {
        set_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_MMAP, i % 7 - 3, churn_handler, NULL);
        unset_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_MMAP, churn_handler, NULL);
    }
    long after = churn_calls;
    for (int i = 0; i < MANY_THREADS; ++i) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&many_barrier);
    CHECK(churn_calls == after, "called after removal: %ld then %ld", after, (long)churn_calls);
    const int want = MANY_THREADS * MANY_LOOPS;
    CHECK(counted[0] == want, "MMAP %d of %d", counted[0], want);
    CHECK(counted[1] == want, "MUNMAP %d of %d", counted[1], want);
    CHECK(counted[16] == want, "VM_MAPPED %d of %d", counted[16], want);
    CHECK(counted[17] == want, "VM_UNMAPPED %d of %d", counted[17], want);
    memset(counted, 0, sizeof counted);
    for (int i = 0; i < SHORT_THREADS; ++i) {
        pthread_t t;
        if (pthread_create(&t, &attr, short_thread, &size) != 0) {
            CHECK(0, "pthread_create %d: %s", i, strerror(errno));
            break;
        }
        pthread_join(t, NULL);
    }
    unset_handler(events, counter, &size);
    pthread_attr_destroy(&attr);
    CHECK(counted[16] == SHORT_THREADS, "short-lived: VM_MAPPED %d", counted[16]);
    CHECK(counted[17] == SHORT_THREADS, "short-lived: VM_UNMAPPED %d", counted[17]);
    alarm(0);
}

/* Forks while two other threads map memory (their handler, the recorder, takes a mutex: the
 * child must not inherit it held); the child's own mapping raises its event. */
static void test_fork(void) {
    pthread_t t[2];
    stop = 0;
    pthread_create(&t[0], NULL, map_thread, NULL);
    pthread_create(&t[1], NULL, map_thread, NULL);
    for (int i = 0; i < 100; ++i) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);
            reset();
            void *p = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            _exit(find(0, UCM_EVENT_VM_MAPPED, p, page) >= 0 ? 0 : 1);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        CHECK(status == 0, "child %d: status %d", i, status);
    }
    stop = 1;
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
}

static void test_selftest(void) {
    CHECK(test_events(ALL) == UCS_OK, "self-test");
}

/* The self-test notices a hook that is not in place: the program's own GOT entry of mmap is
 * put back to the C library's mmap (the core's one-object API), so calls from here raise no
 * events; the self-test must name MMAP. (Relocation mode: in preload mode there is no GOT
 * entry to undo.) */
static void test_selftest_broken(void) {
    heaphook_reloc_object *program;
    CHECK(heaphook_reloc_open(&program, NULL) == 0, "open");
    void *libc_mmap = dlsym(RTLD_NEXT, "mmap");
    void *hook = NULL;
    CHECK(heaphook_reloc_replace(program, "mmap", libc_mmap, &hook) == 0, "unpatch mmap");
    void *p = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    reset();
    munmap(p, page);
    CHECK(test_events(UCM_EVENT_MMAP | UCM_EVENT_MUNMAP) == UCS_ERR_UNSUPPORTED,
          "self-test did not notice");
    CHECK(heaphook_reloc_replace(program, "mmap", hook, NULL) == 0, "restore");
    CHECK(test_events(UCM_EVENT_MMAP | UCM_EVENT_MUNMAP) == UCS_OK, "self-test after restore");
    heaphook_reloc_close(program);
}

/* Under a heaphook backend (which maps through heaphook_os_map): malloc raises VM events. */
static void test_malloc(void) {
    reset();
    char *small[2000];
    for (int i = 0; i < 2000; ++i) small[i] = malloc(16 << 10); /* 32 MB in small blocks */
    CHECK(covered(UCM_EVENT_VM_MAPPED, small[1999], 16 << 10), "small: last block mapped");
    for (int i = 0; i < 2000; ++i) free(small[i]);
    reset();
    size_t big = 64 << 20;
    char *p = malloc(big);
    CHECK(p && covered(UCM_EVENT_VM_MAPPED, p, big), "large malloc: VM_MAPPED");
    reset();
    char *q = realloc(p, 2 * big);
    CHECK(q && covered(UCM_EVENT_VM_MAPPED, q, 2 * big), "realloc: VM_MAPPED");
    CHECK(covered(UCM_EVENT_VM_UNMAPPED, p, big) || q == p, "realloc: old block unmapped");
    reset();
    free(q);
    CHECK(covered(UCM_EVENT_VM_UNMAPPED, q, 2 * big), "free: VM_UNMAPPED");
}

static const struct {
    const char *name;
    void (*run)(void);
} groups[] = {
    {"selftest", test_selftest},
    {"mmap", test_mmap},
    {"map_fixed", test_map_fixed},
    {"mremap", test_mremap},
    {"shm", test_shm},
    {"shm_preinstalled", test_shm_preinstalled},
    {"shm_threads", test_shm_threads},
    {"sbrk", test_sbrk},
    {"madvise", test_madvise},
    {"modify", test_modify},
    {"failed", test_failed},
    {"dlopen", test_dlopen},
    {"dlopen_threads", test_dlopen_threads},
    {"counts", test_counts},
    {"handler_malloc", test_handler_malloc},
    {"add_remove", test_add_remove},
    {"threads", test_threads},
    {"fork", test_fork},
    {"malloc", test_malloc},
    {"selftest_broken", test_selftest_broken},
};

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ucm_events preload|reloc:<lib> <group>|all <dlopen-lib>\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    page = (size_t)sysconf(_SC_PAGESIZE);
    /* Attached before the install (relocation mode) or before any handler (preload): not
     * recorded by the shmat hook. 5 pages and a bit: the mapping is 6 pages. */
    if (strcmp(argv[2], "shm_preinstalled") == 0 || strcmp(argv[2], "all") == 0) {
        pre_size = 6 * page;
        pre_id = shmget(IPC_PRIVATE, 5 * page + 100, IPC_CREAT | 0600);
        if (pre_id >= 0) pre_segment = shmat(pre_id, NULL, 0);
    }
    void *api = RTLD_DEFAULT;
    if (strncmp(argv[1], "reloc:", 6) == 0) {
        api = dlopen(argv[1] + 6, RTLD_NOW | RTLD_LOCAL);
        if (api == NULL) {
            printf("FAIL dlopen: %s\n", dlerror());
            return 1;
        }
    }
    set_handler = (ucs_status_t(*)(int, int, ucm_event_callback_t, void *))dlsym(
        api, "heaphook_ucm_set_event_handler");
    unset_handler =
        (void (*)(int, ucm_event_callback_t, void *))dlsym(api, "heaphook_ucm_unset_event_handler");
    test_events = (ucs_status_t(*)(int))dlsym(api, "heaphook_ucm_test_events");
    install_mode = (const char *(*)(void))dlsym(api, "heaphook_ucm_install_mode");
    if (!set_handler || !unset_handler || !test_events || !install_mode) {
        printf("FAIL: libheaphook_ucm.so API not found\n");
        return 1;
    }
    dl_library = argv[3];
    ucs_status_t status = set_handler(ALL, 0, recorder, NULL);
    if (status != UCS_OK) {
        printf("FAIL set_event_handler: %d\n", (int)status);
        return 1;
    }
    printf("mode %s\n", install_mode());
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; ++i) {
        bool all = strcmp(argv[2], "all") == 0 && strcmp(groups[i].name, "malloc") != 0 &&
                   strcmp(groups[i].name, "selftest_broken") != 0;
        if (!all && strcmp(argv[2], groups[i].name) != 0) continue;
        group = groups[i].name;
        int before = failures;
        groups[i].run();
        printf("%s %s\n", failures == before ? "ok" : "failed", group);
    }
    unset_handler(ALL, recorder, NULL);
    printf("%s: %d checks, %d failed\n", argv[2], checks, failures);
    return failures != 0;
}
