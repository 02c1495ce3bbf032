/*
 * fork_once.c — heaphook_fork_register_once (heaphook/fork.h): the one pthread_atfork call of
 * every library's fork module. In heaphook::support, which every library links, so the
 * function is there whether or not the core's interposition is (heaptrack, agent, rtcheck and
 * ucm-hooks do not link it).
 */
#include "heaphook/fork.h"

#include <pthread.h>

int heaphook_fork_register_once(heaphook_fork_once *once, void (*prepare)(void),
                                void (*parent)(void), void (*child)(void)) {
    if (__atomic_exchange_n(&once->claimed, 1, __ATOMIC_ACQ_REL) != 0) return 0;
    return pthread_atfork(prepare, parent, child);
}
