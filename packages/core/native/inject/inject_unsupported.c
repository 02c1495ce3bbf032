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
int arch_setup_call(pid_t tid, const struct arch_state *saved, uintptr_t fn, const uintptr_t *args,
                    int nargs, uintptr_t stack_top, int mem_fd) {
    (void)tid, (void)saved, (void)fn, (void)args, (void)nargs, (void)stack_top, (void)mem_fd;
    errno = ENOSYS;
    return -1;
}
int arch_call_result(pid_t tid, uintptr_t *value, uintptr_t *pc) {
    (void)tid, (void)value, (void)pc;
    errno = ENOSYS;
    return -1;
}

#endif
