/*
 * heaphook/ucm_watch.h — streaming a process's memory events to a watcher over a Unix socket
 * (`heaphook watch`), and the wire format of that stream.
 *
 * Two ways in, the same stream:
 * - Loaded with HEAPHOOK_MEM_WATCH_SOCKET=<path> in the environment (preloaded, or dlopen'ed):
 *   the library connects from its constructor and streams until the process exits. Children
 *   that exec inherit the variable and connect on their own.
 * - heaphook_ucm_stream_start(path) in a running process (what `heaphook watch -p PID` makes
 *   the target call through the injector), heaphook_ucm_stream_stop(...) or the watcher's
 *   half-close of the connection to end it.
 *
 * The conversation, all little-endian as the machine is (watcher and target share one host):
 *   target  -> watcher  struct heaphook_ucm_watch_hello
 *   watcher -> target   struct heaphook_ucm_watch_config (which events, ring size)
 *   target  -> watcher  a STARTED record, then event records and DROPPED records
 *   watcher -> target   shutdown(SHUT_WR) (or nothing, and heaphook_ucm_stream_stop) to detach
 *   target  -> watcher  an END record, then the target closes the connection
 * A connection that ends without END: the target was killed or called _exit (events of its last
 * drain interval, 10 ms, are missing).
 */
#ifndef HEAPHOOK_UCM_WATCH_H
#define HEAPHOOK_UCM_WATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEAPHOOK_UCM_WATCH_MAGIC "HHWATCH"     /* with its NUL: 8 bytes */
#define HEAPHOOK_UCM_WATCH_CONFIG_MAGIC "HHWC" /* 4 bytes, no NUL */
#define HEAPHOOK_UCM_WATCH_VERSION 1

/* The first bytes the target sends (64). */
struct heaphook_ucm_watch_hello {
    char magic[8];        /* HEAPHOOK_UCM_WATCH_MAGIC */
    uint32_t version;     /* HEAPHOOK_UCM_WATCH_VERSION */
    uint32_t hello_size;  /* sizeof (struct heaphook_ucm_watch_hello) */
    uint32_t record_size; /* sizeof (struct heaphook_ucm_watch_record) */
    uint32_t pid;
    uint64_t start_ns; /* CLOCK_MONOTONIC when the stream began; records' times are absolute */
    uint32_t origin;   /* HEAPHOOK_UCM_WATCH_ORIGIN_* */
    uint32_t reserved[7];
};
#define HEAPHOOK_UCM_WATCH_ORIGIN_ENV 1  /* HEAPHOOK_MEM_WATCH_SOCKET at load */
#define HEAPHOOK_UCM_WATCH_ORIGIN_CALL 2 /* heaphook_ucm_stream_start */

/* The watcher's answer (16 bytes). */
struct heaphook_ucm_watch_config {
    char magic[4];         /* HEAPHOOK_UCM_WATCH_CONFIG_MAGIC */
    uint32_t events;       /* HEAPHOOK_UCM_EVENT_* bits to record (native and VM events) */
    uint32_t ring_records; /* ring capacity: a power of two in [1024, 4194304]; 0: 65536 */
    uint32_t reserved;
};
#define HEAPHOOK_UCM_WATCH_RING_DEFAULT 65536u
#define HEAPHOOK_UCM_WATCH_RING_MIN 1024u
#define HEAPHOOK_UCM_WATCH_RING_MAX 4194304u

/*
 * One record (56 bytes). type is an event bit (HEAPHOOK_UCM_EVENT_*) or a control code below.
 * Events, recorded after the call (the native ones) with its result:
 *   MMAP     address = result (the hint when it failed), size = length,
 *            arg[0] = prot | (uint64_t)flags << 32, arg[1] = fd (as int64_t)
 *   MUNMAP   address, size = length
 *   MREMAP   address = result (the new address), size = new size,
 *            arg[0] = old address, arg[1] = old size
 *   SHMAT    address = result, arg[0] = shmid, arg[1] = shmflg
 *   SHMDT    address
 *   SBRK     address = result (the old break), size = increment (as int64_t)
 *   BRK      address = the requested break
 *   MADVISE  address, size = length, arg[0] = advice
 *   VM_MAPPED / VM_UNMAPPED  address, size (page-rounded)
 * error is the errno of a failed native call, else 0.
 */
struct heaphook_ucm_watch_record {
    uint32_t type;
    int32_t error;
    uint32_t tid;
    uint32_t reserved;
    uint64_t time_ns; /* CLOCK_MONOTONIC */
    uint64_t address;
    uint64_t size;
    uint64_t arg[2];
};

/* Control records (the other fields 0 unless said). */
/* address = the install status (heaphook_ucm_status_t, as int64_t), size = the install mode
 * (HEAPHOOK_UCM_WATCH_MODE_*), arg[0] = the events recorded, arg[1] = the ring's capacity.
 * A status other than OK is followed by END. */
#define HEAPHOOK_UCM_WATCH_STARTED 0x80000001u
/* size = events dropped since the previous DROPPED record (the ring was full). */
#define HEAPHOOK_UCM_WATCH_DROPPED 0x80000002u
/* address = events recorded, size = events dropped, arg[0] = why (HEAPHOOK_UCM_WATCH_END_*),
 * arg[1] = 1 when the hooks this stream installed were removed (GOT entries and code patches
 * restored; preloaded, the C library's patched entries), 0 when they stay (installed before
 * the stream, other handlers registered, or the process exits). */
#define HEAPHOOK_UCM_WATCH_END 0x80000003u

#define HEAPHOOK_UCM_WATCH_MODE_NONE 0
#define HEAPHOOK_UCM_WATCH_MODE_PRELOAD 1
#define HEAPHOOK_UCM_WATCH_MODE_RELOC 2
#define HEAPHOOK_UCM_WATCH_MODE_BISTRO 3

#define HEAPHOOK_UCM_WATCH_END_DETACH 1 /* the watcher half-closed, or stream_stop */
#define HEAPHOOK_UCM_WATCH_END_EXIT 2   /* the process is exiting (library destructor) */
#define HEAPHOOK_UCM_WATCH_END_FAILED 3 /* the events could not be installed */
#define HEAPHOOK_UCM_WATCH_END_IO 4     /* the connection failed (the watcher went away) */

/*
 * Starts streaming to the watcher listening at socket_path (a Unix stream socket). Connects
 * now; the handshake, the handler and the hooks' install happen on the library's own thread
 * ("heaphook-watch"), so the call never waits for another thread of the process (it may run on
 * a thread the injector hijacked while the others are stopped). Returns 0, -EBUSY while a
 * stream is active or still ending, -EINVAL for a NULL or too long path, -errno of
 * socket/connect, -EAGAIN when the thread cannot be created. The signature is the injector's.
 */
int heaphook_ucm_stream_start(const char *socket_path);

/*
 * Ends the stream: the thread unsets its handler, removes the hooks when it installed them and
 * no other handler remains (heaphook_ucm_uninstall), sends what is left and END, closes the
 * connection and exits. With argument "wait", returns once that is done (at most 10 s;
 * -ETIMEDOUT after); otherwise at once (the injector's case). 0, or -ESRCH when no stream is
 * active. The library stays loaded (it is linked -z nodelete: code may still be running in
 * a hook, and patched entries of other users may lead into it).
 */
int heaphook_ucm_stream_stop(const char *argument);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_UCM_WATCH_H */
