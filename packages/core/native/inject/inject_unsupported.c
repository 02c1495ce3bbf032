/* The architecture seam (arch.h) on architectures heaphook-inject does not implement yet
 * (aarch64 among them: qemu-user cannot ptrace its guests, so an implementation could not be
 * tested here). main.c refuses with INJECT_ARCHITECTURE before any of these is called. */
#if !defined(__x86_64__)

#include "arch.h"

#include <errno.h>

const bool arch_supported = false;
const uint16_t arch_elf_machine = 0;

struct arch_state *arch_state_new(void) {
    return 0;
}
void arch_state_free(struct arch_state *state) {
    (void)state;
}
int arch_save(pid_t tid, struct arch_state *state) {
    (void)tid, (void)state;
    errno = ENOSYS;
    return -1;
}
int arch_restore(pid_t tid, const struct arch_state *state) {
    (void)tid, (void)state;
    errno = ENOSYS;
    return -1;
}
long arch_syscall_number(const struct arch_state *state) {
    return (void)state, -1;
}
uintptr_t arch_syscall_arg(const struct arch_state *state, int index) {
    return (void)state, (void)index, 0;
}
uintptr_t arch_pc(const struct arch_state *state) {
    return (void)state, 0;
}
uintptr_t arch_sp(const struct arch_state *state) {
    return (void)state, 0;
}
bool arch_syscall_outside_allocator(long number) {
    return (void)number, false;
}
bool arch_syscall_is_futex_wait(const struct arch_state *state) {
    return (void)state, false;
}
const unsigned char *arch_trampoline(size_t *size) {
    *size = 0;
    return 0;
}
int arch_start_trampoline(pid_t tid, int mem_fd, const struct arch_state *saved, uintptr_t code,
                          uintptr_t below, const struct arch_call *call, uintptr_t *block) {
    (void)tid, (void)mem_fd, (void)saved, (void)code, (void)below, (void)call, (void)block;
    errno = ENOSYS;
    return -1;
}
bool arch_at_report(uintptr_t code, uintptr_t pc, long number) {
    return (void)code, (void)pc, (void)number, false;
}
int arch_read_outcome(int mem_fd, uintptr_t block, struct arch_outcome *outcome) {
    (void)mem_fd, (void)block, (void)outcome;
    errno = ENOSYS;
    return -1;
}
int arch_abandon_call(pid_t tid, int mem_fd, const struct arch_state *saved, uintptr_t block) {
    (void)tid, (void)mem_fd, (void)saved, (void)block;
    errno = ENOSYS;
    return -1;
}

#endif
