/*
 * slow_free: preloaded under `hh_test_attach <lib> <dir> inflight`. Its free() releases the block
 * named by hh_slow_free_target only after 300 ms (and says so in hh_slow_free_entered), so that
 * a call is provably inside the tracer's hook — its record reserved, not yet published — while
 * another thread detaches. Every other block goes straight to glibc.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

extern void __libc_free(void *);

__attribute__((visibility("default"))) void *_Atomic hh_slow_free_target;
__attribute__((visibility("default"))) atomic_int hh_slow_free_entered;

__attribute__((visibility("default"))) void free(void *p) {
    if (p != NULL && p == atomic_load(&hh_slow_free_target)) {
        atomic_store(&hh_slow_free_entered, 1);
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    __libc_free(p);
}
