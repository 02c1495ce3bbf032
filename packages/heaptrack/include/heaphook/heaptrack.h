/*
 * heaphook/heaptrack.h — start and stop tracing in a process that is already running
 * (in-process, or from outside: `heaphook record -p PID` injects these calls with heaphook-inject).
 *
 *   void *lib = dlopen("libheaphook_heaptrack.so", RTLD_NOW | RTLD_LOCAL);
 *   int (*attach)(const char *) = (int (*)(const char *))dlsym(lib, "heaphook_heaptrack_attach");
 *   int (*detach)(void) = (int (*)(void))dlsym(lib, "heaphook_heaptrack_detach");
 *   attach("/tmp/traces");     // heaplog.<pid>.log there: every malloc & co. from now on
 *                              // (or attach("/tmp/traces/run1.log"): that file)
 *   ...
 *   detach();                  // the log is complete (END record): heaphook report reads it
 *
 * heaphook_heaptrack_attach opens a log (standalone mode, whatever HEAPHOOK_COLLECTOR says;
 * the other HEAPHOOK_* variables apply as for a preloaded tracer). log_path_or_dir: an existing
 * folder gets heaplog.<pid>.log (heaplog.<pid>.1.log ... when taken); anything else is the log
 * file's path (created or truncated; its folder must exist); NULL means HEAPHOOK_LOG_DIR, else
 * the working directory. It then redirects
 * malloc, free, calloc, realloc, reallocarray, posix_memalign, memalign, aligned_alloc, valloc,
 * pvalloc and malloc_usable_size of every loaded object, and of objects loaded later, to the
 * tracer by GOT patching (the core's heaphook/reloc.h). The tracer forwards every call to the
 * functions the GOTs led to before (glibc, or a preloaded heaphook backend), so blocks allocated
 * before the attach are freed normally: the log shows those frees as frees of unknown blocks.
 *
 * heaphook_heaptrack_attach_collector(socket) does the same but hands the log to a collector
 * instead of writing it: socket names a listening Unix socket in HEAPHOOK_COLLECTOR's form
 * ("@name" for an abstract one), served by `heaphook-heaptrack-collector --attach PID`. The
 * process connects, gets its ring buffer from the collector and starts no thread of its own;
 * the collector writes the log (where heaphook runs, with its permissions) and keeps what was
 * recorded if the process crashes. `heaphook record -p PID` calls it through heaphook-inject.
 * A fork child connects to the same collector and gets a log of its own.
 *
 * Either way the log's PROCESS record has the flag HH_PF_ATTACHED: a free of a block the log
 * never saw allocated is a block allocated before the attach (the report counts those apart,
 * "freed, allocated before attach", never as errors).
 *
 * heaphook_heaptrack_detach restores every GOT entry, stops recording and completes the log.
 * Standalone, it stops the drain thread it started; with a collector there is none. The process
 * is then left with no thread of the library, except the leak-check thread when the process's
 * own environment sets HEAPHOOK_LEAK_SIGNAL: it stays, with its signal handler, so that the
 * signal never falls back to its default action (termination). With a collector, detach says
 * "detach" and closes the connection, and the collector completes the log (END reason detach).
 * A call another thread was making at that moment still completes; its record is waited for
 * (up to a second without progress; one still unpublished then counts as dropped in the END
 * record). A later attach writes a new log (standalone: through the same ring buffer; with a
 * collector: through a new one, the old one unmapped when nothing is left unread in it). The
 * library must stay loaded and is never unloaded: a thread may still be inside one of its
 * functions, and a function pointer to a hook may have been taken while attached.
 *
 * Not traced: calls the C library makes internally without its PLT, calls through pointers to
 * malloc taken before the attach, allocators linked statically into a program.
 * A fork while attached: the child inherits the patched GOTs and starts a log of its own,
 * heaplog.<child pid>.log in the same folder, as a preloaded tracer's child does; it is
 * completed when the child exits (END reason exit; _exit or a crash loses its unwritten tail)
 * or detaches. A fork while another thread attaches or detaches does not deadlock the child
 * (the locks involved are taken around fork or reset in the child); the child is traced or not
 * depending on which side of the patch its parent's GOTs were.
 * Returns HEAPHOOK_HEAPTRACK_OK or one of the errors below.
 */
#ifndef HEAPHOOK_HEAPTRACK_H
#define HEAPHOOK_HEAPTRACK_H

#ifdef __cplusplus
extern "C" {
#endif

#define HEAPHOOK_HEAPTRACK_OK 0
#define HEAPHOOK_HEAPTRACK_ATTACHED 1     /* attach: already attached */
#define HEAPHOOK_HEAPTRACK_PRELOADED 2    /* attach: the tracer was preloaded: it traces already */
#define HEAPHOOK_HEAPTRACK_NOT_ATTACHED 3 /* detach: not attached */
#define HEAPHOOK_HEAPTRACK_NO_LOG 4       /* attach: the log could not be created (errno kept) */
#define HEAPHOOK_HEAPTRACK_PATCH_FAILED 5 /* attach: a GOT could not be written; none is */
#define HEAPHOOK_HEAPTRACK_NO_COLLECTOR 6 /* attach_collector: no collector there (errno kept) */

int heaphook_heaptrack_attach(const char *log_path_or_dir);
int heaphook_heaptrack_attach_collector(const char *collector_socket);
int heaphook_heaptrack_detach(void);
/* The log being written, or the last one written; "" before the first. */
const char *heaphook_heaptrack_log_path(void);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_HEAPTRACK_H */
