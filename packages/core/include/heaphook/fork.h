/*
 * heaphook/fork.h — the one way a library registers its fork handlers.
 *
 * Every library built on the core has one fork module (the core's native/fork.c, heaptrack's
 * native/track/fork.c, ucm-hooks', agent's and rtcheck's fork.c): three handlers that take,
 * release and re-initialise every lock of the library in the order that module writes down
 * (and heaphook/lockrank.h checks in a debug build). The module registers them through
 * heaphook_fork_register_once, from the library constructor or its init-once path, before the
 * first lock a fork must not copy is taken (and, when it links the GOT patcher, after
 * heaphook_reloc_fork_by_caller and before the first patch: heaphook/reloc.h).
 */
#ifndef HEAPHOOK_FORK_H
#define HEAPHOOK_FORK_H

#ifdef __cplusplus
extern "C" {
#endif

/* A fork module's registration state: one per module, static, HEAPHOOK_FORK_ONCE_INIT. */
typedef struct heaphook_fork_once {
    int claimed; /* read and written atomically by heaphook_fork_register_once only */
} heaphook_fork_once;
#define HEAPHOOK_FORK_ONCE_INIT \
    { 0 }

/* Registers prepare, parent and child (any may be NULL: glibc skips a NULL handler) with
 * pthread_atfork exactly once per once, however many threads call it and however often.
 * The first call claims once with an atomic exchange and makes the one pthread_atfork call;
 * every later call, or one that finds the first still under way on another thread, returns
 * at once without waiting (so a fork made in the middle cannot leave a child waiting for a
 * registration that never ends). Returns 0, or pthread_atfork's error number (ENOMEM) to the
 * call that made it; the registration is not tried again, and the module decides what a
 * failure means (stop the program with heaphook_fatal, or log it and run on).
 *
 * What it may touch: no lock of ours, no stdio, no logging, and no allocation of its own.
 * glibc keeps a process's first 48 handler triples in static storage (2.34 and later) and
 * calls malloc only beyond them, so the call is safe wherever malloc is (a constructor, an
 * init-once path), not from inside a hook. pthread_atfork takes glibc's handler-list lock,
 * which a fork holds while it runs the handlers: never call it from a fork handler. */
int heaphook_fork_register_once(heaphook_fork_once *once, void (*prepare)(void),
                                void (*parent)(void), void (*child)(void));

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_FORK_H */
