/*
 * heaphook-inject: load a shared library into a running process with ptrace and call one of its
 * functions there (packages/core/README.md, "The injector"). Internal header of the injector's
 * files; nothing here is linked into a preload library, so the injector may use stdio and malloc.
 *
 *   refusal.c   exit codes and the one line that names each refusal's cause and fix
 *   target.c    what /proc says about the target before anything touches it
 *   symbols.c   addresses of dlopen & co. in the target: /proc/PID/maps + the ELF .dynsym
 *   session.c   the ptrace session: pick a thread outside the allocator, call, restore, detach
 *   inject_<arch>.c  registers, the call frame and the syscall restart of one architecture
 *   main.c      the command line
 */
#ifndef HEAPHOOK_INJECT_H
#define HEAPHOOK_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit codes of heaphook-inject (the TypeScript side maps them to InjectRefusal.reason). */
enum inject_exit {
    INJECT_OK = 0,
    INJECT_FAILED = 1,           /* an unexpected error (the line says which call failed) */
    INJECT_USAGE = 2,            /* bad command line */
    INJECT_NO_SUCH_PROCESS = 10, /* no process with that pid */
    INJECT_PERMISSION = 11,      /* another user's process, or not dumpable, no CAP_SYS_PTRACE */
    INJECT_YAMA = 12,            /* kernel.yama.ptrace_scope forbids the attach */
    INJECT_STATIC = 13,          /* statically linked: no dynamic loader to load a library */
    INJECT_ALREADY_TRACED = 14,  /* another tracer (gdb, strace, a PTRACE_TRACEME) holds it */
    INJECT_ARCHITECTURE = 15,    /* the target runs code of another architecture */
    INJECT_EXITED = 16,          /* the process exited during the attach */
    INJECT_BUSY = 17,            /* no thread reached a point outside the allocator in time */
    INJECT_NO_LOADER = 18,       /* no dlopen in the target's libraries (not glibc?) */
    INJECT_DLOPEN_FAILED = 19,   /* dlopen in the target returned NULL (dlerror's text shown) */
    INJECT_NO_SYMBOL = 20,       /* the library has no such function */
    INJECT_CALL_CRASHED = 21,    /* the call faulted in the target (registers restored) */
};

/* Prints "heaphook-inject: <text>" on stderr and returns code (for `return refuse(...)`). */
int refuse(int code, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---- target.c ---- */

/* Yama's ptrace_scope (0-3), or -1 when Yama is absent. Read from HEAPHOOK_INJECT_YAMA_FILE when
 * set (tests: this machine has no Yama), else /proc/sys/kernel/yama/ptrace_scope. */
int yama_scope(void);

/* Whether Yama at `scope` forbids a tracer that is (or is not) an ancestor of the target and has
 * (or has not) CAP_SYS_PTRACE to attach. Scope 1 may still be allowed by the target's
 * PR_SET_PTRACER, which only the attempt tells; this answers as if it had not called it. */
bool yama_forbids(int scope, bool tracer_is_ancestor, bool has_cap_sys_ptrace);

bool has_cap_sys_ptrace(void);
/* "x86_64", "aarch64", "i386" ... for an ELF e_machine. */
const char *elf_machine_name(uint16_t machine);
bool is_ancestor_of(pid_t pid);

/* Checks that need no ptrace: existence, tracer, owner, Yama 2/3, the executable's architecture,
 * static linking. Returns INJECT_OK or the refusal (already printed). *tgid gets the process id
 * when `pid` names one of its threads. */
int check_target(pid_t pid, pid_t *tgid);

/* ---- symbols.c ---- */

/* A mapped ELF object of the target. */
struct target_object {
    char path[4096];
    uintptr_t base; /* load bias: the address of file offset 0 minus its p_vaddr */
    uintptr_t start, end;
    uint16_t machine;
    bool exports_malloc; /* an allocator: locks in its data are allocator locks */
    bool is_loader;      /* ld.so */
    uintptr_t text_map_start, text_map_end; /* its r-x mapping */
    uintptr_t cave, cave_size; /* unused bytes after its code in its last r-x page (0: none) */
    int cave_rank;             /* which cave to use first: libc 2, the loader 1, others 0 */
};

struct target_map {
    struct target_object *objects;
    size_t count;
    uintptr_t dlopen, dlsym, dlerror, errno_location; /* 0 when not found */
};

/* Reads /proc/PID/maps and the .dynsym of each mapped ELF file (through /proc/PID/root).
 * Returns INJECT_OK, INJECT_ARCHITECTURE (an object of another machine is mapped: an emulator),
 * INJECT_NO_LOADER or INJECT_EXITED (refusal printed). */
int read_target_map(pid_t pid, struct target_map *map);
void free_target_map(struct target_map *map);
/* The object containing addr, or NULL. */
const struct target_object *object_at(const struct target_map *map, uintptr_t addr);
/* Whether addr lies in a file mapping of an object that exports malloc, or in the first page of
 * a 64 MiB-aligned anonymous heap (glibc's non-main arenas keep their mutex there). */
bool is_allocator_data(pid_t pid, const struct target_map *map, uintptr_t addr);

/* ---- session.c ---- */

struct inject_request {
    pid_t pid;
    const char *library;
    const char *symbol;
    const char *argument; /* NULL: the function gets NULL */
};

/* Attach, pick a thread, dlopen + dlsym + call, restore, detach. *result: the function's int.
 * Returns an enum inject_exit (refusals printed). */
int inject_call(const struct inject_request *request, const struct target_map *map, int *result);

#endif /* HEAPHOOK_INJECT_H */
