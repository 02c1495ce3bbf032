/*
 * fork.h — the library's fork module (fork.c): its only pthread_atfork.
 */
#ifndef HH_FORK_H
#define HH_FORK_H

/* Registers the handlers (once; from the library constructor, before any fork and before the
 * first GOT patch). */
void hh_fork_register(void);

#endif /* HH_FORK_H */
