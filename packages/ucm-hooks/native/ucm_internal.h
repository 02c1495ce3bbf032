/* ucm_internal.h — what the library's files share with each other (not exported). */
#ifndef HEAPHOOK_UCM_INTERNAL_H
#define HEAPHOOK_UCM_INTERNAL_H

#include <stddef.h>

#include "heaphook/log.h"
#include "heaphook/os.h"

#define UCM_HIDDEN __attribute__((visibility("hidden")))
#define UCM_LIKELY(x) __builtin_expect(!!(x), 1)
#define UCM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define UCM_INLINE static inline __attribute__((always_inline))

/* ---- Logging: the core's logger (heaphook/log.h) on ucm-hooks' own channel ----------------
 * Lines "heaphook-ucm[<pid>] <level>: ..." on the core's report fd (HEAPHOOK_LOG_FILE applies),
 * at the level of HEAPHOOK_MEM_LOG_LEVEL (libucm's UCX_MEM_LOG_LEVEL), read in ucm_init_once.
 * Safe inside hooks: no allocation, no stdio. */
extern UCM_HIDDEN heaphook_log_channel ucm_log_channel;
#define ucm_log_error(...) heaphook_log_to(&ucm_log_channel, HEAPHOOK_LOG_ERROR, __VA_ARGS__)
#define ucm_log_warn(...) heaphook_log_to(&ucm_log_channel, HEAPHOOK_LOG_WARN, __VA_ARGS__)
#define ucm_log_info(...) heaphook_log_to(&ucm_log_channel, HEAPHOOK_LOG_INFO, __VA_ARGS__)
#define ucm_log_debug(...) heaphook_log_to(&ucm_log_channel, HEAPHOOK_LOG_DEBUG, __VA_ARGS__)

/* ---- Attached segments (native/shm.c) ------------------------------------------------------ */

/* Records (address, size) of a segment shmat attached, replacing a stale entry there. */
UCM_HIDDEN void ucm_shm_remember(const void *address, size_t size);
/* Removes the entry of address; returns its size, or 0 when absent. */
UCM_HIDDEN size_t ucm_shm_forget(const void *address);
/* The size of the mapping starting at address, from /proc/self/maps (no allocation); 0 when
 * there is none. */
UCM_HIDDEN size_t ucm_mapping_size(const void *address);

/* ---- Fork (native/fork.c: the lock order) --------------------------------------------------
 * ucm_fork_register() installs the library's only pthread_atfork, once; it calls the handlers
 * below in the order written in fork.c. */
UCM_HIDDEN void ucm_fork_register(void);

/* 1. the install lock (ucm.c) */
UCM_HIDDEN void ucm_install_prefork(void);
UCM_HIDDEN void ucm_install_postfork_parent(void);
UCM_HIDDEN void ucm_install_postfork_child(void);
/* 2. the stream's lock (stream.c) */
UCM_HIDDEN void ucm_watch_prefork(void);
UCM_HIDDEN void ucm_watch_postfork_parent(void);
UCM_HIDDEN void ucm_watch_postfork_child(void);
/* 4. the writers' lock and the readers (ucm.c, "Readers and writers") */
UCM_HIDDEN void ucm_readers_prefork(void);
UCM_HIDDEN void ucm_readers_postfork_parent(void);
UCM_HIDDEN void ucm_readers_postfork_child(void);

#endif /* HEAPHOOK_UCM_INTERNAL_H */
