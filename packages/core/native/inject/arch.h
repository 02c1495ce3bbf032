/*
 * The architecture seam of heaphook-inject: everything that depends on the instruction set
 * (registers, the calling convention, syscall numbers and restart). One implementation per
 * architecture, inject_<arch>.c; session.c uses only this.
 */
#ifndef HEAPHOOK_INJECT_ARCH_H
#define HEAPHOOK_INJECT_ARCH_H

#include <stdbool.h>
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

/* Sets the stopped thread up to call fn(args[0..nargs-1]) with its stack at or below
 * stack_top (16-byte aligned, below the saved red zone) and a return address of 0, so the
 * return faults at pc 0. Not a syscall restart: the kernel must not rewind the pc.
 * mem_fd: /proc/PID/mem open for writing (the return address may live on the stack). */
int arch_setup_call(pid_t tid, const struct arch_state *saved, uintptr_t fn, const uintptr_t *args,
                    int nargs, uintptr_t stack_top, int mem_fd);
/* After the call returned (a fault at pc 0): its return value. */
int arch_call_result(pid_t tid, uintptr_t *value, uintptr_t *pc);

#endif /* HEAPHOOK_INJECT_ARCH_H */
