/* The x86-64 side of heaphook-inject's architecture seam (arch.h). */
#if defined(__x86_64__)

#include "arch.h"

#include <elf.h>
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

int arch_setup_call(pid_t tid, const struct arch_state *saved, uintptr_t fn, const uintptr_t *args,
                    int nargs, uintptr_t stack_top, int mem_fd) {
    if (nargs > 6 || (stack_top & 15) != 0) {
        errno = EINVAL;
        return -1;
    }
    struct user_regs_struct regs = saved->regs;
    unsigned long long *arg_regs[6] = {&regs.rdi, &regs.rsi, &regs.rdx,
                                       &regs.rcx, &regs.r8,  &regs.r9};
    for (int i = 0; i < nargs; i++) *arg_regs[i] = args[i];
    /* As after a `call`: the return address at rsp, rsp + 8 16-byte aligned. */
    uintptr_t return_address = 0;
    regs.rsp = stack_top - 8;
    if (pwrite(mem_fd, &return_address, sizeof return_address, (off_t)regs.rsp) !=
        (ssize_t)sizeof return_address)
        return -1;
    regs.rip = fn;
    regs.rax = 0;             /* no vector registers for a variadic callee */
    regs.orig_rax = -1ULL;    /* not in a syscall: no restart rewinds rip */
    regs.eflags &= ~0x400ULL; /* DF clear, as the ABI requires at a call */
    return ptrace(PTRACE_SETREGS, tid, 0, &regs) == 0 ? 0 : -1;
}

int arch_call_result(pid_t tid, uintptr_t *value, uintptr_t *pc) {
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, 0, &regs) != 0) return -1;
    *value = regs.rax;
    *pc = regs.rip;
    return 0;
}

#endif /* __x86_64__ */
