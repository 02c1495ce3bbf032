/*
 * unwinder.h — call stacks of the allocating thread, without frame pointers.
 *
 * On x86-64 a small DWARF CFI interpreter reads .eh_frame (found through _dl_find_object)
 * and caches, per return address, how to step to the caller (where the CFA is, where the
 * return address and the saved rbp are). A cached step is a hash probe and two loads, so a
 * stack of 20 frames costs a few hundred nanoseconds. Frames whose rules it does not handle
 * (signal trampolines, DWARF expressions) send the whole walk to _Unwind_Backtrace from
 * libgcc_s. Elsewhere _Unwind_Backtrace is used throughout.
 */
#ifndef HH_UNWIND_H
#define HH_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

/* Prepares the caches; call once, outside any hook, before the first hh_unwind. Frames whose
 * address lies in [skip_lo, skip_hi) (the tracer itself) are left out of every stack. */
void hh_unwind_init(uintptr_t skip_lo, uintptr_t skip_hi, bool use_fast);

/* Leaves the frames in [lo, hi) out of every stack too (one more range: the memory-event
 * library whose hook calls vm.c's handler). */
void hh_unwind_skip_also(uintptr_t lo, uintptr_t hi);

/* Fills pcs[0..] with return addresses, innermost first (the caller of malloc is pcs[0]).
 * Returns the number of frames. */
int hh_unwind(uintptr_t *pcs, int max);

/* The registers of a frame, captured by HH_CAPTURE_REGS in a hook so that the walk starts
 * there and skips the tracer's own frames below it. */
typedef struct hh_regs {
    uintptr_t pc, sp, bp;
} hh_regs;

#if defined(__x86_64__)
#define HH_CAPTURE_REGS(r)                                                \
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" \
                     : "=r"((r).pc), "=r"((r).sp), "=r"((r).bp))
#else
#define HH_CAPTURE_REGS(r) ((r).pc = (r).sp = (r).bp = 0)
#endif

/* As hh_unwind, from the frame whose registers regs holds (a frame still live); with a zero
 * pc, from here. *same_outer says how many of the frames, counted from the outer end, are
 * known to be those of this thread's previous call at its outer end (0: not known): a walk
 * that joins the walk cache checks those frames anyway, and the stack's interning then need
 * not compare them again. */
int hh_unwind_from(const hh_regs *regs, uintptr_t *pcs, int max, int *same_outer);

/* Forget cached rules (after dlclose: code may be unmapped and other code mapped there). */
void hh_unwind_invalidate(void);
/* Fork child (fork.c): the rule cache's insert try-lock, which a thread of the parent may have
 * held, is free again (an insert cut short leaves a slot that lookups pass over). */
void hh_unwind_postfork_child(void);

/* Counters for the README's measurements. */
uint64_t hh_unwind_slow_walks(void);

#endif /* HH_UNWIND_H */
