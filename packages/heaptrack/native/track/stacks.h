/*
 * stacks.h — call stacks interned as a trie: a node is (parent node, return address) and has
 * a small id; an event refers to the node of its innermost frame. Each node is sent to the
 * log once (a NODE record), before the first event that uses it, so the log holds each
 * distinct stack once and shared outer frames once for all stacks.
 */
#ifndef HH_STACKS_H
#define HH_STACKS_H

#include <stdint.h>

#include "unwinder.h"

#define HH_MAX_DEPTH 256

/* Initialises the node table (mmap). Returns 0 or -1. */
int hh_stacks_init(void);

/* Unwinds the calling thread's stack from the frame of regs (at most depth frames; regs may be
 * NULL: from here) and returns its node id, 0 when
 * there is no frame, or UINT32_MAX when a node could not be sent (ring full in drop mode). */
uint32_t hh_stack_capture(int depth, const hh_regs *regs);

/* The same from here, the innermost frames that lie in [lo, hi) left out (the library that
 * called: rtcheck's guard, rt.c). Not for the hooks: it keeps no previous stack. */
uint32_t hh_stack_capture_outside(int depth, uintptr_t lo, uintptr_t hi);

/* Fork: prepare takes the insertion lock, parent releases it, child releases it and starts a
 * new epoch so that every node is sent again to the child's log. */
void hh_stacks_fork_prepare(void);
void hh_stacks_fork_parent(void);
void hh_stacks_fork_child(void);
/* A new log in the same process (attach after detach): every stack is declared again. */
void hh_stacks_new_log(void);

#endif /* HH_STACKS_H */
