/*
 * setid.c — changes of credentials with the keeper thread out of the way.
 *
 * glibc makes setuid and its family process-wide by running the system call in every thread
 * (SIGSETXID), and aborts the process when one thread's call fails where another's succeeded.
 * Capabilities are per-thread: a program such as setpriv keeps CAP_SETGID in its own thread
 * only (PR_SET_KEEPCAPS + capset) across a setresuid, so the keeper thread's setresgid then
 * fails and glibc aborts. So each of these calls ends the keeper thread first, makes the call
 * with the program's threads alone, and starts the keeper again.
 */
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <sys/types.h>
#include <unistd.h>

#include "client.h"

#define HH_EXPORT __attribute__((visibility("default")))

#define HH_SETID_CALL(type, name, params, args)                 \
    HH_EXPORT int name params {                                 \
        static type real;                                       \
        if (real == NULL) real = (type)dlsym(RTLD_NEXT, #name); \
        if (real == NULL) {                                     \
            errno = ENOSYS;                                     \
            return -1;                                          \
        }                                                       \
        hh_agent_keeper_pause();                                \
        int result = real args;                                 \
        int saved = errno;                                      \
        hh_agent_keeper_resume();                               \
        errno = saved;                                          \
        return result;                                          \
    }

typedef int (*hh_id1_fn)(uid_t);
typedef int (*hh_gid1_fn)(gid_t);
typedef int (*hh_id2_fn)(uid_t, uid_t);
typedef int (*hh_gid2_fn)(gid_t, gid_t);
typedef int (*hh_id3_fn)(uid_t, uid_t, uid_t);
typedef int (*hh_gid3_fn)(gid_t, gid_t, gid_t);
typedef int (*hh_groups_fn)(size_t, const gid_t *);

HH_SETID_CALL(hh_id1_fn, setuid, (uid_t u), (u))
HH_SETID_CALL(hh_id1_fn, seteuid, (uid_t u), (u))
HH_SETID_CALL(hh_gid1_fn, setgid, (gid_t g), (g))
HH_SETID_CALL(hh_gid1_fn, setegid, (gid_t g), (g))
HH_SETID_CALL(hh_id2_fn, setreuid, (uid_t r, uid_t e), (r, e))
HH_SETID_CALL(hh_gid2_fn, setregid, (gid_t r, gid_t e), (r, e))
HH_SETID_CALL(hh_id3_fn, setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
HH_SETID_CALL(hh_gid3_fn, setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
HH_SETID_CALL(hh_groups_fn, setgroups, (size_t n, const gid_t *list), (n, list))
