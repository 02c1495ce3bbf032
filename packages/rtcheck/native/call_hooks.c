/*
 * call_hooks.c — the calls other than allocation that a real-time thread must not make:
 * mapping memory (the ucm-hooks events: mmap, munmap, mremap, madvise, brk, sbrk), locks and
 * waits (pthread_mutex_lock contended or not, condition variables, semaphores: the futex
 * waits), sleeps, file and socket I/O (open, read, write, stdio, send, recv), and starting or
 * joining threads and processes — the Linux part of RTSan's list. Each is counted when the
 * thread is in a real-time context and passed on either way.
 *
 * glibc's own internal calls (printf's write, malloc's mmap) do not go through these symbols;
 * the outer call is the one counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "next.h"

/* A call under us that does not exist in this process: as the kernel would say. */
#define HH_NEXT_OR(fn, missing)                \
    do {                                       \
        if (HH_UNLIKELY(hh_next.fn == NULL)) { \
            hh_rt_next_resolve();              \
            if (hh_next.fn == NULL) {          \
                errno = ENOSYS;                \
                return missing;                \
            }                                  \
        }                                      \
    } while (0)

/* ---- Mapping memory ---------------------------------------------------------------------- */

HH_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    HH_NEXT_OR(mmap, MAP_FAILED);
    HH_RT_FORWARD(HH_CALL_MMAP, void *, hh_next.mmap(addr, len, prot, flags, fd, off));
}
HH_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

HH_EXPORT int munmap(void *addr, size_t len) {
    HH_NEXT_OR(munmap, -1);
    HH_RT_FORWARD(HH_CALL_MUNMAP, int, hh_next.munmap(addr, len));
}

HH_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    void *new_addr = (flags & MREMAP_FIXED) ? va_arg(ap, void *) : NULL;
    va_end(ap);
    HH_NEXT_OR(mremap, MAP_FAILED);
    HH_RT_FORWARD(HH_CALL_MREMAP, void *, hh_next.mremap(old, old_len, new_len, flags, new_addr));
}

HH_EXPORT int madvise(void *addr, size_t len, int advice) {
    HH_NEXT_OR(madvise, -1);
    HH_RT_FORWARD(HH_CALL_MADVISE, int, hh_next.madvise(addr, len, advice));
}

HH_EXPORT int brk(void *addr) {
    HH_NEXT_OR(brk, -1);
    HH_RT_FORWARD(HH_CALL_BRK, int, hh_next.brk(addr));
}

HH_EXPORT void *sbrk(intptr_t delta) {
    HH_NEXT_OR(sbrk, (void *)-1);
    HH_RT_FORWARD(HH_CALL_SBRK, void *, hh_next.sbrk(delta));
}

/* ---- Locks and waits ----------------------------------------------------------------------- */

HH_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
    HH_NEXT_OR(mutex_lock, ENOSYS);
    HH_RT_FORWARD(HH_CALL_MUTEX_LOCK, int, hh_next.mutex_lock(m));
}

HH_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    HH_NEXT_OR(cond_wait, ENOSYS);
    HH_RT_FORWARD(HH_CALL_COND_WAIT, int, hh_next.cond_wait(c, m));
}

HH_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                     const struct timespec *t) {
    HH_NEXT_OR(cond_timedwait, ENOSYS);
    HH_RT_FORWARD(HH_CALL_COND_TIMEDWAIT, int, hh_next.cond_timedwait(c, m, t));
}

HH_EXPORT int sem_wait(sem_t *s) {
    HH_NEXT_OR(sem_wait, -1);
    HH_RT_FORWARD(HH_CALL_SEM_WAIT, int, hh_next.sem_wait(s));
}

HH_EXPORT int sem_timedwait(sem_t *s, const struct timespec *t) {
    HH_NEXT_OR(sem_timedwait, -1);
    HH_RT_FORWARD(HH_CALL_SEM_TIMEDWAIT, int, hh_next.sem_timedwait(s, t));
}

/* ---- Sleeps ---------------------------------------------------------------------------------- */

HH_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem) {
    HH_NEXT_OR(nanosleep, -1);
    HH_RT_FORWARD(HH_CALL_NANOSLEEP, int, hh_next.nanosleep(req, rem));
}

HH_EXPORT int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
                              struct timespec *rem) {
    HH_NEXT_OR(clock_nanosleep, ENOSYS);
    HH_RT_FORWARD(HH_CALL_CLOCK_NANOSLEEP, int, hh_next.clock_nanosleep(clock, flags, req, rem));
}

HH_EXPORT int usleep(useconds_t usec) {
    HH_NEXT_OR(usleep, -1);
    HH_RT_FORWARD(HH_CALL_USLEEP, int, hh_next.usleep(usec));
}

HH_EXPORT unsigned sleep(unsigned seconds) {
    HH_NEXT_OR(sleep, seconds);
    HH_RT_FORWARD(HH_CALL_SLEEP, unsigned, hh_next.sleep(seconds));
}

/* ---- Files and sockets ------------------------------------------------------------------------
 */

/* open's mode exists only with O_CREAT or O_TMPFILE. */
static mode_t hh_mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

HH_EXPORT int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = hh_mode_arg(flags, ap);
    va_end(ap);
    HH_NEXT_OR(open, -1);
    HH_RT_FORWARD(HH_CALL_OPEN, int, hh_next.open(path, flags, mode));
}
HH_EXPORT int open64(const char *path, int flags, ...) __attribute__((alias("open")));

HH_EXPORT int openat(int dir, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = hh_mode_arg(flags, ap);
    va_end(ap);
    HH_NEXT_OR(openat, -1);
    HH_RT_FORWARD(HH_CALL_OPENAT, int, hh_next.openat(dir, path, flags, mode));
}
HH_EXPORT int openat64(int dir, const char *path, int flags, ...) __attribute__((alias("openat")));

HH_EXPORT ssize_t read(int fd, void *buf, size_t len) {
    HH_NEXT_OR(read, -1);
    HH_RT_FORWARD(HH_CALL_READ, ssize_t, hh_next.read(fd, buf, len));
}

HH_EXPORT ssize_t write(int fd, const void *buf, size_t len) {
    HH_NEXT_OR(write, -1);
    HH_RT_FORWARD(HH_CALL_WRITE, ssize_t, hh_next.write(fd, buf, len));
}

HH_EXPORT FILE *fopen(const char *path, const char *mode) {
    HH_NEXT_OR(fopen, NULL);
    HH_RT_FORWARD(HH_CALL_FOPEN, FILE *, hh_next.fopen(path, mode));
}
HH_EXPORT FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));

HH_EXPORT int fclose(FILE *f) {
    HH_NEXT_OR(fclose, EOF);
    HH_RT_FORWARD(HH_CALL_FCLOSE, int, hh_next.fclose(f));
}

HH_EXPORT int vfprintf(FILE *f, const char *fmt, va_list ap) {
    HH_NEXT_OR(vfprintf, -1);
    HH_RT_FORWARD(HH_CALL_VFPRINTF, int, hh_next.vfprintf(f, fmt, ap));
}

HH_EXPORT int vprintf(const char *fmt, va_list ap) {
    HH_NEXT_OR(vfprintf, -1);
    HH_RT_FORWARD(HH_CALL_VPRINTF, int, hh_next.vfprintf(stdout, fmt, ap));
}

/* The variadic ones forward to vfprintf under us; the hook's own frame is the call site. */
HH_EXPORT int printf(const char *fmt, ...) {
    HH_NEXT_OR(vfprintf, -1);
    va_list ap;
    va_start(ap, fmt);
    int n;
    if (HH_UNLIKELY(t_rt.active)) {
        hh_rt_violation(HH_CALL_PRINTF, HH_CALLER());
        n = hh_next.vfprintf(stdout, fmt, ap);
        hh_rt_refresh();
    } else {
        n = hh_next.vfprintf(stdout, fmt, ap);
    }
    va_end(ap);
    return n;
}

HH_EXPORT int fprintf(FILE *f, const char *fmt, ...) {
    HH_NEXT_OR(vfprintf, -1);
    va_list ap;
    va_start(ap, fmt);
    int n;
    if (HH_UNLIKELY(t_rt.active)) {
        hh_rt_violation(HH_CALL_FPRINTF, HH_CALLER());
        n = hh_next.vfprintf(f, fmt, ap);
        hh_rt_refresh();
    } else {
        n = hh_next.vfprintf(f, fmt, ap);
    }
    va_end(ap);
    return n;
}

HH_EXPORT int puts(const char *s) {
    HH_NEXT_OR(puts, EOF);
    HH_RT_FORWARD(HH_CALL_PUTS, int, hh_next.puts(s));
}

HH_EXPORT int fputs(const char *s, FILE *f) {
    HH_NEXT_OR(fputs, EOF);
    HH_RT_FORWARD(HH_CALL_FPUTS, int, hh_next.fputs(s, f));
}

HH_EXPORT size_t fwrite(const void *p, size_t size, size_t n, FILE *f) {
    HH_NEXT_OR(fwrite, 0);
    HH_RT_FORWARD(HH_CALL_FWRITE, size_t, hh_next.fwrite(p, size, n, f));
}

HH_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags) {
    HH_NEXT_OR(send, -1);
    HH_RT_FORWARD(HH_CALL_SEND, ssize_t, hh_next.send(fd, buf, len, flags));
}

HH_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
                         socklen_t tolen) {
    HH_NEXT_OR(sendto, -1);
    HH_RT_FORWARD(HH_CALL_SENDTO, ssize_t, hh_next.sendto(fd, buf, len, flags, to, tolen));
}

HH_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags) {
    HH_NEXT_OR(recv, -1);
    HH_RT_FORWARD(HH_CALL_RECV, ssize_t, hh_next.recv(fd, buf, len, flags));
}

HH_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
                           socklen_t *fromlen) {
    HH_NEXT_OR(recvfrom, -1);
    HH_RT_FORWARD(HH_CALL_RECVFROM, ssize_t, hh_next.recvfrom(fd, buf, len, flags, from, fromlen));
}

/* ---- Threads and processes --------------------------------------------------------------------
 */

/* Every thread starts in hh_rt_thread_start, which registers it and reads the policy it was
 * created with (attributes with PTHREAD_EXPLICIT_SCHED, or the creator's, inherited). */
HH_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                             void *arg) {
    HH_NEXT_OR(pthread_create, ENOSYS);
    if (HH_UNLIKELY(t_rt.active)) hh_rt_violation(HH_CALL_PTHREAD_CREATE, HH_CALLER());
    void *wrapped = hh_rt_thread_start_arg(start, arg);
    int rc = wrapped != NULL ? hh_next.pthread_create(thread, attr, hh_rt_thread_start, wrapped)
                             : hh_next.pthread_create(thread, attr, start, arg);
    if (rc != 0 && wrapped != NULL) hh_next.alloc.free(wrapped);
    hh_rt_refresh();
    return rc;
}

HH_EXPORT int pthread_join(pthread_t thread, void **result) {
    HH_NEXT_OR(pthread_join, ENOSYS);
    HH_RT_FORWARD(HH_CALL_PTHREAD_JOIN, int, hh_next.pthread_join(thread, result));
}

HH_EXPORT pid_t fork(void) {
    HH_NEXT_OR(fork, -1);
    HH_RT_FORWARD(HH_CALL_FORK, pid_t, hh_next.fork());
}
