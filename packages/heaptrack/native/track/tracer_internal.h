/*
 * tracer_internal.h — the tracer's state shared by tracer.c (start-up, ring access, the drain
 * thread, fork, exit, attach) and transport.c (setting up the standalone or collector
 * transport). Not for the rest of track/: they call tracer.h.
 */
#ifndef HH_TRACER_INTERNAL_H
#define HH_TRACER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ring.h"
#include "writer.h"

extern hh_ring g_ring;
extern int g_notify_fd;         /* standalone: the drain's socket pair; collector: the socket */
extern bool g_write_error_said; /* standalone: a failed write of the log was said (drain lock) */
extern const char *g_collector; /* the collector's socket (HEAPHOOK_COLLECTOR), or NULL */
extern char g_log_dir[4096];
extern bool g_fork_child;
extern int g_drain_rd;      /* standalone: the drain's end of the socket pair */
extern hh_writer *g_writer; /* standalone: the log's writer */
extern char g_log_path[4096];
extern char g_attach_file[4096]; /* attach's log file, when given */
extern pid_t g_ring_pid;         /* the process that created the standalone ring */

/* tracer.c: wakes the drain or the collector (a ring's wake callback). */
void hh_wake(void *arg);

/* transport.c: the text of an errno for the one-line errors. */
const char *hh_error_text(int error);
/* transport.c: sets the standalone transport up (ring, socket pair, log) or the collector's
 * (handshake, its ring); 0, or -1 with the reason said. */
int hh_setup_standalone(void);
int hh_setup_collector(void);

#endif
