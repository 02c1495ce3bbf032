/*
 * fork.h — the library's fork module (fork.c): its only pthread_atfork.
 */
#ifndef HH_FORK_H
#define HH_FORK_H

#include "heaphook/lockrank.h"

/* Registers the handlers (once; from the library constructor, before any fork and before the
 * first GOT patch). */
void hh_fork_register(void);

/* fork.c's lock order as ranks (heaphook/lockrank.h), checked at every acquisition in a debug
 * build (-DHEAPHOOK_DEBUG=ON). 1 and 2 are the core's ranks (HEAPHOOK_LOCK_RANK_ATTACH for
 * attach.c's lock, HEAPHOOK_LOCK_RANK_RELOC for the GOT patcher's); 3-6 are the tracer's own.
 * A leak table shard's rank is HH_RANK_LEAK_SHARD + its index: a check takes them all in
 * ascending order, a hook one at a time. */
#define HH_RANK_LEAK_CHECK (HEAPHOOK_LOCK_RANK_LIBRARY + 100u)  /* 3, leaks/mark.c */
#define HH_RANK_STACK_TRIE (HEAPHOOK_LOCK_RANK_LIBRARY + 200u)  /* 4, stacks.c */
#define HH_RANK_LEAK_CURSOR (HEAPHOOK_LOCK_RANK_LIBRARY + 300u) /* 5, tracer.c */
#define HH_RANK_LEAK_SHARD (HEAPHOOK_LOCK_RANK_LIBRARY + 400u)  /* 6, leaks/table.c */

#endif /* HH_FORK_H */
