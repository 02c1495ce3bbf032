/*
 * bistro.h — code patching of a function's entry (libucm's "bistro" install mode): the first
 * instructions of a function are rewritten into a jump to a hook, and the instructions they
 * replace are relocated into a trampoline, which stays callable as the original function.
 * Calls that never go through a GOT (a library calling its own functions, as glibc's malloc
 * calls mmap) reach the hook too.
 *
 * Contract:
 * - ucm_bistro_prepare decodes and relocates; it changes nothing the process runs. It refuses
 *   (a reason in `why`, naming the function) an entry it cannot relocate safely: an
 *   instruction it does not know, a short relative jump or a rip-relative operand it cannot
 *   move, a jump from inside the function into the bytes the patch covers, an entry too close to
 *   the end of its function, or an entry the patch could not write with one aligned store.
 * - ucm_bistro_apply writes (on) or removes (off) a set of prepared patches with every other
 *   thread of the process stopped (a signal, HEAPHOOK_BISTRO_SIGNAL, whose handler waits) and
 *   none of them stopped inside the bytes being rewritten (else it lets them run and retries).
 *   Each patch is one aligned 8-byte atomic store, so a thread the signal cannot stop (it
 *   blocks the signal while sleeping in a system call) still sees the old or the new entry,
 *   never half of each. The page's protection is put back exactly as /proc/self/maps showed it.
 * - Trampolines are never freed: a pointer to one stays valid after the patch is removed.
 * - Nothing allocates through malloc; the caller serialises prepare and apply (one lock).
 * - x86-64 only; elsewhere prepare refuses.
 */
#ifndef HEAPHOOK_UCM_BISTRO_H
#define HEAPHOOK_UCM_BISTRO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The signal that stops the other threads while entries are rewritten (a real-time signal
 * programs rarely use; heaptrack's leak check uses SIGRTMAX - 2). */
#define HEAPHOOK_BISTRO_SIGNAL (SIGRTMAX - 3)

typedef struct ucm_bistro_patch {
    /* In: */
    const char *name; /* for messages */
    void *function;   /* the entry to patch */
    void *hook;       /* where calls go once applied */
    /* Out (prepare): */
    void *trampoline; /* the original function, callable */
    size_t moved;     /* bytes of whole instructions relocated into the trampoline */
    uint8_t saved[5]; /* the entry's first 5 bytes before the patch */
    uint8_t jump[5];  /* the patch: jmp rel32 to the hook (or its thunk) */
    bool prepared, applied;
} ucm_bistro_patch;

/* Prepares count patches (one page of trampolines near the functions). 0, or -1 with a reason
 * naming the first function refused in why (nothing prepared then). */
int ucm_bistro_prepare(ucm_bistro_patch *patches, size_t count, char *why, size_t why_size);

/* Applies (on) or removes (off) the prepared patches whose `applied` differs from on, all in
 * one stop of the other threads. 0, or -1 with a reason in why (nothing changed then). */
int ucm_bistro_apply(ucm_bistro_patch *patches, size_t count, bool on, char *why, size_t why_size);

/* The length of the x86-64 instruction at code (0 when not decoded); exposed for tests. */
size_t ucm_bistro_insn_length(const uint8_t *code);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_UCM_BISTRO_H */
