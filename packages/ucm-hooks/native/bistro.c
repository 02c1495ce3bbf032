/*
 * bistro.c — code patching of function entries (contract in bistro.h).
 *
 * An entry is patched with a 5-byte `jmp rel32` to the hook, or, when the hook is farther than
 * ±2 GiB, to a thunk (`jmp *0(%rip)` and the hook's address) in a page mapped within reach of
 * the function; that page holds the trampoline too:
 * the whole instructions the jump covers, relocated (rip-relative operands and rel32 branches
 * re-aimed), then an absolute jump back to the first instruction not moved.
 *
 * Why stop the other threads: the 5 bytes are written with one aligned 8-byte store, so a
 * thread entering the function sees the old or the new entry whole; but a thread stopped after
 * the entry's first instruction and before the fifth byte (mmap's first instruction is 3 bytes
 * long) would resume in the middle of the jump. So the writes happen while every other thread
 * waits in a signal handler, none of them inside the bytes rewritten, and the threads resume
 * through sigreturn (which serialises their instruction fetch).
 */
#include "bistro.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "heaphook/log.h"
#include "heaphook/os.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static void bistro_why(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bistro_why(char *why, size_t size, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    heaphook_format(why, size, fmt, args);
    va_end(args);
}

#if defined(__x86_64__)

/* ---- Instruction decoding (lengths and relative operands) --------------------------------- */

struct x86_insn {
    size_t length;
    int rip_disp; /* offset of a rip-relative disp32, or -1 */
    int rel;      /* offset of a relative branch's displacement, or -1 */
    int rel_size; /* 1 or 4 */
};

/* Decodes the general-purpose, x87, SSE and VEX instructions compilers emit; false for anything
 * else (EVEX, XOP, 3DNow!, invalid opcodes), so that a caller refuses instead of guessing. */
static bool x86_decode(const uint8_t *code, struct x86_insn *out) {
    const uint8_t *p = code;
    bool opsize = false, addrsize = false, rex_w = false;
    for (;; ++p) {
        uint8_t b = *p;
        if (b == 0x66) {
            opsize = true;
        } else if (b == 0x67) {
            addrsize = true;
        } else if (b != 0xF0 && b != 0xF2 && b != 0xF3 && b != 0x2E && b != 0x36 && b != 0x3E &&
                   b != 0x26 && b != 0x64 && b != 0x65) {
            break;
        }
        if (p - code >= 14) return false;
    }
    if ((*p & 0xF0) == 0x40) rex_w = (*p++ & 8) != 0;
    uint8_t op = *p++;
    bool modrm = false;
    int imm = 0, rel = 0;
    int z = opsize ? 2 : 4; /* an immediate of the operand size (at most 32 bits) */
    bool group3 = false;    /* F6/F7: an immediate only for TEST (reg 0 or 1) */
    if (op == 0x0F) {
        uint8_t op2 = *p++;
        if (op2 == 0x38) {
            ++p;
            modrm = true;
        } else if (op2 == 0x3A) {
            ++p;
            modrm = true;
            imm = 1;
        } else if ((op2 >= 0x80 && op2 <= 0x8F)) {
            rel = 4;
        } else if (op2 == 0x05 || op2 == 0x06 || op2 == 0x07 || op2 == 0x08 || op2 == 0x09 ||
                   op2 == 0x0B || (op2 >= 0x30 && op2 <= 0x35) || op2 == 0x77 || op2 == 0xA0 ||
                   op2 == 0xA1 || op2 == 0xA2 || op2 == 0xA8 || op2 == 0xA9 || op2 == 0xAA ||
                   (op2 >= 0xC8 && op2 <= 0xCF)) {
            /* no operand bytes */
        } else if ((op2 >= 0x70 && op2 <= 0x73) || op2 == 0xA4 || op2 == 0xAC || op2 == 0xBA ||
                   op2 == 0xC2 || op2 == 0xC4 || op2 == 0xC5 || op2 == 0xC6) {
            modrm = true;
            imm = 1;
        } else if (op2 == 0x04 || op2 == 0x0A || op2 == 0x0C || op2 == 0x0E || op2 == 0x0F ||
                   (op2 >= 0x24 && op2 <= 0x27) || (op2 >= 0x36 && op2 <= 0x3F)) {
            return false;
        } else {
            modrm = true;
        }
    } else if (op == 0xC4 || op == 0xC5) { /* VEX */
        int map = 1;
        if (op == 0xC4) {
            map = *p++ & 0x1F;
            ++p;
        } else {
            ++p;
        }
        uint8_t vop = *p++;
        if (map < 1 || map > 3) return false;
        modrm = true;
        if (map == 3 || (map == 1 && ((vop >= 0x70 && vop <= 0x73) || vop == 0xC2 ||
                                      (vop >= 0xC4 && vop <= 0xC6)))) {
            imm = 1;
        }
    } else if (op < 0x40) {
        uint8_t low = op & 7;
        if (low < 4) {
            modrm = true;
        } else if (low == 4) {
            imm = 1;
        } else if (low == 5) {
            imm = z;
        } else {
            return false; /* 06, 07, 0E, 16, 17, 1E, 1F, 27, 2F, 37, 3F: invalid in 64-bit */
        }
    } else if (op >= 0x50 && op <= 0x5F) {
    } else if (op == 0x63 || (op >= 0x84 && op <= 0x8F) || (op >= 0xD0 && op <= 0xD3) ||
               (op >= 0xD8 && op <= 0xDF) || op == 0xFE || op == 0xFF) {
        modrm = true;
    } else if (op == 0x68 || op == 0xA9) {
        imm = z;
    } else if (op == 0x69 || op == 0x81 || op == 0xC7) {
        modrm = true;
        imm = z;
    } else if (op == 0x6A || op == 0xA8 || op == 0xCD || (op >= 0xE4 && op <= 0xE7) ||
               (op >= 0xB0 && op <= 0xB7)) {
        imm = 1;
    } else if (op == 0x6B || op == 0x80 || op == 0x83 || op == 0xC0 || op == 0xC1 || op == 0xC6) {
        modrm = true;
        imm = 1;
    } else if ((op >= 0x6C && op <= 0x6F) || (op >= 0x90 && op <= 0x9F && op != 0x9A) ||
               (op >= 0xA4 && op <= 0xA7) || (op >= 0xAA && op <= 0xAF) || op == 0xC3 ||
               op == 0xC9 || op == 0xCB || op == 0xCC || op == 0xCF || op == 0xD7 ||
               (op >= 0xEC && op <= 0xEF) || op == 0xF1 || op == 0xF4 || op == 0xF5 ||
               (op >= 0xF8 && op <= 0xFD)) {
    } else if (op >= 0x70 && op <= 0x7F) {
        rel = 1;
    } else if (op >= 0xA0 && op <= 0xA3) {
        imm = addrsize ? 4 : 8; /* moffs: an absolute address */
    } else if (op >= 0xB8 && op <= 0xBF) {
        imm = rex_w ? 8 : z;
    } else if (op == 0xC2 || op == 0xCA) {
        imm = 2;
    } else if (op == 0xC8) {
        imm = 3;
    } else if ((op >= 0xE0 && op <= 0xE3) || op == 0xEB) {
        rel = 1;
    } else if (op == 0xE8 || op == 0xE9) {
        rel = 4;
    } else if (op == 0xF6 || op == 0xF7) {
        modrm = true;
        group3 = true;
    } else {
        return false; /* 60-62 (EVEX), 82, 9A, CE, D4-D6, EA */
    }
    out->rip_disp = -1;
    out->rel = -1;
    out->rel_size = 0;
    if (modrm) {
        uint8_t m = *p++;
        uint8_t mod = m >> 6, reg = (m >> 3) & 7, rm = m & 7;
        if (mod != 3) {
            if (rm == 4) {
                uint8_t sib = *p++;
                if (mod == 0 && (sib & 7) == 5) p += 4;
            } else if (mod == 0 && rm == 5) {
                out->rip_disp = (int)(p - code);
                p += 4;
            }
            if (mod == 1) p += 1;
            if (mod == 2) p += 4;
        }
        if (group3 && reg < 2) imm = op == 0xF6 ? 1 : z;
    }
    p += imm;
    if (rel) {
        out->rel = (int)(p - code);
        out->rel_size = rel;
        p += rel;
    }
    out->length = (size_t)(p - code);
    return out->length <= 15;
}

size_t ucm_bistro_insn_length(const uint8_t *code) {
    struct x86_insn insn;
    return x86_decode(code, &insn) ? insn.length : 0;
}

static int32_t x86_read32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}
static void x86_write32(uint8_t *p, int32_t v) {
    memcpy(p, &v, 4);
}
static bool x86_fits32(intptr_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* ---- Trampoline pages --------------------------------------------------------------------- */

#define BISTRO_JUMP 5  /* jmp rel32 */
#define BISTRO_SLOT 96 /* bytes per patch: thunk (16) + trampoline (<= 4 + 15 + 14 bytes) */
#define BISTRO_REACH (1ul << 31)

/* A page within reach (rel32) of every address in [low, high], mapped read-write. */
static uint8_t *bistro_page_near(uintptr_t low, uintptr_t high, size_t page) {
    const uintptr_t step = 1ul << 20;
    for (uintptr_t distance = step; distance < (1ul << 30); distance += step) {
        for (int side = 0; side < 2; ++side) {
            uintptr_t want = side == 0 ? (low > distance ? low - distance : 0) : high + distance;
            want &= ~(uintptr_t)(page - 1);
            if (want < (1ul << 16)) continue;
            long got =
                HEAPHOOK_OS_UNOBSERVED(SYS_mmap, want, page, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (heaphook_os_unobserved_failed(got)) continue;
            uintptr_t at = (uintptr_t)got;
            /* The farthest of the functions from any byte of the page, with room to spare
             * for the rip-relative operands the trampolines re-aim. */
            uintptr_t farthest = at < low ? high + 64 - at : at + page - low;
            if (farthest < BISTRO_REACH - (1ul << 26)) return (uint8_t *)at;
            HEAPHOOK_OS_UNOBSERVED(SYS_munmap, got, page, 0, 0, 0,
                                   0); /* an old kernel placed it elsewhere */
        }
    }
    return NULL;
}

/* ---- Prepare ------------------------------------------------------------------------------- */

static int bistro_prepare_one(ucm_bistro_patch *pt, uint8_t *slot, char *why, size_t why_size) {
    uint8_t *f = pt->function;
    if (((uintptr_t)f & 7) > 8 - BISTRO_JUMP) {
        bistro_why(why, why_size, "%s: entry %p not patchable with one aligned 8-byte store",
                   pt->name, (void *)f);
        return -1;
    }
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) || sym == NULL ||
        info.dli_saddr != (void *)f || sym->st_size == 0) {
        bistro_why(why, why_size, "%s: the function's size is unknown (no symbol at %p)", pt->name,
                   (void *)f);
        return -1;
    }
    size_t size = sym->st_size;
    struct x86_insn insns[BISTRO_JUMP];
    size_t count = 0, moved = 0;
    while (moved < BISTRO_JUMP) {
        struct x86_insn *in = &insns[count];
        if (!x86_decode(f + moved, in)) {
            bistro_why(why, why_size, "%s: unknown instruction at %s+0x%zx", pt->name, pt->name,
                       moved);
            return -1;
        }
        if (in->rel_size == 1) {
            bistro_why(why, why_size, "%s: short relative jump at %s+0x%zx in the patched bytes",
                       pt->name, pt->name, moved);
            return -1;
        }
        uint8_t op = f[moved];
        if (op == 0xC3 || op == 0xC2 || op == 0xE9 || op == 0xCC) {
            bistro_why(why, why_size, "%s: the function ends at %s+0x%zx, inside the patch",
                       pt->name, pt->name, moved);
            return -1;
        }
        moved += in->length;
        ++count;
    }
    if (moved > size) {
        bistro_why(why, why_size, "%s: shorter (%zu bytes) than the patch", pt->name, size);
        return -1;
    }
    /* No branch of the function may land inside the bytes the jump overwrites. */
    for (size_t at = 0; at < size;) {
        struct x86_insn in;
        if (!x86_decode(f + at, &in)) {
            bistro_why(why, why_size,
                       "%s: unknown instruction at %s+0x%zx (cannot check the jumps into the "
                       "entry)",
                       pt->name, pt->name, at);
            return -1;
        }
        if (in.rel >= 0) {
            intptr_t disp = in.rel_size == 1 ? (intptr_t)(int8_t)f[at + (size_t)in.rel]
                                             : (intptr_t)x86_read32(f + at + (size_t)in.rel);
            uint8_t *target = f + at + in.length + disp;
            if (target > f && target < f + moved) {
                bistro_why(why, why_size,
                           "%s: the jump at %s+0x%zx lands inside the patched bytes (%s+0x%zx)",
                           pt->name, pt->name, at, pt->name, (size_t)(target - f));
                return -1;
            }
        }
        at += in.length;
    }
    /* The hook's thunk: jmp *0(%rip); .quad hook */
    static const uint8_t jmp_abs[6] = {0xFF, 0x25, 0, 0, 0, 0};
    memcpy(slot, jmp_abs, 6);
    memcpy(slot + 6, &pt->hook, 8);
    /* The trampoline: the moved instructions, re-aimed, then back to f + moved. */
    uint8_t *tramp = slot + 16, *out = tramp;
    size_t from = 0;
    for (size_t i = 0; i < count; ++i) {
        const struct x86_insn *in = &insns[i];
        memcpy(out, f + from, in->length);
        int field = in->rip_disp >= 0 ? in->rip_disp : in->rel;
        if (field >= 0) {
            intptr_t target = (intptr_t)(f + from + in->length) + x86_read32(f + from + field);
            intptr_t disp = target - (intptr_t)(out + in->length);
            if (!x86_fits32(disp)) {
                bistro_why(why, why_size, "%s: relative operand at %s+0x%zx out of reach", pt->name,
                           pt->name, from);
                return -1;
            }
            x86_write32(out + field, (int32_t)disp);
        }
        out += in->length;
        from += in->length;
    }
    memcpy(out, jmp_abs, 6);
    uint8_t *back = f + moved;
    memcpy(out + 6, &back, 8);
    /* Straight to the hook when it is within reach (a library mapped near the C library, the
     * usual case: one jump fewer per call), else through the thunk. */
    intptr_t direct = (intptr_t)pt->hook - (intptr_t)(f + BISTRO_JUMP);
    intptr_t jump = x86_fits32(direct) ? direct : (intptr_t)slot - (intptr_t)(f + BISTRO_JUMP);
    if (!x86_fits32(jump)) {
        bistro_why(why, why_size, "%s: trampoline page out of reach", pt->name);
        return -1;
    }
    pt->jump[0] = 0xE9;
    x86_write32(pt->jump + 1, (int32_t)jump);
    memcpy(pt->saved, f, BISTRO_JUMP);
    pt->trampoline = tramp;
    pt->moved = moved;
    return 0;
}

int ucm_bistro_prepare(ucm_bistro_patch *patches, size_t count, char *why, size_t why_size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (count == 0) return 0;
    if (count * BISTRO_SLOT > page) {
        bistro_why(why, why_size, "too many functions in one batch (%zu)", count);
        return -1;
    }
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (size_t i = 0; i < count; ++i) {
        uintptr_t f = (uintptr_t)patches[i].function;
        if (f < low) low = f;
        if (f > high) high = f;
    }
    uint8_t *area = bistro_page_near(low, high, page);
    if (area == NULL) {
        bistro_why(why, why_size, "%s: no free page within 2 GiB of it for the trampolines",
                   patches[0].name);
        return -1;
    }
    for (size_t i = 0; i < count; ++i) {
        if (bistro_prepare_one(&patches[i], area + i * BISTRO_SLOT, why, why_size) != 0) {
            HEAPHOOK_OS_UNOBSERVED(SYS_munmap, area, page, 0, 0, 0, 0);
            return -1;
        }
    }
    long rc = HEAPHOOK_OS_UNOBSERVED(SYS_mprotect, area, page, PROT_READ | PROT_EXEC, 0, 0, 0);
    if (rc != 0) {
        bistro_why(why, why_size, "mprotect of the trampoline page: errno %d", (int)-rc);
        HEAPHOOK_OS_UNOBSERVED(SYS_munmap, area, page, 0, 0, 0, 0);
        return -1;
    }
    for (size_t i = 0; i < count; ++i) patches[i].prepared = true;
    return 0;
}

/* ---- Stopping the other threads ----------------------------------------------------------- */

#define STW_MAX 4096
/* BLOCKING: blocks the signal (a thread starting, or one that always does): not signalled;
 * SLEEPING: blocks it, asleep in a system call at pc. */
enum { STW_SIGNALLED = 1, STW_STOPPED, STW_LEFT, STW_BLOCKING, STW_SLEEPING, STW_GONE };
static struct {
    _Atomic int tid;
    _Atomic int state;
    uintptr_t pc;
} stw_slots[STW_MAX];
static _Atomic unsigned stw_count;
static _Atomic int stw_active;
static _Atomic int stw_generation; /* futex word: bumped to let stopped threads go */

static long stw_gettid(void) {
    return HEAPHOOK_OS_UNOBSERVED(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

static void stw_handler(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    if (!atomic_load(&stw_active)) return;
    int saved = errno;
    int tid = (int)stw_gettid();
    unsigned n = atomic_load(&stw_count);
    for (unsigned i = 0; i < n; ++i) {
        if (atomic_load(&stw_slots[i].tid) != tid) continue;
        if (atomic_load(&stw_slots[i].state) != STW_SIGNALLED) break;
        stw_slots[i].pc = (uintptr_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
        int generation = atomic_load(&stw_generation);
        atomic_store(&stw_slots[i].state, STW_STOPPED);
        while (atomic_load(&stw_active) && atomic_load(&stw_generation) == generation) {
            HEAPHOOK_OS_UNOBSERVED(SYS_futex, &stw_generation, FUTEX_WAIT_PRIVATE, generation, 0, 0,
                                   0);
        }
        atomic_store(&stw_slots[i].state, STW_LEFT);
        break;
    }
    errno = saved;
}

/* Reads a small /proc file into buf (NUL-terminated); its length, or -1. */
static long stw_read(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long have = 0;
    for (;;) {
        long n = read(fd, buf + have, size - 1 - (size_t)have);
        if (n <= 0) break;
        have += n;
        if ((size_t)have == size - 1) break;
    }
    close(fd);
    buf[have] = '\0';
    return have;
}

static void stw_task_path(char *out, size_t size, int tid, const char *file) {
    heaphook_formatf(out, size, "/proc/self/task/%d/%s", tid, file);
}

/* Does thread tid block sig (its SigBlk line)? */
static bool stw_blocks(int tid, int sig) {
    char path[64], buf[4096];
    stw_task_path(path, sizeof path, tid, "status");
    if (stw_read(path, buf, sizeof buf) < 0) return false;
    const char *line = strstr(buf, "SigBlk:");
    if (line == NULL) return false;
    unsigned long long mask = strtoull(line + 7, NULL, 16);
    return (mask >> (sig - 1)) & 1;
}

/* The pc of a thread asleep in a system call (/proc/<tid>/syscall's last field); 0 if running. */
static uintptr_t stw_sleeping_pc(int tid) {
    char path[64], buf[256];
    stw_task_path(path, sizeof path, tid, "syscall");
    if (stw_read(path, buf, sizeof buf) <= 0 || strncmp(buf, "running", 7) == 0) return 0;
    const char *last = strrchr(buf, ' ');
    return last ? (uintptr_t)strtoull(last + 1, NULL, 16) : 0;
}

static bool stw_known(int tid) {
    unsigned n = atomic_load(&stw_count);
    for (unsigned i = 0; i < n; ++i) {
        if (atomic_load(&stw_slots[i].tid) == tid) return true;
    }
    return false;
}

static void stw_resume(void) {
    atomic_store(&stw_active, 0);
    atomic_fetch_add(&stw_generation, 1);
    HEAPHOOK_OS_UNOBSERVED(SYS_futex, &stw_generation, FUTEX_WAKE_PRIVATE, INT32_MAX, 0, 0, 0);
    unsigned n = atomic_load(&stw_count);
    for (unsigned i = 0; i < n; ++i) {
        while (atomic_load(&stw_slots[i].state) == STW_STOPPED) sched_yield();
    }
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Signals every thread not yet known; returns how many were new, or -1 (why set). */
static int stw_signal_new(int sig, int self, char *why, size_t why_size) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        bistro_why(why, why_size, "cannot list /proc/self/task (errno %d)", errno);
        return -1;
    }
    int fresh = 0;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = HEAPHOOK_OS_UNOBSERVED(SYS_getdents64, fd, buf, sizeof buf, 0, 0, 0);
        if (n <= 0) break;
        for (long at = 0; at < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + at);
            at += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
            int tid = (int)strtol(d->d_name, NULL, 10);
            if (tid == self || stw_known(tid)) continue;
            unsigned i = atomic_load(&stw_count);
            if (i == STW_MAX) {
                close(fd);
                bistro_why(why, why_size, "more than %d threads", STW_MAX);
                return -1;
            }
            atomic_store(&stw_slots[i].tid, tid);
            ++fresh;
            if (stw_blocks(tid, sig)) { /* looked at again in stw_stop's loop */
                atomic_store(&stw_slots[i].state, STW_BLOCKING);
                atomic_store(&stw_count, i + 1);
                continue;
            }
            atomic_store(&stw_slots[i].state, STW_SIGNALLED);
            atomic_store(&stw_count, i + 1);
            if (HEAPHOOK_OS_UNOBSERVED(SYS_tgkill, getpid(), tid, sig, 0, 0, 0) != 0)
                atomic_store(&stw_slots[i].state, STW_GONE);
        }
    }
    close(fd);
    return fresh;
}

/* Stops every other thread (see the file's comment). 0, or -1 with why (all resumed). */
static int stw_stop(char *why, size_t why_size) {
    int sig = HEAPHOOK_BISTRO_SIGNAL;
    struct sigaction old;
    sigaction(sig, NULL, &old);
    bool ours = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == stw_handler;
    if (!ours && ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)) {
        bistro_why(why, why_size, "signal %d (SIGRTMAX-3) has a handler of the program's", sig);
        return -1;
    }
    if (!ours) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = stw_handler;
        action.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&action.sa_mask);
        /* Stays installed: a signal still pending for a thread that blocked it meanwhile must
         * find this handler (idle outside a stop), not the default action, which kills. */
        sigaction(sig, &action, NULL);
    }
    int self = (int)stw_gettid();
    atomic_store(&stw_count, 0);
    atomic_store(&stw_active, 1);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int fresh = stw_signal_new(sig, self, why, why_size);
        if (fresh < 0) {
            stw_resume();
            return -1;
        }
        unsigned n = atomic_load(&stw_count);
        bool waiting = false;
        int blocking = 0;
        for (unsigned i = 0; i < n; ++i) {
            int state = atomic_load(&stw_slots[i].state);
            if (state != STW_SIGNALLED && state != STW_BLOCKING) continue;
            int tid = atomic_load(&stw_slots[i].tid);
            if (HEAPHOOK_OS_UNOBSERVED(SYS_tgkill, getpid(), tid, 0, 0, 0, 0) != 0) {
                atomic_store(&stw_slots[i].state, STW_GONE);
                continue;
            }
            if (state == STW_BLOCKING) {
                uintptr_t pc;
                if (!stw_blocks(tid, sig)) {
                    atomic_store(&stw_slots[i].state, STW_SIGNALLED);
                    HEAPHOOK_OS_UNOBSERVED(SYS_tgkill, getpid(), tid, sig, 0, 0, 0);
                } else if ((pc = stw_sleeping_pc(tid)) != 0) {
                    stw_slots[i].pc = pc;
                    atomic_store(&stw_slots[i].state, STW_SLEEPING);
                    continue;
                } else {
                    blocking = tid;
                }
            }
            waiting = true;
        }
        if (!waiting && fresh == 0) return 0; /* all stopped, and no thread appeared */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 5) {
            stw_resume();
            if (blocking != 0) {
                bistro_why(why, why_size,
                           "thread %d blocks signal %d and keeps running: it cannot be stopped",
                           blocking, sig);
            } else {
                bistro_why(why, why_size, "threads did not stop within 5 s (signal %d)", sig);
            }
            return -1;
        }
        if (waiting) sched_yield();
    }
}

/* Is any stopped thread inside the bytes [from, to)? */
static bool stw_inside(uintptr_t from, uintptr_t to) {
    unsigned n = atomic_load(&stw_count);
    for (unsigned i = 0; i < n; ++i) {
        int state = atomic_load(&stw_slots[i].state);
        if (state != STW_STOPPED && state != STW_SLEEPING) continue;
        if (stw_slots[i].pc > from && stw_slots[i].pc < to) return true;
    }
    return false;
}

/* ---- Apply ---------------------------------------------------------------------------------- */

/* The protection of the mapping containing address, from /proc/self/maps; -1 if not found. */
static int bistro_protection(uintptr_t address) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096];
    size_t have = 0;
    int prot = -1;
    for (bool done = false; !done;) {
        long n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0) break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *newline;
        while ((newline = strchr(line, '\n')) != NULL) {
            *newline = '\0';
            char *end;
            uintptr_t start = strtoull(line, &end, 16);
            uintptr_t stop = strtoull(end + 1, &end, 16);
            if (address >= start && address < stop) {
                const char *perms = end + 1;
                prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                       (perms[2] == 'x' ? PROT_EXEC : 0);
                done = true;
                break;
            }
            line = newline + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    close(fd);
    return prot;
}

static int bistro_write(ucm_bistro_patch *pt, const uint8_t bytes[BISTRO_JUMP], size_t page,
                        char *why, size_t why_size) {
    uintptr_t f = (uintptr_t)pt->function;
    uintptr_t word = f & ~(uintptr_t)7;
    uintptr_t start = f & ~(uintptr_t)(page - 1);
    int prot = bistro_protection(f);
    if (prot < 0) {
        bistro_why(why, why_size, "%s: %p is not in /proc/self/maps", pt->name, (void *)f);
        return -1;
    }
    long rc = HEAPHOOK_OS_UNOBSERVED(SYS_mprotect, start, page, PROT_READ | PROT_WRITE | PROT_EXEC,
                                     0, 0, 0);
    if (rc != 0) {
        bistro_why(why, why_size, "%s: the code page cannot be made writable (errno %d)", pt->name,
                   (int)-rc);
        return -1;
    }
    uint64_t value = __atomic_load_n((uint64_t *)word, __ATOMIC_RELAXED);
    memcpy((uint8_t *)&value + (f - word), bytes, BISTRO_JUMP);
    __atomic_store_n((uint64_t *)word, value, __ATOMIC_SEQ_CST);
    HEAPHOOK_OS_UNOBSERVED(SYS_mprotect, start, page, prot, 0, 0, 0);
    return 0;
}

int ucm_bistro_apply(ucm_bistro_patch *patches, size_t count, bool on, char *why, size_t why_size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (count > 64) {
        bistro_why(why, why_size, "more than 64 patches in one call");
        return -1;
    }
    for (size_t i = 0; i < count; ++i) {
        if (!patches[i].prepared) {
            bistro_why(why, why_size, "%s: not prepared", patches[i].name);
            return -1;
        }
    }
    for (int attempt = 0;; ++attempt) {
        if (stw_stop(why, why_size) != 0) return -1;
        bool busy = false;
        for (size_t i = 0; i < count && !busy; ++i) {
            uintptr_t f = (uintptr_t)patches[i].function;
            if (patches[i].applied != on) busy = stw_inside(f, f + BISTRO_JUMP);
        }
        if (!busy) break;
        stw_resume();
        if (attempt == 1000) {
            bistro_why(why, why_size, "threads keep stopping inside the entries to patch");
            return -1;
        }
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    int status = 0;
    bool changed[64] = {false};
    for (size_t i = 0; i < count && i < 64; ++i) {
        ucm_bistro_patch *pt = &patches[i];
        if (pt->applied == on) continue;
        if (bistro_write(pt, on ? pt->jump : pt->saved, page, why, why_size) != 0) {
            status = -1;
            break;
        }
        pt->applied = on;
        changed[i] = true;
    }
    if (status != 0) { /* put back what this call changed */
        char ignored[8];
        for (size_t i = 0; i < count && i < 64; ++i) {
            ucm_bistro_patch *pt = &patches[i];
            if (changed[i] &&
                bistro_write(pt, on ? pt->saved : pt->jump, page, ignored, sizeof ignored) == 0)
                pt->applied = !on;
        }
    }
    stw_resume();
    return status;
}

#else /* not x86-64 */

size_t ucm_bistro_insn_length(const uint8_t *code) {
    (void)code;
    return 0;
}
int ucm_bistro_prepare(ucm_bistro_patch *patches, size_t count, char *why, size_t why_size) {
    bistro_why(why, why_size, "%s: code patching is implemented for x86-64 only",
               count ? patches[0].name : "bistro");
    return -1;
}
int ucm_bistro_apply(ucm_bistro_patch *patches, size_t count, bool on, char *why, size_t why_size) {
    (void)patches;
    (void)count;
    (void)on;
    bistro_why(why, why_size, "code patching is implemented for x86-64 only");
    return -1;
}

#endif
