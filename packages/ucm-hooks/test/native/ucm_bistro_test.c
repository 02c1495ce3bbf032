/*
 * ucm_bistro_test.c — native/bistro.c on its own (linked in): the C library's entries of the
 * eight hooked functions patched to counting hooks and back. Prints one "ok: ..." or
 * "FAIL: ..." line per check; exit status 0 when every check passed.
 *
 *   ucm_bistro_test decode     every entry of the eight is prepared; moved bytes per function
 *   ucm_bistro_test threads    200 patch/unpatch cycles while 4 threads call mmap/munmap (and
 *                              malloc/free of 64 MiB): calls seen only while patched, none
 *                              lost or doubled, entries byte-for-byte back, no crash
 *   ucm_bistro_test protect    every page's protection the same before, while and after
 *                              patching (/proc/self/maps), for bistro and for GOT patching
 *   ucm_bistro_test refuse     entries that cannot be relocated are refused, one line each
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "../../native/bistro.h"
#include "heaphook/reloc.h"

static int failures;
#define CHECK(cond, ...)      \
    do {                      \
        if (cond) {           \
            printf("ok: ");   \
        } else {              \
            printf("FAIL: "); \
            ++failures;       \
        }                     \
        printf(__VA_ARGS__);  \
        printf("\n");         \
        fflush(stdout);       \
    } while (0)

/* ---- Counting hooks over the C library's mmap and munmap ---- */

static ucm_bistro_patch patches[8];
static const char *const names[8] = {"mmap", "munmap", "mremap", "madvise",
                                     "brk",  "sbrk",   "shmat",  "shmdt"};
static _Atomic long hooked_mmap, hooked_munmap;

static void *hook_mmap(void *a, size_t l, int p, int f, int fd, off_t o) {
    atomic_fetch_add(&hooked_mmap, 1);
    return ((void *(*)(void *, size_t, int, int, int, off_t))patches[0].trampoline)(a, l, p, f, fd,
                                                                                    o);
}
static int hook_munmap(void *a, size_t l) {
    atomic_fetch_add(&hooked_munmap, 1);
    return ((int (*)(void *, size_t))patches[1].trampoline)(a, l);
}
/* The other six: pass through their trampolines (generic: six integer arguments). */
#define PASS(i)                                                                                  \
    static long pass_##i(long a, long b, long c, long d, long e, long f) {                       \
        return ((long (*)(long, long, long, long, long, long))patches[i].trampoline)(a, b, c, d, \
                                                                                     e, f);      \
    }
PASS(2)
PASS(3)
PASS(4)
PASS(5)
PASS(6)
PASS(7)
static void *const hooks[8] = {(void *)hook_mmap, (void *)hook_munmap, (void *)pass_2,
                               (void *)pass_3,    (void *)pass_4,      (void *)pass_5,
                               (void *)pass_6,    (void *)pass_7};

static void *libc_function(const char *name) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    return libc ? dlsym(libc, name) : NULL;
}

static int prepare(size_t count) {
    char why[256];
    for (size_t i = 0; i < count; ++i) {
        patches[i] = (ucm_bistro_patch){
            .name = names[i], .function = libc_function(names[i]), .hook = hooks[i]};
    }
    int status = ucm_bistro_prepare(patches, count, why, sizeof why);
    if (status != 0) printf("prepare: %s\n", why);
    return status;
}

static int apply(size_t count, bool on) {
    char why[256];
    int status = ucm_bistro_apply(patches, count, on, why, sizeof why);
    if (status != 0) printf("apply(%d): %s\n", on, why);
    return status;
}

static int cmd_decode(void) {
    CHECK(prepare(8) == 0, "the eight entries of the C library are relocatable");
    for (int i = 0; i < 8; ++i) {
        printf("  %s: %zu bytes moved\n", names[i], patches[i].moved);
    }
    return 0;
}

/* ---- Patch and unpatch under threads ---- */

static _Atomic int stop_threads;
static _Atomic long thread_calls;

static void *mapper(void *arg) {
    (void)arg;
    long calls = 0;
    while (!atomic_load(&stop_threads)) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) abort();
        *(volatile char *)p = 1;
        if (munmap(p, 4096) != 0) abort();
        if ((calls & 63) == 0) {
            void *big = malloc(64u << 20); /* glibc maps it with an internal call to mmap */
            if (big == NULL) abort();
            ((volatile char *)big)[0] = 1;
            free(big);
        }
        ++calls;
    }
    atomic_fetch_add(&thread_calls, calls);
    return NULL;
}

static int cmd_threads(void) {
    if (prepare(8) != 0) return 1;
    uint8_t before[8][16];
    for (int i = 0; i < 8; ++i) memcpy(before[i], patches[i].function, 16);
    pthread_t threads[4];
    for (int i = 0; i < 4; ++i) pthread_create(&threads[i], NULL, mapper, NULL);
    int cycles = 0, failed = 0;
    long seen_patched = 0, leaked_unpatched = 0;
    for (; cycles < 200; ++cycles) {
        if (apply(8, true) != 0) {
            ++failed;
            break;
        }
        long m0 = atomic_load(&hooked_mmap);
        /* Our own calls while patched go through the hooks... */
        void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(p, 4096);
        void *big = malloc(64u << 20);
        free(big);
        if (atomic_load(&hooked_mmap) - m0 >= 2) ++seen_patched;
        if (apply(8, false) != 0) {
            ++failed;
            break;
        }
        /* ... and not once unpatched (the other threads may still be inside a hook they
         * entered before: count only this thread's calls, by comparing with no other thread
         * entering — a hook entered before the unpatch finishes its one call). */
        long m1 = atomic_load(&hooked_mmap);
        void *q = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(q, 4096);
        long m2 = atomic_load(&hooked_mmap);
        if (m2 - m1 > 4) ++leaked_unpatched; /* at most the 4 threads' calls in flight */
    }
    atomic_store(&stop_threads, 1);
    for (int i = 0; i < 4; ++i) pthread_join(threads[i], NULL);
    CHECK(failed == 0 && cycles == 200, "200 patch/unpatch cycles with 4 threads mapping (%d)",
          cycles);
    CHECK(seen_patched == cycles, "every patched cycle saw mmap and the 64 MiB malloc (%ld/%d)",
          seen_patched, cycles);
    CHECK(leaked_unpatched == 0, "no call reached a hook after unpatch (%ld)", leaked_unpatched);
    CHECK(atomic_load(&thread_calls) > 0, "the threads ran (%ld iterations)",
          atomic_load(&thread_calls));
    int same = 1;
    for (int i = 0; i < 8; ++i) same &= memcmp(before[i], patches[i].function, 16) == 0;
    CHECK(same, "every entry is byte-for-byte as before");
    return 0;
}

/* ---- Protections ---- */

struct mapping {
    unsigned long start, end;
    char perms[5];
    char path[256];
};
static int read_maps(struct mapping *out, int max) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        struct mapping *m = &out[n];
        m->path[0] = '\0';
        if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %255s", &m->start, &m->end, m->perms, m->path) >=
                3 &&
            m->path[0] == '/') {
            ++n;
        }
    }
    fclose(f);
    return n;
}
/* Every page of a file mapping in `was` has the same protection in `now`. */
static int same_protections(const struct mapping *was, int nwas, const struct mapping *now,
                            int nnow, char *diff, size_t size) {
    for (int i = 0; i < nwas; ++i) {
        for (unsigned long page = was[i].start; page < was[i].end; page += 4096) {
            const char *perms = NULL;
            for (int j = 0; j < nnow && perms == NULL; ++j) {
                if (page >= now[j].start && page < now[j].end) perms = now[j].perms;
            }
            if (perms == NULL || strcmp(perms, was[i].perms) != 0) {
                snprintf(diff, size, "%lx (%s) was %s, now %s", page, was[i].path, was[i].perms,
                         perms ? perms : "unmapped");
                return 0;
            }
        }
    }
    return 1;
}

static void *replacement_mmap(void *a, size_t l, int p, int f, int fd, off_t o) {
    return ((void *(*)(void *, size_t, int, int, int, off_t))patches[0].trampoline)(a, l, p, f, fd,
                                                                                    o);
}

static int cmd_protect(void) {
    static struct mapping before[1024], during[1024], after[1024];
    char diff[512] = "";
    if (prepare(8) != 0) return 1;
    int nb = read_maps(before, 1024);
    apply(8, true);
    int nd = read_maps(during, 1024);
    apply(8, false);
    int na = read_maps(after, 1024);
    CHECK(same_protections(before, nb, during, nd, diff, sizeof diff),
          "bistro: protections while patched as before %s", diff);
    CHECK(same_protections(before, nb, after, na, diff, sizeof diff),
          "bistro: protections after unpatch as before %s", diff);

    heaphook_reloc_handle *handles[3];
    const char *symbols[3] = {"mmap", "munmap", "madvise"};
    void *replacements[3] = {(void *)replacement_mmap, (void *)hook_munmap, (void *)pass_3};
    nb = read_maps(before, 1024);
    int patched = 1;
    for (int i = 0; i < 3; ++i) {
        patched &= heaphook_reloc_patch(symbols[i], replacements[i], NULL, &handles[i]) ==
                   HEAPHOOK_RELOC_OK;
    }
    nd = read_maps(during, 1024);
    for (int i = 2; i >= 0; --i) patched &= heaphook_reloc_unpatch(handles[i]) == HEAPHOOK_RELOC_OK;
    na = read_maps(after, 1024);
    CHECK(patched && heaphook_reloc_patched_entries() == 0, "GOT patching applied and undone");
    CHECK(same_protections(before, nb, during, nd, diff, sizeof diff),
          "GOT patching: protections while patched as before %s", diff);
    CHECK(same_protections(before, nb, after, na, diff, sizeof diff),
          "GOT patching: protections after unpatch as before %s", diff);
    return 0;
}

/* ---- Entries that must be refused ---- */

/* Exported (-rdynamic) so that their sizes are in the dynamic symbol table. */
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl bistro_short_jump\n.type bistro_short_jump,@function\n"
    "bistro_short_jump: jmp 1f\n nop\n nop\n nop\n nop\n1: ret\n"
    ".size bistro_short_jump, .-bistro_short_jump\n"
    ".p2align 4\n"
    ".globl bistro_jump_into\n.type bistro_jump_into,@function\n"
    "bistro_jump_into: mov %edi, %eax\n2: add $1, %eax\n cmp $10, %eax\n jl 2b\n ret\n"
    ".size bistro_jump_into, .-bistro_jump_into\n"
    ".p2align 4\n"
    ".globl bistro_unknown\n.type bistro_unknown,@function\n"
    "bistro_unknown: .byte 0x0f, 0x0e\n nop\n nop\n nop\n ret\n"
    ".size bistro_unknown, .-bistro_unknown\n"
    ".p2align 4\n"
    ".globl bistro_too_short\n.type bistro_too_short,@function\n"
    "bistro_too_short: xor %eax, %eax\n ret\n"
    ".size bistro_too_short, .-bistro_too_short\n"
    ".p2align 4\n"
    ".globl bistro_rip_relative\n.type bistro_rip_relative,@function\n"
    "bistro_rip_relative: mov bistro_value(%rip), %eax\n add %edi, %eax\n ret\n"
    ".size bistro_rip_relative, .-bistro_rip_relative\n"
    ".data\n.p2align 2\nbistro_value: .long 41\n.text\n");
int bistro_short_jump(void);
int bistro_jump_into(int);
int bistro_unknown(void);
int bistro_too_short(void);
int bistro_rip_relative(int);

static int refused_as(void *function, const char *name, const char *expect) {
    ucm_bistro_patch p = {.name = name, .function = function, .hook = (void *)hook_mmap};
    char why[256] = "";
    int status = ucm_bistro_prepare(&p, 1, why, sizeof why);
    printf("  %s: %s\n", name, status == 0 ? "prepared" : why);
    return status != 0 && strstr(why, name) != NULL && strstr(why, expect) != NULL;
}

static void program_handler(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    (void)context;
}

static int rip_hook_calls;
static ucm_bistro_patch rip_patch;
static int rip_hook(int x) {
    ++rip_hook_calls;
    return ((int (*)(int))rip_patch.trampoline)(x);
}

static int cmd_refuse(void) {
    CHECK(refused_as((void *)bistro_short_jump, "bistro_short_jump", "short relative jump"),
          "a short jump in the entry is refused");
    CHECK(refused_as((void *)bistro_jump_into, "bistro_jump_into", "lands inside"),
          "a jump into the patched bytes is refused");
    CHECK(refused_as((void *)bistro_unknown, "bistro_unknown", "unknown instruction"),
          "an unknown instruction is refused");
    CHECK(refused_as((void *)bistro_too_short, "bistro_too_short", "ends"),
          "a function shorter than the patch is refused");
    /* A rip-relative load in the entry is relocated: the trampoline reads the same variable. */
    rip_patch = (ucm_bistro_patch){.name = "bistro_rip_relative",
                                   .function = (void *)bistro_rip_relative,
                                   .hook = (void *)rip_hook};
    char why[256] = "";
    int ok = ucm_bistro_prepare(&rip_patch, 1, why, sizeof why) == 0 &&
             ucm_bistro_apply(&rip_patch, 1, true, why, sizeof why) == 0;
    int (*volatile call)(int) = bistro_rip_relative;
    int result = ok ? call(1) : -1;
    ok = ok && ucm_bistro_apply(&rip_patch, 1, false, why, sizeof why) == 0;
    int after = call(1);
    CHECK(ok && result == 42 && rip_hook_calls == 1 && after == 42,
          "a rip-relative entry is relocated (%d, hook calls %d) %s", result, rip_hook_calls, why);
    /* A program's own handler of the stop signal is never replaced: the patch is refused. */
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = program_handler;
    mine.sa_flags = SA_SIGINFO;
    sigaction(HEAPHOOK_BISTRO_SIGNAL, &mine, NULL);
    why[0] = '\0';
    int refused = ucm_bistro_apply(&rip_patch, 1, true, why, sizeof why) != 0;
    struct sigaction now;
    sigaction(HEAPHOOK_BISTRO_SIGNAL, NULL, &now);
    printf("  signal in use: %s\n", why);
    CHECK(refused && now.sa_sigaction == program_handler &&
              strstr(why, "handler of the program") != NULL && call(1) == 42,
          "a program's handler of the stop signal makes the patch refused, and stays");
    return 0;
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "decode") == 0)
        cmd_decode();
    else if (strcmp(cmd, "threads") == 0)
        cmd_threads();
    else if (strcmp(cmd, "protect") == 0)
        cmd_protect();
    else if (strcmp(cmd, "refuse") == 0)
        cmd_refuse();
    else {
        fprintf(stderr, "usage: ucm_bistro_test decode|threads|protect|refuse\n");
        return 2;
    }
    return failures == 0 ? 0 : 1;
}
