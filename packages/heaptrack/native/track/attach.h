/*
 * attach.h — what installing the tracer into a running process (attach.c) needs from the
 * hooks (hooks.c) and from the tracer's life cycle (tracer.c).
 */
#ifndef HH_ATTACH_H
#define HH_ATTACH_H

#include <stdbool.h>

/* The allocation family the tracer hooks, by the name GOTs refer to them. */
#define HH_HOOK_COUNT 11
typedef struct hh_hook {
    const char *name;
    void *function;
} hh_hook;
extern const hh_hook hh_hooks[HH_HOOK_COUNT];

/* True when this library's malloc is the process's (preloaded, or linked before the C library);
 * false when it was dlopen'ed: then it traces nothing until heaphook_heaptrack_attach. */
bool hh_hooks_interposed(void);

/* The hooks forward to these (in the order of hh_hooks) instead of dlsym(RTLD_NEXT) results:
 * the functions the GOTs led to before the patch. Call before the first patch is written. */
void hh_hooks_forward_to(void *const originals[HH_HOOK_COUNT]);

/* attach.c: the attach lock across fork (fork.c). */
void hh_attach_prefork(void);
void hh_attach_postfork_parent(void);
void hh_attach_postfork_child(void);

/* tracer.c: with collector NULL or "", starts a standalone log and its drain thread: where is
 * an existing folder (the log is heaplog.<pid>[.n].log there), else the log file's path; NULL:
 * HEAPHOOK_LOG_DIR or the working directory. After a finish, a new log (stacks and modules
 * declared again) through the same ring. With a collector's socket (HEAPHOOK_COLLECTOR's
 * form, "@name" for an abstract one), connects to it instead and gets a ring from it (no drain
 * thread: the collector writes the log). false with errno set when the log cannot be created
 * or the collector reached. */
bool hh_tracer_attach_start(const char *where, const char *collector);
/* tracer.c: stops recording, waits (at most a second without progress) for the records of
 * calls that were inside a hook; standalone, drains the ring, stops the drain thread, writes
 * END (reason detach) and closes the log; with a collector, tells it "detach" and closes the
 * connection (the collector writes END, reason detach). Threads still inside a hook finish
 * their call; what they reserve after that is not in the log. */
void hh_tracer_attach_finish(void);
/* tracer.c: attached with a collector and still recording: the connection to it (the watch in
 * attach.c polls it for the collector's hangup); else -1. */
int hh_tracer_collector_socket(void);
/* tracer.c: the collector hung up (killed, or ended because heaphook record is gone): recording
 * stops for good, said once on stderr with the events lost (as when a send fails). */
void hh_tracer_collector_hung_up(void);
/* tracer.c: the path of the log being written, or of the last one. */
const char *hh_tracer_log_path(void);
/* tracer.c: the library was loaded without being interposed: wait for an attach. */
void hh_tracer_wait_for_attach(void);

#endif /* HH_ATTACH_H */
