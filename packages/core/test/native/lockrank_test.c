/*
 * lockrank_test.c — the debug build's lock-order check (heaphook/lockrank.h) on a real lock.
 *
 * Built with HEAPHOOK_DEBUG from the support and GOT patcher sources (CMakeLists.txt), so the
 * patcher's lock is checked as in a debug build of a library. The other lock stands for an
 * attach lock: it carries HEAPHOOK_LOCK_RANK_ATTACH, which comes before the patcher's lock in
 * the fork modules' order.
 *
 *   lockrank_test in-order      attach lock, then the patcher's lock: prints "in order: ok"
 *   lockrank_test out-of-order  the patcher's lock, then the attach lock: the check stops the
 *                               program (abort) with one line naming both
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "heaphook/lockrank.h"
#include "heaphook/reloc.h"

#ifndef HEAPHOOK_DEBUG
#error "lockrank_test checks the debug build: compile it with HEAPHOOK_DEBUG"
#endif

#define ATTACH_NAME "the attach lock (lockrank_test.c)"

static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static void attach_lock_take(void) {
    HEAPHOOK_LOCK_RANK_ACQUIRE(HEAPHOOK_LOCK_RANK_ATTACH, ATTACH_NAME);
    pthread_mutex_lock(&attach_lock);
}

static void attach_lock_give(void) {
    pthread_mutex_unlock(&attach_lock);
    HEAPHOOK_LOCK_RANK_RELEASE(HEAPHOOK_LOCK_RANK_ATTACH);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "in-order") == 0) {
        attach_lock_take();
        heaphook_reloc_prefork(); /* the patcher's own lock, through its fork handler */
        heaphook_reloc_postfork_parent();
        attach_lock_give();
        /* Released in any order, and taken again afterwards. */
        attach_lock_take();
        heaphook_reloc_prefork();
        attach_lock_give();
        heaphook_reloc_postfork_parent();
        printf("in order: ok\n");
        return 0;
    }
    if (strcmp(mode, "out-of-order") == 0) {
        heaphook_reloc_prefork();
        attach_lock_take(); /* stops here */
        printf("out of order: not caught\n");
        return 1;
    }
    fprintf(stderr, "usage: lockrank_test in-order | out-of-order\n");
    return 2;
}
