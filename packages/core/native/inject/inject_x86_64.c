/* The x86-64 side of heaphook-inject's architecture seam (arch.h). */
#if defined(__x86_64__)

#include "arch.h"

#include <cpuid.h>
#include <elf.h>
#include <stddef.h>
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <unistd.h>

const bool arch_supported = true;
const uint16_t arch_elf_machine = EM_X86_64;

/* XSAVE area: legacy FP/SSE, AVX, AVX-512 and AMX tiles fit in 16 KiB. */
#define XSTATE_CAPACITY 16384

struct arch_state {
    struct user_regs_struct regs;
    unsigned char xstate[XSTATE_CAPACITY];
    size_t xstate_size; /* 0: no NT_X86_XSTATE, fp holds the FP/SSE state */
    struct user_fpregs_struct fp;
};

struct arch_state *arch_state_new(void) {
    return calloc(1, sizeof(struct arch_state));
}
void arch_state_free(struct arch_state *state) {
    free(state);
}

int arch_save(pid_t tid, struct arch_state *state) {
    if (ptrace(PTRACE_GETREGS, tid, 0, &state->regs) != 0) return -1;
    struct iovec iov = {state->xstate, sizeof state->xstate};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) == 0) {
        state->xstate_size = iov.iov_len;
        return 0;
    }
    state->xstate_size = 0;
    return ptrace(PTRACE_GETFPREGS, tid, 0, &state->fp) == 0 ? 0 : -1;
}

int arch_restore(pid_t tid, const struct arch_state *state) {
    if (state->xstate_size != 0) {
        struct iovec iov = {(void *)state->xstate, state->xstate_size};
        if (ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov) != 0) return -1;
    } else if (ptrace(PTRACE_SETFPREGS, tid, 0, &state->fp) != 0) {
        return -1;
    }
    /* Last: orig_rax and rax as saved let the kernel restart an interrupted syscall. */
    return ptrace(PTRACE_SETREGS, tid, 0, &state->regs) == 0 ? 0 : -1;
}

long arch_syscall_number(const struct arch_state *state) {
    return (long)state->regs.orig_rax;
}

uintptr_t arch_syscall_arg(const struct arch_state *state, int index) {
    const struct user_regs_struct *r = &state->regs;
    switch (index) {
        case 0:
            return r->rdi;
        case 1:
            return r->rsi;
        case 2:
            return r->rdx;
        case 3:
            return r->r10;
        case 4:
            return r->r8;
        default:
            return r->r9;
    }
}

uintptr_t arch_pc(const struct arch_state *state) {
    return state->regs.rip;
}
uintptr_t arch_sp(const struct arch_state *state) {
    return state->regs.rsp;
}

bool arch_syscall_outside_allocator(long number) {
    switch (number) {
        case SYS_read:
        case SYS_write:
        case SYS_readv:
        case SYS_writev:
        case SYS_pread64:
        case SYS_pwrite64:
        case SYS_poll:
        case SYS_ppoll:
        case SYS_select:
        case SYS_pselect6:
        case SYS_epoll_wait:
        case SYS_epoll_pwait:
        case SYS_epoll_pwait2:
        case SYS_nanosleep:
        case SYS_clock_nanosleep:
        case SYS_pause:
        case SYS_rt_sigsuspend:
        case SYS_rt_sigtimedwait:
        case SYS_wait4:
        case SYS_waitid:
        case SYS_accept:
        case SYS_accept4:
        case SYS_recvfrom:
        case SYS_recvmsg:
        case SYS_recvmmsg:
        case SYS_sendto:
        case SYS_sendmsg:
        case SYS_connect:
        case SYS_msgrcv:
        case SYS_semop:
        case SYS_semtimedop:
        case SYS_io_getevents:
        case SYS_io_uring_enter:
        case SYS_sched_yield:
        case SYS_getpid:
        case SYS_gettid:
        case SYS_clock_gettime:
            return true;
        default:
            return false;
    }
}

bool arch_syscall_is_futex_wait(const struct arch_state *state) {
    if ((long)state->regs.orig_rax != SYS_futex) return false;
    int op = (int)state->regs.rsi & FUTEX_CMD_MASK;
    return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI ||
           op == FUTEX_WAIT_REQUEUE_PI || op == FUTEX_LOCK_PI2;
}

/* ---- The return trampoline (arch.h) ---------------------------------------------------------
 *
 * The block the trampoline works from (rbx points at it) lies on the thread's stack below its
 * red zone, the FP/vector state above it, the strings above that; the trampoline's own stack
 * starts below the block. Its tail is an rt_sigframe: rt_sigreturn, with rsp at `uc`, restores
 * the saved registers (rip and rsp included), the FP/vector state (uc_mcontext.fpstate, in the
 * XSAVE layout PTRACE_GETREGSET gives, closed by FP_XSTATE_MAGIC2), the signal mask (uc_sigmask,
 * which the trampoline's first syscall filled) and the alternate signal stack (uc_stack, which
 * its last syscall but one filled with the current one), all at once, as after a signal handler.
 */

/* The kernel's struct sigcontext and struct ucontext of x86-64 (asm/sigcontext.h, asm/ucontext.h;
 * not glibc's ucontext_t, whose signal mask is 128 bytes). */
struct k_sigcontext {
    uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip,
        eflags;
    uint16_t cs, gs, fs, ss;
    uint64_t err, trapno, oldmask, cr2, fpstate, reserved[8];
};
struct k_ucontext {
    uint64_t flags, link;
    uint64_t ss_sp;
    int32_t ss_flags, ss_pad;
    uint64_t ss_size;
    struct k_sigcontext mcontext;
    uint64_t sigmask;
};

struct trampoline_block {
    /* set by the injector */
    uint64_t dlopen, dlsym, dlerror, errno_location, library, symbol, argument;
    uint64_t restart;   /* the -ERESTART* code of the interrupted syscall (0: none) */
    uint64_t eintr_rip; /* where the syscall returns when a handler makes it fail with EINTR */
    uint64_t all_signals;
    /* set by the trampoline */
    uint64_t stage, handle, function, result, message, errno_address, errno_value, pending;
    uint64_t action[4]; /* the kernel's struct sigaction: handler, flags, restorer, mask */
    /* an rt_sigframe: pretcode, ucontext, siginfo (the kernel checks that it is accessible) */
    uint64_t pretcode;
    struct k_ucontext uc;
    uint8_t siginfo[128];
};

#define TB_DLOPEN 0
#define TB_DLSYM 8
#define TB_DLERROR 16
#define TB_ERRNO_LOCATION 24
#define TB_LIBRARY 32
#define TB_SYMBOL 40
#define TB_ARGUMENT 48
#define TB_RESTART 56
#define TB_EINTR_RIP 64
#define TB_ALL_SIGNALS 72
#define TB_STAGE 80
#define TB_HANDLE 88
#define TB_FUNCTION 96
#define TB_RESULT 104
#define TB_MESSAGE 112
#define TB_ERRNO_ADDRESS 120
#define TB_ERRNO_VALUE 128
#define TB_PENDING 136
#define TB_ACTION 144
#define TB_ACTION_FLAGS 152
#define TB_UC 184
#define TB_UC_STACK 200
#define TB_UC_RAX 328
#define TB_UC_RIP 352
#define TB_UC_SIGMASK 480

_Static_assert(sizeof(struct k_sigcontext) == 256, "the kernel's struct sigcontext");
_Static_assert(sizeof(struct k_ucontext) == 304, "the kernel's struct ucontext");
_Static_assert(offsetof(struct trampoline_block, restart) == TB_RESTART, "block layout");
_Static_assert(offsetof(struct trampoline_block, all_signals) == TB_ALL_SIGNALS, "block layout");
_Static_assert(offsetof(struct trampoline_block, stage) == TB_STAGE, "block layout");
_Static_assert(offsetof(struct trampoline_block, pending) == TB_PENDING, "block layout");
_Static_assert(offsetof(struct trampoline_block, action) == TB_ACTION, "block layout");
_Static_assert(offsetof(struct trampoline_block, uc) == TB_UC, "block layout");
_Static_assert(offsetof(struct trampoline_block, uc.ss_sp) == TB_UC_STACK, "block layout");
_Static_assert(offsetof(struct trampoline_block, uc.mcontext.rax) == TB_UC_RAX, "block layout");
_Static_assert(offsetof(struct trampoline_block, uc.mcontext.rip) == TB_UC_RIP, "block layout");
_Static_assert(offsetof(struct trampoline_block, uc.sigmask) == TB_UC_SIGMASK, "block layout");

#define TB_STR2(x) #x
#define TB_STR(x) TB_STR2(x)
#define AT(field) TB_STR(field) "(%rbx)"

#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516
#define SA_RESTART_FLAG 0x10000000
#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4
/* The report: a syscall no allocator makes and that session.c's thread picking never waits for. */
#define REPORT_SYSCALL SYS_getppid

/* Bytes only: the injector copies them into the target and never runs them itself. */
__asm__(".pushsection .rodata.hh_inject_trampoline,\"a\",@progbits\n"
        ".balign 16\n"
        "hh_inject_trampoline_start:\n"
        "    cld\n"
        /* rt_sigprocmask(SIG_SETMASK, &all_signals, &uc.uc_sigmask, 8): a signal that comes
         * during the call stays pending until rt_sigreturn puts the mask back */
        "    mov $" TB_STR(SYS_rt_sigprocmask) ", %eax\n"
        "    mov $2, %edi\n"
        "    lea " AT(TB_ALL_SIGNALS) ", %rsi\n"
        "    lea " AT(TB_UC_SIGMASK) ", %rdx\n"
        "    mov $8, %r10d\n"
        "    syscall\n"
        "    movq $1, " AT(TB_STAGE) "\n"
        /* errno, put back at the end */
        "    mov " AT(TB_ERRNO_LOCATION) ", %rax\n"
        "    test %rax, %rax\n"
        "    jz 1f\n"
        "    call *%rax\n"
        "    mov %rax, " AT(TB_ERRNO_ADDRESS) "\n"
        "    movl (%rax), %ecx\n"
        "    mov %rcx, " AT(TB_ERRNO_VALUE) "\n"
        "1:  mov " AT(TB_LIBRARY) ", %rdi\n"
        "    mov $2, %esi\n" /* RTLD_NOW */
        "    xor %eax, %eax\n"
        "    call *" AT(TB_DLOPEN) "\n"
        "    mov %rax, " AT(TB_HANDLE) "\n"
        "    movq $2, " AT(TB_STAGE) "\n"
        "    test %rax, %rax\n"
        "    jnz 2f\n"
        "    mov " AT(TB_DLERROR) ", %rax\n"
        "    test %rax, %rax\n"
        "    jz 3f\n"
        "    call *%rax\n"
        "    mov %rax, " AT(TB_MESSAGE) "\n"
        "    jmp 3f\n"
        "2:  mov %rax, %rdi\n"
        "    mov " AT(TB_SYMBOL) ", %rsi\n"
        "    xor %eax, %eax\n"
        "    call *" AT(TB_DLSYM) "\n"
        "    mov %rax, " AT(TB_FUNCTION) "\n"
        "    movq $3, " AT(TB_STAGE) "\n"
        "    test %rax, %rax\n"
        "    jz 3f\n"
        "    mov " AT(TB_ARGUMENT) ", %rdi\n"
        "    xor %eax, %eax\n"
        "    call *" AT(TB_FUNCTION) "\n"
        "    mov %rax, " AT(TB_RESULT) "\n"
        "    movq $4, " AT(TB_STAGE) "\n"
        /* the report: the injector, if any, reads the results at this syscall's entry */
        "3:  mov $" TB_STR(REPORT_SYSCALL) ", %eax\n"
        "    syscall\n"
        "hh_inject_trampoline_report:\n"
        "    mov " AT(TB_ERRNO_ADDRESS) ", %rax\n"
        "    test %rax, %rax\n"
        "    jz 4f\n"
        "    mov " AT(TB_ERRNO_VALUE) ", %rcx\n"
        "    movl %ecx, (%rax)\n"
        /* An interrupted syscall is restarted (the frame's rip is on the syscall instruction),
         * unless a signal that came meanwhile runs a handler for which the kernel would have
         * made it fail with EINTR: ERESTARTNOHAND and ERESTART_RESTARTBLOCK, and ERESTARTSYS
         * without SA_RESTART. The lowest pending signal with a handler decides, as in the
         * kernel's delivery order. */
        "4:  mov " AT(TB_RESTART) ", %rax\n"
        "    test %rax, %rax\n"
        "    jz 7f\n"
        "    cmp $-" TB_STR(ERESTARTNOINTR) ", %rax\n"
        "    je 7f\n"
        "    mov $" TB_STR(SYS_rt_sigpending) ", %eax\n"
        "    lea " AT(TB_PENDING) ", %rdi\n"
        "    mov $8, %esi\n"
        "    syscall\n"
        "    mov " AT(TB_PENDING) ", %r12\n"
        "    mov " AT(TB_UC_SIGMASK) ", %rax\n"
        "    not %rax\n"
        "    and %rax, %r12\n"
        "5:  test %r12, %r12\n"
        "    jz 7f\n"
        "    bsf %r12, %rcx\n"
        "    btr %rcx, %r12\n"
        "    lea 1(%rcx), %edi\n"
        "    xor %esi, %esi\n"
        "    lea " AT(TB_ACTION) ", %rdx\n"
        "    mov $8, %r10d\n"
        "    mov $" TB_STR(SYS_rt_sigaction) ", %eax\n"
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jnz 5b\n"
        "    cmpq $1, " AT(TB_ACTION) "\n" /* SIG_DFL, SIG_IGN: no handler runs */
        "    jbe 5b\n"
        "    cmpq $-" TB_STR(ERESTARTSYS) ", " AT(TB_RESTART) "\n"
        "    jne 6f\n"
        "    testq $" TB_STR(SA_RESTART_FLAG) ", " AT(TB_ACTION_FLAGS) "\n"
        "    jnz 7f\n"
        "6:  movq $-4, " AT(TB_UC_RAX) "\n" /* -EINTR */
        "    mov " AT(TB_EINTR_RIP) ", %rax\n"
        "    mov %rax, " AT(TB_UC_RIP) "\n"
        /* sigaltstack(NULL, &uc.uc_stack): rt_sigreturn sets the alternate stack it names */
        "7:  mov $" TB_STR(SYS_sigaltstack) ", %eax\n"
        "    xor %edi, %edi\n"
        "    lea " AT(TB_UC_STACK) ", %rsi\n"
        "    syscall\n"
        "    lea " AT(TB_UC) ", %rsp\n"
        "    mov $" TB_STR(SYS_rt_sigreturn) ", %eax\n"
        "    syscall\n"
        "    ud2\n"
        "hh_inject_trampoline_end:\n"
        ".popsection\n");

extern const unsigned char hh_inject_trampoline_start[], hh_inject_trampoline_report[],
    hh_inject_trampoline_end[];

const unsigned char *arch_trampoline(size_t *size) {
    *size = (size_t)(hh_inject_trampoline_end - hh_inject_trampoline_start);
    return hh_inject_trampoline_start;
}

bool arch_at_report(uintptr_t code, uintptr_t pc, long number) {
    return number == REPORT_SYSCALL &&
           pc == code + (uintptr_t)(hh_inject_trampoline_report - hh_inject_trampoline_start);
}

/* The signal mask the trampoline runs with: every signal but glibc's internal SIGCANCEL (32) and
 * SIGSETXID (33), which glibc's own sigprocmask never blocks either (a setuid in another thread
 * waits for every thread to handle SIGSETXID). */
#define TRAMPOLINE_MASK (~0ULL & ~(1ULL << 31) & ~(1ULL << 32))

/*
 * The FP/vector state as a signal frame holds it (into fp; returns its size). The XSAVE area of
 * PTRACE_GETREGSET, whose software-reserved bytes (464..511) hold XCR0, the enabled features,
 * for debuggers; a signal frame has struct _fpx_sw_bytes there: FP_XSTATE_MAGIC1, the size of
 * the frame's state (closed by FP_XSTATE_MAGIC2 there), the features to restore. That size may
 * not exceed the task's own (which lacks AMX tiles unless the task asked for them, while
 * ptrace's buffer always has room for them): so it covers the components the XSAVE header says
 * are in use (their offsets and sizes from CPUID leaf 0xD); the features not in use are put in
 * their initial state by XRSTOR, as they are. Without XSAVE, the FXSAVE area alone: the kernel
 * restores the legacy state from it.
 */
static size_t sigframe_fpstate(const struct arch_state *saved, unsigned char *fp) {
    memset(fp, 0, XSTATE_CAPACITY + 64);
    if (saved->xstate_size < 576) {
        memcpy(fp, &saved->fp, sizeof saved->fp);
        return sizeof saved->fp;
    }
    memcpy(fp, saved->xstate, saved->xstate_size);
    uint64_t xcr0, in_use;
    memcpy(&xcr0, fp + 464, sizeof xcr0);
    memcpy(&in_use, fp + 512, sizeof in_use); /* the XSAVE header's XSTATE_BV */
    uint32_t size = 576;                      /* legacy area and header */
    for (unsigned feature = 2; feature < 64; feature++) {
        if (!((xcr0 & in_use) >> feature & 1)) continue;
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        __cpuid_count(0xd, feature, eax, ebx, ecx, edx);
        if (ebx + eax > size) size = ebx + eax;
    }
    memset(fp + 464, 0, 48);
    if (xcr0 == 0 || size + 4 > saved->xstate_size + 64) return saved->xstate_size; /* fx only */
    struct {
        uint32_t magic1, extended_size;
        uint64_t xfeatures;
        uint32_t xstate_size, padding[7];
    } sw = {FP_XSTATE_MAGIC1, size + 4, xcr0, size, {0}};
    memcpy(fp + 464, &sw, sizeof sw);
    uint32_t magic2 = FP_XSTATE_MAGIC2;
    memcpy(fp + size, &magic2, sizeof magic2);
    return size + sizeof magic2 > saved->xstate_size ? size + sizeof magic2 : saved->xstate_size;
}

int arch_start_trampoline(pid_t tid, int mem_fd, const struct arch_state *saved, uintptr_t code,
                          uintptr_t below, const struct arch_call *call, uintptr_t *block_at) {
    const struct user_regs_struct *r = &saved->regs;
    /* The FP/vector state: what PTRACE_GETREGSET gave (the XSAVE layout), with the software
     * bytes of a signal frame (which PTRACE_GETREGSET fills differently) and FP_XSTATE_MAGIC2 */
    unsigned char fp[XSTATE_CAPACITY + 64];
    size_t fp_size = sigframe_fpstate(saved, fp);
    uintptr_t fp_at = (below - fp_size) & ~(uintptr_t)63;
    uintptr_t block_addr = (fp_at - sizeof(struct trampoline_block)) & ~(uintptr_t)63;

    struct trampoline_block block;
    memset(&block, 0, sizeof block);
    block.dlopen = call->dlopen;
    block.dlsym = call->dlsym;
    block.dlerror = call->dlerror;
    block.errno_location = call->errno_location;
    block.library = call->library;
    block.symbol = call->symbol;
    block.argument = call->argument;
    block.all_signals = TRAMPOLINE_MASK;
    struct k_ucontext *uc = &block.uc;
    uc->flags = UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
    struct k_sigcontext *m = &uc->mcontext;
    m->r8 = r->r8, m->r9 = r->r9, m->r10 = r->r10, m->r11 = r->r11;
    m->r12 = r->r12, m->r13 = r->r13, m->r14 = r->r14, m->r15 = r->r15;
    m->rdi = r->rdi, m->rsi = r->rsi, m->rbp = r->rbp, m->rbx = r->rbx;
    m->rdx = r->rdx, m->rax = r->rax, m->rcx = r->rcx, m->rsp = r->rsp;
    m->rip = r->rip, m->eflags = r->eflags;
    m->cs = (uint16_t)r->cs, m->ss = (uint16_t)r->ss;
    m->fpstate = fp_at;
    /* A syscall the stop interrupted: the kernel would restart it now (no signal handler ran),
     * so the frame returns onto the syscall instruction with its number (or restart_syscall's)
     * in rax. The trampoline turns that into EINTR if a handler comes to run (see above). */
    long number = (long)r->orig_rax, error = -(long)r->rax;
    if (number >= 0 && (error == ERESTARTSYS || error == ERESTARTNOINTR ||
                        error == ERESTARTNOHAND || error == ERESTART_RESTARTBLOCK)) {
        block.restart = r->rax;
        block.eintr_rip = r->rip;
        m->rax = error == ERESTART_RESTARTBLOCK ? SYS_restart_syscall : (uint64_t)number;
        m->rip = r->rip - 2; /* `syscall` is two bytes */
    }
    if (pwrite(mem_fd, fp, fp_size, (off_t)fp_at) != (ssize_t)fp_size ||
        pwrite(mem_fd, &block, sizeof block, (off_t)block_addr) != (ssize_t)sizeof block)
        return -1;

    struct user_regs_struct regs = *r;
    regs.rip = code;
    regs.rbx = block_addr;
    regs.rsp = block_addr - 64; /* 16-byte aligned, as before a `call` */
    regs.rax = 0;
    regs.orig_rax = -1ULL;                 /* not in a syscall: no restart rewinds rip */
    regs.eflags &= ~(0x400ULL | 0x100ULL); /* DF and TF clear */
    if (ptrace(PTRACE_SETREGS, tid, 0, &regs) != 0) return -1;
    *block_at = block_addr;
    return 0;
}

int arch_read_outcome(int mem_fd, uintptr_t block_addr, struct arch_outcome *outcome) {
    struct trampoline_block block;
    if (pread(mem_fd, &block, sizeof block, (off_t)block_addr) != (ssize_t)sizeof block) return -1;
    outcome->stage = (int)block.stage;
    outcome->handle = block.handle;
    outcome->function = block.function;
    outcome->result = block.result;
    outcome->message = block.message;
    return 0;
}

int arch_abandon_call(pid_t tid, int mem_fd, const struct arch_state *saved, uintptr_t block_addr) {
    struct trampoline_block block;
    if (pread(mem_fd, &block, sizeof block, (off_t)block_addr) != (ssize_t)sizeof block) return -1;
    if (block.errno_address != 0) {
        int value = (int)block.errno_value;
        if (pwrite(mem_fd, &value, sizeof value, (off_t)block.errno_address) != sizeof value)
            return -1;
    }
    /* The mask the trampoline replaced; before that it had not changed it. Set first: the
     * registers as saved (the syscall number included) then let the kernel restart an
     * interrupted syscall exactly as it would have. */
    if (block.stage >= ARCH_STAGE_STARTED &&
        ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof block.uc.sigmask, &block.uc.sigmask) != 0)
        return -1;
    return arch_restore(tid, saved);
}

#endif /* __x86_64__ */
