/*
 * rcu.c — the handler chain's readers and writers: the reader slots and their slow paths, the
 * grace period (membarrier), the publication of a new table, and the fork handlers of the scheme.
 * The contract is in rcu.h; the argument, and why it suffices, in docs/readers-and-writers.md.
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "heaphook/os.h"
#include "rcu.h"
#include "ucm_internal.h"

#define UCM_KEY_INLINE 32 /* glibc's PTHREAD_KEY_2NDLEVEL_SIZE: keys that never allocate */
#define UCM_RETRY_CLAIM 4096

/* The registered handlers, in priority order (ascending; equal priorities in registration
 * order). Only the writer (ucm_writer_lock held) reads or changes them. */
struct ucm_handler {
    int events;
    int priority;
    heaphook_ucm_event_callback_t callback;
    void *arg;
};
static struct ucm_handler ucm_handlers[UCM_MAX_HANDLERS];
static int ucm_handler_count;

static struct ucm_reader ucm_readers[UCM_READERS];
struct ucm_reader ucm_no_reader;

struct ucm_fallback_counter ucm_fallback[2];
static _Atomic int ucm_fallback_epoch;

static struct ucm_table ucm_tables[2];
const struct ucm_table *_Atomic ucm_current = &ucm_tables[0];
_Atomic int ucm_active_events;
_Atomic int ucm_before_events;
_Atomic int ucm_after_events;
_Atomic int ucm_reader_fence = 1;
static pthread_mutex_t ucm_writer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t ucm_reader_key;
static bool ucm_reader_key_usable;

__thread struct ucm_thread ucm_self __attribute__((tls_model("initial-exec")));

static void ucm_reader_release(void *slot) {
    struct ucm_reader *r = slot;
    if (ucm_self.reader == r) ucm_self.reader = NULL;
    unsigned long seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
    if (seq & 1) atomic_store_explicit(&r->seq, seq + 1, memory_order_release); /* died inside */
    atomic_store_explicit(&r->owner, 0, memory_order_release);
}

static bool ucm_thread_dead(long pid, int tid) {
    return HEAPHOOK_OS_UNOBSERVED(SYS_tgkill, pid, tid, 0, 0, 0, 0) == -ESRCH;
}

static bool ucm_take(struct ucm_reader *r, int expected, int tid) {
    if (!atomic_compare_exchange_strong(&r->owner, &expected, tid)) return false;
    unsigned long seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
    if (seq & 1) atomic_store_explicit(&r->seq, seq + 1, memory_order_release);
    return true;
}

/* A slot for this thread, or &ucm_no_reader. No allocation, no lock. */
static __attribute__((noinline)) void ucm_claim(struct ucm_thread *self) {
    if (self->err == NULL) self->err = __errno_location();
    int tid = (int)HEAPHOOK_OS_UNOBSERVED(SYS_gettid, 0, 0, 0, 0, 0, 0);
    struct ucm_reader *got = NULL;
    for (int i = 0; i < UCM_READERS && got == NULL; ++i) {
        struct ucm_reader *r = &ucm_readers[i];
        if (atomic_load_explicit(&r->owner, memory_order_relaxed) == 0 && ucm_take(r, 0, tid))
            got = r;
    }
    long pid = got == NULL ? HEAPHOOK_OS_UNOBSERVED(SYS_getpid, 0, 0, 0, 0, 0, 0) : 0;
    for (int i = 0; i < UCM_READERS && got == NULL; ++i) {
        struct ucm_reader *r = &ucm_readers[i];
        int owner = atomic_load_explicit(&r->owner, memory_order_relaxed);
        if (owner != 0 && owner != tid && ucm_thread_dead(pid, owner) && ucm_take(r, owner, tid))
            got = r;
    }
    if (got == NULL) {
        ucm_log_debug("all %d reader slots taken: thread %d uses the shared counters", UCM_READERS,
                      tid);
        self->reader = &ucm_no_reader;
        self->retry = UCM_RETRY_CLAIM;
        return;
    }
    if (ucm_reader_key_usable) pthread_setspecific(ucm_reader_key, got);
    self->reader = got;
}

__attribute__((noinline)) const struct ucm_table *ucm_enter_slow(struct ucm_thread *self) {
    if (self->reader == NULL || (self->reader == &ucm_no_reader && --self->retry == 0)) {
        ucm_claim(self);
    }
    struct ucm_reader *r = self->reader;
    if (r != &ucm_no_reader) {
        unsigned long seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
        atomic_store_explicit(&r->seq, seq + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
    } else {
        int epoch = atomic_load(&ucm_fallback_epoch);
        atomic_fetch_add(&ucm_fallback[epoch].count, 1);
        self->fallback_epoch = epoch;
        self->fallback_inside = 1;
        return atomic_load(&ucm_current); /* after the increment in the single total order */
    }
    return atomic_load_explicit(&ucm_current, memory_order_acquire);
}

static void ucm_backoff(unsigned spins);
static const struct ucm_table ucm_empty_table; /* what the forking thread dispatches from */

/* ucm_current is NULL while another thread forks (see ucm_readers_prefork): leave, wait for the
 * fork to finish, enter again. The forking thread itself (a heaphook backend's fork handler
 * that maps, say) dispatches nothing instead, and never waits. */
__attribute__((noinline, cold)) const struct ucm_table *ucm_enter_blocked(struct ucm_thread *self) {
    if (self->forking) return &ucm_empty_table; /* still inside: ucm_leave balances it */
    for (;;) {
        ucm_leave(self);
        for (unsigned spins = 0; atomic_load_explicit(&ucm_current, memory_order_relaxed) == NULL;
             ++spins) {
            ucm_backoff(spins);
        }
        const struct ucm_table *t = ucm_enter_raw(self);
        if (t != NULL) return t;
    }
}

/* Writer side: a full barrier on every running thread of the process (see above). */
static int ucm_barrier_mode; /* 0 not set up, 1 membarrier, 2 fences only */

static long ucm_membarrier(int cmd) {
    return HEAPHOOK_OS_UNOBSERVED(SYS_membarrier, cmd, 0, 0, 0, 0, 0);
}

static void ucm_barrier_setup(void) {
    if (ucm_barrier_mode != 0) return;
    long cmds = ucm_membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        ucm_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
        ucm_barrier_mode = 1;
        atomic_store(&ucm_reader_fence, 0);
    } else {
        ucm_barrier_mode = 2;
        ucm_log_debug("membarrier unavailable: readers use a fence");
    }
}

static void ucm_barrier(void) {
    atomic_thread_fence(memory_order_seq_cst);
    if (ucm_barrier_mode != 1) return;
    if (ucm_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    /* Registered, so this does not happen; if it does (registration lost), register again, or
     * take the slow global barrier. */
    if (ucm_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        ucm_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        return;
    }
    if (ucm_membarrier(MEMBARRIER_CMD_GLOBAL) != 0) {
        ucm_log_error("membarrier failed: a removed handler may still be running");
    }
}

static void ucm_backoff(unsigned spins) {
    if (spins < 64) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ volatile("yield");
#endif
    } else if (spins < 1024) {
        sched_yield();
    } else {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* Waits until no reader can still use the table that was current before the last publication.
 * Writer lock held. */
static void ucm_synchronize(void) {
    ucm_barrier();
    struct ucm_reader *own = ucm_self.reader;
    for (int i = 0; i < UCM_READERS; ++i) {
        struct ucm_reader *r = &ucm_readers[i];
        if (r == own) continue; /* a handler calling us: it cannot be waited for */
        unsigned long seq = atomic_load_explicit(&r->seq, memory_order_acquire);
        if (!(seq & 1)) continue;
        for (unsigned spins = 0; atomic_load_explicit(&r->seq, memory_order_acquire) == seq;
             ++spins) {
            if (spins % 4096 == 4095) {
                int owner = atomic_load_explicit(&r->owner, memory_order_relaxed);
                if (owner == 0 ||
                    ucm_thread_dead(HEAPHOOK_OS_UNOBSERVED(SYS_getpid, 0, 0, 0, 0, 0, 0), owner))
                    break;
            }
            ucm_backoff(spins);
        }
    }
    bool own_fallback = own == &ucm_no_reader && ucm_self.fallback_inside;
    for (int round = 0; round < 2; ++round) {
        int epoch = atomic_load(&ucm_fallback_epoch);
        atomic_store(&ucm_fallback_epoch, !epoch);
        long own_count = own_fallback && ucm_self.fallback_epoch == epoch ? 1 : 0;
        for (unsigned spins = 0; atomic_load(&ucm_fallback[epoch].count) > own_count; ++spins) {
            ucm_backoff(spins);
        }
    }
}

/* Rebuilds the readers' table from ucm_handlers, publishes it and waits out the readers of
 * the previous one. Writer lock held. */
static void ucm_publish(void) {
    const struct ucm_table *old = atomic_load_explicit(&ucm_current, memory_order_relaxed);
    struct ucm_table *next = old == &ucm_tables[0] ? &ucm_tables[1] : &ucm_tables[0];
    int all = 0;
    for (int k = 0; k < UCM_KINDS; ++k) {
        struct ucm_list *list = &next->lists[k];
        int event = ucm_kind_event(k);
        list->count = list->before = 0;
        for (int i = 0; i < ucm_handler_count; ++i) {
            const struct ucm_handler *h = &ucm_handlers[i];
            if (!(h->events & event)) continue;
            list->entries[list->count++] = (struct ucm_entry){h->callback, h->arg};
            if (h->priority < 0) list->before = list->count;
        }
    }
    int before = 0, after = 0;
    for (int i = 0; i < ucm_handler_count; ++i) {
        all |= ucm_handlers[i].events;
        if (ucm_handlers[i].priority < 0) {
            before |= ucm_handlers[i].events;
        } else {
            after |= ucm_handlers[i].events;
        }
    }
    atomic_store(&ucm_current, next);
    atomic_store(&ucm_before_events, before);
    atomic_store(&ucm_after_events, after);
    atomic_store(&ucm_active_events, all);
    ucm_synchronize();
}

/* Fork: no writer halfway through, and no other thread inside a handler (a handler's own locks,
 * held by a thread the child does not have, would stay locked there): ucm_current is set to NULL,
 * which makes new readers wait in ucm_enter_blocked, and the readers inside are waited out. */
static const struct ucm_table *ucm_fork_saved;
void ucm_readers_prefork(void) {
    pthread_mutex_lock(&ucm_writer_lock);
    ucm_self.forking = 1;
    ucm_fork_saved = atomic_load(&ucm_current);
    atomic_store(&ucm_current, NULL);
    ucm_synchronize();
}
void ucm_readers_postfork_parent(void) {
    atomic_store(&ucm_current, ucm_fork_saved);
    ucm_self.forking = 0;
    pthread_mutex_unlock(&ucm_writer_lock);
}
void ucm_readers_postfork_child(void) {
    pthread_mutex_init(&ucm_writer_lock, NULL);
    atomic_store(&ucm_current, ucm_fork_saved);
    ucm_self.forking = 0;
    struct ucm_thread *self = &ucm_self;
    for (int i = 0; i < UCM_READERS; ++i) {
        struct ucm_reader *r = &ucm_readers[i];
        if (r == self->reader) {
            atomic_store(&r->owner, (int)HEAPHOOK_OS_UNOBSERVED(SYS_gettid, 0, 0, 0, 0, 0, 0));
        } else {
            atomic_store(&r->seq, 0);
            atomic_store(&r->owner, 0);
        }
    }
    atomic_store(&ucm_fallback[0].count, 0);
    atomic_store(&ucm_fallback[1].count, 0);
    if (self->reader == &ucm_no_reader && self->fallback_inside) {
        atomic_store(&ucm_fallback[self->fallback_epoch].count, 1);
    }
}

/* ---- The writers' side ------------------------------------------------------------------------
 */

void ucm_readers_init(void) {
    ucm_reader_key_usable = pthread_key_create(&ucm_reader_key, ucm_reader_release) == 0 &&
                            ucm_reader_key < UCM_KEY_INLINE;
}

heaphook_ucm_status_t ucm_handlers_add(int events, int priority,
                                       heaphook_ucm_event_callback_t callback, void *arg) {
    pthread_mutex_lock(&ucm_writer_lock);
    if (ucm_handler_count == UCM_MAX_HANDLERS) {
        pthread_mutex_unlock(&ucm_writer_lock);
        return HEAPHOOK_UCM_ERR_NO_MEMORY;
    }
    ucm_barrier_setup();
    int at = ucm_handler_count;
    while (at > 0 && ucm_handlers[at - 1].priority > priority) {
        ucm_handlers[at] = ucm_handlers[at - 1];
        --at;
    }
    ucm_handlers[at] = (struct ucm_handler){
        .events = events, .priority = priority, .callback = callback, .arg = arg};
    ++ucm_handler_count;
    ucm_publish();
    pthread_mutex_unlock(&ucm_writer_lock);
    return HEAPHOOK_UCM_OK;
}

void ucm_handlers_remove(int events, heaphook_ucm_event_callback_t callback, void *arg) {
    pthread_mutex_lock(&ucm_writer_lock);
    int kept = 0;
    for (int i = 0; i < ucm_handler_count; ++i) {
        struct ucm_handler h = ucm_handlers[i];
        if (h.callback == callback && h.arg == arg) h.events &= ~events;
        if (h.events != 0) ucm_handlers[kept++] = h;
    }
    ucm_handler_count = kept;
    ucm_barrier_setup();
    ucm_publish();
    pthread_mutex_unlock(&ucm_writer_lock);
}

int ucm_handlers_count(void) {
    pthread_mutex_lock(&ucm_writer_lock);
    int count = ucm_handler_count;
    pthread_mutex_unlock(&ucm_writer_lock);
    return count;
}
