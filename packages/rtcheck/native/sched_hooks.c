/*
 * sched_hooks.c — the calls that change a thread's scheduling policy. The real-time state is
 * updated from their arguments when they succeed, so no hook ever asks the kernel: the
 * policy is known without a system call per malloc.
 *
 *   sched_setscheduler(pid, ...)   pid 0 or a tid of this process
 *   sched_setattr(pid, attr, ...)  glibc 2.41's wrapper, and syscall(SYS_sched_setattr, ...)
 *   pthread_setschedparam(thread, policy, param), pthread_setschedprio(thread, prio)
 * (pthread_create with attributes: hh_rt_thread_start reads the policy the thread got.)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "next.h"
#include "sys.h"

/* The reset-on-fork flag may be or'ed into a policy. */
#define HH_POLICY_MASK (~SCHED_RESET_ON_FORK)

HH_EXPORT int sched_setscheduler(pid_t pid, int policy, const struct sched_param *param) {
    if (hh_next.sched_setscheduler == NULL) hh_rt_next_resolve();
    int rc = hh_next.sched_setscheduler(pid, policy, param);
    if (rc == 0) hh_rt_policy_changed(pid, policy & HH_POLICY_MASK, param->sched_priority, false);
    return rc;
}

/* struct sched_attr's first fields (linux/sched/types.h): enough to read the policy. */
typedef struct hh_sched_attr_head {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
} hh_sched_attr_head;

static void hh_setattr_done(pid_t pid, const void *attr) {
    const hh_sched_attr_head *a = attr;
    hh_rt_policy_changed(pid, (int)a->sched_policy, (int)a->sched_priority, false);
}

HH_EXPORT int sched_setattr(pid_t pid, void *attr, unsigned flags) {
    if (hh_next.sched_setattr == NULL) hh_rt_next_resolve();
    int rc;
    if (hh_next.sched_setattr != NULL) {
        rc = hh_next.sched_setattr(pid, attr, flags);
    } else {
        long raw = HEAPHOOK_OS_UNOBSERVED(SYS_sched_setattr, pid, attr, flags, 0, 0, 0);
        rc = raw < 0 ? (errno = (int)-raw, -1) : (int)raw;
    }
    if (rc == 0) hh_setattr_done(pid, attr);
    return rc;
}

HH_EXPORT int pthread_setschedparam(pthread_t thread, int policy, const struct sched_param *param) {
    if (hh_next.pthread_setschedparam == NULL) hh_rt_next_resolve();
    int rc = hh_next.pthread_setschedparam(thread, policy, param);
    if (rc == 0) {
        hh_rt_policy_changed_handle((unsigned long)thread, policy & HH_POLICY_MASK,
                                    param->sched_priority, false);
    }
    return rc;
}

HH_EXPORT int pthread_setschedprio(pthread_t thread, int priority) {
    if (hh_next.pthread_setschedprio == NULL) hh_rt_next_resolve();
    int rc = hh_next.pthread_setschedprio(thread, priority);
    if (rc == 0) hh_rt_policy_changed_handle((unsigned long)thread, 0, priority, true);
    return rc;
}

/* syscall(2): a program on a glibc without sched_setattr calls it this way. Every system
 * call takes six register arguments, so passing six on is exact. */
HH_EXPORT long syscall(long number, ...) {
    va_list ap;
    va_start(ap, number);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (hh_next.syscall == NULL) hh_rt_next_resolve();
    long rc;
    if (HH_LIKELY(hh_next.syscall != NULL)) {
        rc = hh_next.syscall(number, a, b, c, d, e, f);
    } else { /* a call from inside our own resolution (another library's hook): straight on */
        rc = heaphook_os_unobserved_libc(HEAPHOOK_OS_UNOBSERVED(number, a, b, c, d, e, f));
    }
    if (rc == 0 && number == SYS_sched_setattr) hh_setattr_done((pid_t)a, (const void *)b);
    if (rc == 0 && number == SYS_sched_setscheduler) {
        const struct sched_param *param = (const struct sched_param *)c;
        hh_rt_policy_changed((pid_t)a, (int)b & HH_POLICY_MASK, param->sched_priority, false);
    }
    return rc;
}
