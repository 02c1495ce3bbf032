/*
 * emul.c — libheaphook_aix_emul.so: a Linux emulation of AIX's user-defined malloc subsystem.
 *
 * It is a heaphook backend (so the core's interpose.c gives it the whole glibc malloc family,
 * argument normalisation, the bootstrap arena, the fork handlers and the statistics calls)
 * whose "allocator" is an AIX plug-in archive, loaded the way AIX's loader and libc do:
 *
 *   1. The archive name comes from MALLOCTYPE=user:<archive>.a, else from the program's
 *      _malloc_user_defined_name (a char * or char[] exported by the main program). A name with
 *      a '/', without ".a", or empty is refused. Other MALLOCTYPE values (unset, default,
 *      buckets, watson ...) select the system allocator, here glibc (__libc_malloc ...).
 *   2. The archive is searched on LIBPATH, then LD_LIBRARY_PATH, then /usr/lib:/lib.
 *   3. The member mem64.o (mem32.o in a 32-bit process) is read from the ar archive (ar_member.c,
 *      mmap + read-only), written to a memfd and dlopen'ed as /proc/self/fd/N. This all happens
 *      inside the backend's init, so the core serves the allocations of dlopen from its static
 *      bootstrap arena.
 *   4. Every required entry point must be exported; __malloc_start__ is called once, before
 *      any other entry point.
 *   5. The malloc family goes to the entry points (posix_memalign & co. to __posix_memalign__,
 *      or to an over-allocation from __malloc__ when it is absent); mallinfo to __mallinfo__;
 *      mallopt to __mallopt__; fork's prepare/parent/child to __malloc_prefork_lock__ /
 *      __malloc_postfork_unlock__ (both sides) through the core's pthread_atfork handlers.
 *   6. __malloc_init__ is called once, just before the first pthread_create (interposed here):
 *      the moment the process becomes threaded, as AIX calls it when libpthreads initialises.
 *
 * The AIX ABI has no usable-size call, so each block carries a 16-byte header written here
 * (requested size, offset back to the plug-in's pointer): malloc_usable_size returns the
 * requested size, and the plug-in is asked for 16 bytes more than the program asked for.
 *
 * Any refusal is one line on stderr naming the problem with an example of a correct value, and
 * exit status 78, before main.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heaphook/aix_emul.h"
#include "heaphook/backend.h"
#include "heaphook/config.h"
#include "heaphook/core.h"
#include "heaphook/log.h"

#include "ar_member.h"

#define EMUL_EXIT_STATUS 78
#define HEADER 16
#define MEMBER (sizeof(void *) == 8 ? "mem64.o" : "mem32.o")

/* ---- The entry points ---------------------------------------------------------------------- */

typedef struct entry_points {
    void *(*malloc_fn)(size_t);
    void (*free_fn)(void *);
    void *(*realloc_fn)(void *, size_t);
    void *(*calloc_fn)(size_t, size_t);
    int (*mallopt_fn)(int, int);
    struct mallinfo (*mallinfo_fn)(void);
    void (*init_fn)(void);
    void (*prefork_fn)(void);
    void (*postfork_fn)(void);
    void (*start_fn)(void);
    int (*memalign_fn)(void **, size_t, size_t);
} entry_points;

static entry_points E;
static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static char backend_name[160] = "aix";
static int report_fd = -1;

/* ---- Counters ------------------------------------------------------------------------------ */

static struct {
    _Atomic unsigned long malloc_calls, free_calls, realloc_calls, calloc_calls, memalign_calls,
        mallinfo_calls, mallopt_calls, start_calls, init_calls, prefork_calls, postfork_parent,
        postfork_child, threads_created, calls_before_init;
    _Atomic long live_blocks;
} C;
static _Atomic int init_done = 0;

#define COUNT(field) atomic_fetch_add_explicit(&C.field, 1, memory_order_relaxed)

static inline void count_call(_Atomic unsigned long *field) {
    atomic_fetch_add_explicit(field, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&init_done, memory_order_relaxed)) COUNT(calls_before_init);
}

__attribute__((visibility("default"))) int heaphook_aix_emul_counters(heaphook_aix_emul_counts *out,
                                                                      size_t size) {
    heaphook_aix_emul_counts c;
    c.malloc_calls = atomic_load(&C.malloc_calls);
    c.free_calls = atomic_load(&C.free_calls);
    c.realloc_calls = atomic_load(&C.realloc_calls);
    c.calloc_calls = atomic_load(&C.calloc_calls);
    c.memalign_calls = atomic_load(&C.memalign_calls);
    c.mallinfo_calls = atomic_load(&C.mallinfo_calls);
    c.mallopt_calls = atomic_load(&C.mallopt_calls);
    c.start_calls = atomic_load(&C.start_calls);
    c.init_calls = atomic_load(&C.init_calls);
    c.prefork_calls = atomic_load(&C.prefork_calls);
    c.postfork_parent = atomic_load(&C.postfork_parent);
    c.postfork_child = atomic_load(&C.postfork_child);
    c.threads_created = atomic_load(&C.threads_created);
    c.calls_before_init = atomic_load(&C.calls_before_init);
    long live = atomic_load(&C.live_blocks);
    c.live_blocks = live < 0 ? 0 : (unsigned long)live;
    memcpy(out, &c, size < sizeof c ? size : sizeof c);
    return 0;
}

/* ---- Refusals ------------------------------------------------------------------------------ */

__attribute__((noreturn, format(printf, 1, 2))) static void refuse(const char *fmt, ...) {
    char line[1024];
    size_t len = heaphook_formatf(line, sizeof line - 1, "heaphook aix emulation: ");
    va_list args;
    va_start(args, fmt);
    len += heaphook_format(line + len, sizeof line - 1 - len, fmt, args);
    va_end(args);
    line[len++] = '\n';
    heaphook_write_all(2, line, len);
    _exit(EMUL_EXIT_STATUS);
}

/* ---- Finding the archive ----------------------------------------------------------------- */

/* Looks for name in each directory of a colon-separated list; returns an open fd or -1. */
static int search_path(const char *list, const char *name, char *found, size_t cap) {
    if (list == NULL) return -1;
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ':');
        size_t dir_len = end ? (size_t)(end - p) : strlen(p);
        size_t name_len = strlen(name);
        if (dir_len + 1 + name_len + 1 <= cap) {
            if (dir_len == 0) {
                memcpy(found, ".", 1);
                dir_len = 1;
            } else {
                memcpy(found, p, dir_len);
            }
            found[dir_len] = '/';
            memcpy(found + dir_len + 1, name, name_len + 1);
            int fd = open(found, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) return fd;
        }
        if (end == NULL) return -1;
        p = end + 1;
    }
}

/* ---- Loading the plug-in ------------------------------------------------------------------- */

static const char *const required[] = {
    "__malloc__",
    "__free__",
    "__realloc__",
    "__calloc__",
    "__mallopt__",
    "__mallinfo__",
    "__malloc_init__",
    "__malloc_prefork_lock__",
    "__malloc_postfork_unlock__",
};

/* The archive name from _malloc_user_defined_name in the main program (char * or char[]). */
static const char *user_defined_name(void) {
    void *symbol = dlsym(RTLD_DEFAULT, "_malloc_user_defined_name");
    if (symbol == NULL) return NULL;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1(symbol, &info, (void **)&sym, RTLD_DL_SYMENT) != 0 && sym != NULL &&
        sym->st_size == sizeof(char *)) {
        return *(const char *const *)symbol;
    }
    return (const char *)symbol;
}

static void load_plugin(const char *name, const char *source) {
    size_t len = strlen(name);
    if (len == 0) {
        refuse(
            "%s names no archive; expected an archive name found on LIBPATH, e.g. "
            "MALLOCTYPE=user:libheaphook_aix_tlsf.a",
            source);
    }
    if (strchr(name, '/') != NULL) {
        const char *base = strrchr(name, '/') + 1;
        const char *example = *base ? base : "libheaphook_aix_tlsf.a";
        if (strcmp(source, "_malloc_user_defined_name") == 0) {
            refuse(
                "%s contains a path (\"%s\"); AIX takes an archive name and finds it on "
                "LIBPATH, e.g. char *_malloc_user_defined_name = \"%s\"; with "
                "LIBPATH=<its directory>",
                source, name, example);
        }
        refuse(
            "%s contains a path (\"%s\"); AIX takes an archive name and finds it on LIBPATH, "
            "e.g. MALLOCTYPE=user:%s LIBPATH=<its directory>",
            source, name, example);
    }
    if (len < 3 || strcmp(name + len - 2, ".a") != 0) {
        refuse(
            "%s (\"%s\") is not an archive name; expected <name>.a, e.g. "
            "MALLOCTYPE=user:libheaphook_aix_tlsf.a",
            source, name);
    }
    char path[4096];
    /* Under secure execution only the system folders are searched (heaphook/config.h). */
    const char *libpath = heaphook_env_get_unless_secure("LIBPATH", NULL);
    const char *ld_library_path = heaphook_env_get_unless_secure("LD_LIBRARY_PATH", NULL);
    int fd = search_path(libpath, name, path, sizeof path);
    if (fd < 0) fd = search_path(ld_library_path, name, path, sizeof path);
    if (fd < 0) fd = search_path("/usr/lib:/lib", name, path, sizeof path);
    if (fd < 0) {
        refuse(
            "%s: archive %s not found on LIBPATH (%s) or LD_LIBRARY_PATH (%s); set LIBPATH "
            "to its directory, e.g. LIBPATH=/opt/heaphook/lib MALLOCTYPE=user:%s",
            source, name, libpath ? libpath : "unset", ld_library_path ? ld_library_path : "unset",
            name);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        refuse("%s: %s is empty or unreadable; build it with `nx run aix-plugin:archive`", source,
               path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) refuse("%s: cannot map %s (errno %d)", source, path, errno);
    ar_member m;
    char names[512];
    int found = ar_find_member(map, (size_t)st.st_size, MEMBER, &m, names, sizeof names);
    if (found == AR_BIG_FORMAT) {
        refuse(
            "%s: %s is an AIX big-format archive; the emulation reads the Linux test archive, "
            "e.g. the one `nx run aix-plugin:archive` builds",
            source, path);
    }
    if (found == AR_NOT_AN_ARCHIVE) {
        refuse(
            "%s: %s is not an ar archive; expected one made by ar with member %s, e.g. "
            "`ar rcS %s %s`",
            source, path, MEMBER, name, MEMBER);
    }
    if (found == AR_NO_MEMBER) {
        refuse(
            "%s: archive %s has no member %s (members: %s); a %d-bit process needs %s, e.g. "
            "`ar rcS %s %s`",
            source, path, MEMBER, names[0] ? names : "none", (int)(sizeof(void *) * 8), MEMBER,
            name, MEMBER);
    }
    int mfd = memfd_create(MEMBER, MFD_CLOEXEC);
    if (mfd < 0) refuse("%s: memfd_create failed (errno %d)", source, errno);
    size_t done = 0;
    while (done < m.size) {
        ssize_t n = write(mfd, m.data + done, m.size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) refuse("%s: cannot copy %s out of %s (errno %d)", source, MEMBER, path, errno);
        done += (size_t)n;
    }
    munmap(map, (size_t)st.st_size);
    char fd_path[64];
    heaphook_formatf(fd_path, sizeof fd_path, "/proc/self/fd/%d", mfd);
    void *handle = dlopen(fd_path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *error = dlerror();
        refuse("%s: member %s of %s cannot be loaded: %s", source, MEMBER, path,
               error ? error : "unknown error");
    }
    close(mfd);
    void *symbols[sizeof required / sizeof required[0]];
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        symbols[i] = dlsym(handle, required[i]);
        if (symbols[i] == NULL) {
            refuse(
                "%s: member %s of %s does not export %s; a plug-in must export __malloc__, "
                "__free__, __realloc__, __calloc__, __mallopt__, __mallinfo__, "
                "__malloc_init__, __malloc_prefork_lock__ and __malloc_postfork_unlock__, "
                "e.g. linked with -bE:mem.exp",
                source, MEMBER, path, required[i]);
        }
    }
    E.malloc_fn = (void *(*)(size_t))symbols[0];
    E.free_fn = (void (*)(void *))symbols[1];
    E.realloc_fn = (void *(*)(void *, size_t))symbols[2];
    E.calloc_fn = (void *(*)(size_t, size_t))symbols[3];
    E.mallopt_fn = (int (*)(int, int))symbols[4];
    E.mallinfo_fn = (struct mallinfo(*)(void))symbols[5];
    E.init_fn = (void (*)(void))symbols[6];
    E.prefork_fn = (void (*)(void))symbols[7];
    E.postfork_fn = (void (*)(void))symbols[8];
    E.start_fn = (void (*)(void))dlsym(handle, "__malloc_start__");
    E.memalign_fn = (int (*)(void **, size_t, size_t))dlsym(handle, "__posix_memalign__");
    heaphook_formatf(backend_name, sizeof backend_name, "aix:%s", name);
    backend_name[strlen(backend_name) - 2] = '\0'; /* drop ".a" */
    heaphook_log_debug("aix emulation: %s loaded from %s (%s)", MEMBER, path, source);
}

/* MALLOCTYPE set to something other than user:... (or unset): the system allocator, glibc. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_memalign(size_t, size_t);
extern int __libc_mallopt(int, int);
extern struct mallinfo __libc_mallinfo(void);

static int glibc_memalign(void **result, size_t alignment, size_t size) {
    void *p = __libc_memalign(alignment, size);
    if (p == NULL) return ENOMEM;
    *result = p;
    return 0;
}

static void use_glibc(void) {
    E.malloc_fn = __libc_malloc;
    E.free_fn = __libc_free;
    E.realloc_fn = __libc_realloc;
    E.calloc_fn = __libc_calloc;
    E.mallopt_fn = __libc_mallopt;
    E.mallinfo_fn = __libc_mallinfo;
    E.memalign_fn = glibc_memalign;
    heaphook_formatf(backend_name, sizeof backend_name, "aix:default");
}

static int emul_init(void) {
    real_pthread_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                   void *))dlsym(RTLD_NEXT, "pthread_create");
    const char *report = heaphook_env_get_unless_secure("HEAPHOOK_AIX_EMUL_REPORT", NULL);
    if (report != NULL) {
        int fd = open(report, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            report_fd = fcntl(fd, F_DUPFD_CLOEXEC, 100);
            close(fd);
        }
    }
    const char *type = heaphook_env_get("MALLOCTYPE", NULL);
    if (type != NULL && strncmp(type, "user:", 5) == 0 && heaphook_secure_execution()) {
        /* It names a program to load: not one chosen by whoever set the environment of a
         * privileged process. The name compiled into the program still counts. */
        heaphook_log_debug("secure execution (AT_SECURE): MALLOCTYPE=user:... is ignored");
        type = NULL;
    }
    if (type != NULL && strncmp(type, "user:", 5) == 0) {
        char source[300];
        heaphook_formatf(source, sizeof source, "MALLOCTYPE=%s", type);
        load_plugin(type + 5, source);
    } else if (type == NULL && user_defined_name() != NULL) {
        load_plugin(user_defined_name(), "_malloc_user_defined_name");
    } else {
        use_glibc();
    }
    if (E.start_fn != NULL) {
        COUNT(start_calls);
        E.start_fn();
    }
    return 0;
}

/* ---- The backend: the malloc family over the entry points ------------------------------- */

typedef struct header {
    size_t size;   /* what the program asked for: malloc_usable_size */
    size_t offset; /* from the plug-in's pointer to the program's */
} header;

static inline header *header_of(void *ptr) {
    return (header *)((unsigned char *)ptr - HEADER);
}

static inline void *finish(void *raw, size_t offset, size_t size) {
    unsigned char *user = (unsigned char *)raw + offset;
    header *h = header_of(user);
    h->size = size;
    h->offset = offset;
    atomic_fetch_add_explicit(&C.live_blocks, 1, memory_order_relaxed);
    return user;
}

static void *emul_alloc(size_t size, size_t align) {
    void *raw = NULL;
    if (align == 1) {
        count_call(&C.malloc_calls);
        raw = E.malloc_fn(size + HEADER);
        return raw ? finish(raw, HEADER, size) : NULL;
    }
    if (size + align < size || size + align > (size_t)PTRDIFF_MAX - HEADER) return NULL;
    count_call(&C.memalign_calls);
    if (E.memalign_fn != NULL) {
        if (E.memalign_fn(&raw, align, size + align) != 0) return NULL;
        return finish(raw, align, size);
    }
    raw = E.malloc_fn(size + align + HEADER);
    if (raw == NULL) return NULL;
    uintptr_t user = ((uintptr_t)raw + HEADER + align - 1) & ~(uintptr_t)(align - 1);
    return finish(raw, user - (uintptr_t)raw, size);
}

static void *emul_alloc_zeroed(size_t size) {
    count_call(&C.calloc_calls);
    void *raw = E.calloc_fn(size + HEADER, 1);
    return raw ? finish(raw, HEADER, size) : NULL;
}

static void emul_dealloc(void *ptr) {
    header *h = header_of(ptr);
    count_call(&C.free_calls);
    atomic_fetch_sub_explicit(&C.live_blocks, 1, memory_order_relaxed);
    E.free_fn((unsigned char *)ptr - h->offset);
}

static size_t emul_block_size(void *ptr) {
    return header_of(ptr)->size;
}

static void *emul_realloc(void *ptr, size_t new_size) {
    header *h = header_of(ptr);
    if (h->offset == HEADER) {
        count_call(&C.realloc_calls);
        void *raw = E.realloc_fn((unsigned char *)ptr - HEADER, new_size + HEADER);
        if (raw == NULL) return NULL;
        header *moved = (header *)raw;
        moved->size = new_size;
        return (unsigned char *)raw + HEADER;
    }
    /* An aligned block: the plug-in's realloc would not keep the header's offset. */
    void *moved = emul_alloc(new_size, 1);
    if (moved == NULL) return NULL;
    memcpy(moved, ptr, h->size < new_size ? h->size : new_size);
    emul_dealloc(ptr);
    return moved;
}

static int emul_get_stats(heaphook_stats *out) {
    count_call(&C.mallinfo_calls);
    struct mallinfo info = E.mallinfo_fn();
    out->pool_bytes = (size_t)(unsigned)info.arena;
    out->free_blocks = (size_t)(unsigned)info.ordblks;
    out->mmapped_blocks = (size_t)(unsigned)info.hblks;
    out->mmapped_bytes = (size_t)(unsigned)info.hblkhd;
    out->used_bytes = (size_t)(unsigned)info.uordblks;
    out->free_bytes = (size_t)(unsigned)info.fordblks;
    out->largest_free_block = (size_t)(unsigned)info.keepcost;
    /* mallinfo has no count of blocks in use: the emulation counts them itself. */
    long live = atomic_load_explicit(&C.live_blocks, memory_order_relaxed);
    out->used_blocks = live < 0 ? 0 : (size_t)live;
    return 0;
}

/* glibc's mallopt returns 1 when accepted; AIX's returns 0. */
static int emul_mallopt(int param, int value) {
    count_call(&C.mallopt_calls);
    if (E.mallopt_fn == __libc_mallopt) return __libc_mallopt(param, value);
    return E.mallopt_fn(param, value) == 0 ? 1 : 0;
}

static void emul_fork_prepare(void) {
    if (E.prefork_fn == NULL) return;
    COUNT(prefork_calls);
    E.prefork_fn();
}

static void emul_fork_parent(void) {
    if (E.postfork_fn == NULL) return;
    COUNT(postfork_parent);
    E.postfork_fn();
}

static void emul_fork_child(void) {
    if (E.postfork_fn == NULL) return;
    COUNT(postfork_child);
    E.postfork_fn();
}

static heaphook_backend emul_backend = {
    .name = backend_name,
    .init = emul_init,
    .alloc = emul_alloc,
    .dealloc = emul_dealloc,
    .get_block_size = emul_block_size,
    .alloc_zeroed = emul_alloc_zeroed,
    .realloc = emul_realloc,
    .fork_prepare = emul_fork_prepare,
    .fork_parent = emul_fork_parent,
    .fork_child = emul_fork_child,
    .get_stats = emul_get_stats,
    .mallopt = emul_mallopt,
};

const heaphook_backend *heaphook_backend_get(void) {
    return &emul_backend;
}

/* ---- Threads: __malloc_init__ before the first pthread_create --------------------------- */

__attribute__((visibility("default"))) int pthread_create(pthread_t *thread,
                                                          const pthread_attr_t *attr,
                                                          void *(*start)(void *), void *arg) {
    heaphook_active_backend(); /* makes the backend (the plug-in) ready */
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&init_done, &expected, 1) && E.init_fn != NULL) {
            COUNT(init_calls);
            E.init_fn();
        }
    }
    COUNT(threads_created);
    return real_pthread_create(thread, attr, start, arg);
}

/* ---- The exit report ----------------------------------------------------------------------- */

__attribute__((destructor)) static void emul_report(void) {
    if (report_fd < 0) return;
    heaphook_aix_emul_counts c;
    heaphook_aix_emul_counters(&c, sizeof c);
    char line[1024];
    size_t len = heaphook_formatf(
        line, sizeof line - 1,
        "aix-emul pid=%d backend=%s malloc=%lu free=%lu realloc=%lu calloc=%lu memalign=%lu "
        "mallinfo=%lu mallopt=%lu start=%lu init=%lu prefork=%lu postfork_parent=%lu "
        "postfork_child=%lu threads=%lu before_init=%lu live=%lu",
        (int)getpid(), backend_name, c.malloc_calls, c.free_calls, c.realloc_calls, c.calloc_calls,
        c.memalign_calls, c.mallinfo_calls, c.mallopt_calls, c.start_calls, c.init_calls,
        c.prefork_calls, c.postfork_parent, c.postfork_child, c.threads_created,
        c.calls_before_init, c.live_blocks);
    line[len++] = '\n';
    heaphook_write_all(report_fd, line, len);
}
