/*
 * The architecture seam of heaphook-inject: everything that depends on the instruction set
 * (registers, the calling convention, syscall numbers and restart). One implementation per
 * architecture, inject_<arch>.c; session.c uses only this.
 */
#ifndef HEAPHOOK_INJECT_ARCH_H
#define HEAPHOOK_INJECT_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A thread's complete user-visible register state: general, floating-point and vector. */
struct arch_state;

/* Whether this build can inject at all (false: the architecture is refused with a line). */
extern const bool arch_supported;
/* ELF e_machine of the code this injector can call into (EM_X86_64, EM_AARCH64). */
extern const uint16_t arch_elf_machine;

struct arch_state *arch_state_new(void);
void arch_state_free(struct arch_state *state);

/* Reads / writes every register of a ptrace-stopped thread. 0 or -1 with errno. */
int arch_save(pid_t tid, struct arch_state *state);
int arch_restore(pid_t tid, const struct arch_state *state);

/* The syscall the saved thread is in or has just left (-1: none, it was in user code), its
 * arguments, and the address of the instruction after the syscall instruction. */
long arch_syscall_number(const struct arch_state *state);
uintptr_t arch_syscall_arg(const struct arch_state *state, int index);
uintptr_t arch_pc(const struct arch_state *state);
uintptr_t arch_sp(const struct arch_state *state);

/* Whether syscall `number` is one the C library's allocator never makes (read, poll, nanosleep,
 * accept...): a thread stopped in it is not inside malloc. futex is decided by the caller. */
bool arch_syscall_outside_allocator(long number);
bool arch_syscall_is_futex_wait(const struct arch_state *state);

/*
 * The return trampoline: position-independent code that heaphook-inject copies into an unused
 * corner of the target's code (session.c's code cave) and runs on the taken thread. It blocks
 * the thread's signals, saves errno, calls dlopen, dlsym and the function (dlerror when dlopen
 * fails), stores their results in its block, makes one harmless syscall (the report, where a
 * tracing injector stops the thread to read them; untraced, the syscall just returns), puts
 * errno back and returns to the interrupted code with rt_sigreturn, which restores every
 * register, the FP/vector state and the signal mask at once. So the thread completes the call
 * and gives itself back whether or not the injector is still there.
 */
const unsigned char *arch_trampoline(size_t *size);

/* What the trampoline calls (addresses in the target; dlerror and errno_location may be 0) and
 * with what (strings already written in the target; argument 0 passes NULL). */
struct arch_call {
    uintptr_t dlopen, dlsym, dlerror, errno_location;
    uintptr_t library, symbol, argument;
};

/* How far the trampoline got, and what it got back. */
enum arch_stage {
    ARCH_STAGE_NOT_STARTED = 0,
    ARCH_STAGE_STARTED = 1,  /* signals blocked, the old mask saved */
    ARCH_STAGE_DLOPEN = 2,   /* dlopen returned (handle; message when NULL) */
    ARCH_STAGE_DLSYM = 3,    /* dlsym returned (function) */
    ARCH_STAGE_RETURNED = 4, /* the function returned (result) */
};
struct arch_outcome {
    int stage;
    uintptr_t handle, function, result, message;
};

/* Writes the trampoline's block (the saved context as a signal frame, the FP/vector state, the
 * call) on the stopped thread's stack at or below `below` (below its red zone), then, in one
 * PTRACE_SETREGS, points the thread at the trampoline at `code` (already written). *block: where
 * the block is. mem_fd: /proc/PID/mem open for writing. 0, or -1 with errno (nothing changed in
 * the thread's registers). */
int arch_start_trampoline(pid_t tid, int mem_fd, const struct arch_state *saved, uintptr_t code,
                          uintptr_t below, const struct arch_call *call, uintptr_t *block);
/* At a syscall-entry stop at pc `pc` of syscall `number`: whether it is the trampoline's report. */
bool arch_at_report(uintptr_t code, uintptr_t pc, long number);
/* Reads the block's results. 0, or -1 with errno. */
int arch_read_outcome(int mem_fd, uintptr_t block, struct arch_outcome *outcome);
/* The call faulted (the thread is stopped at the fault): registers and FP state as saved, errno
 * and the signal mask as the trampoline found them. The thread is then detached without the
 * fault's signal. 0, or -1 with errno. */
int arch_abandon_call(pid_t tid, int mem_fd, const struct arch_state *saved, uintptr_t block);

#endif /* HEAPHOOK_INJECT_ARCH_H */
