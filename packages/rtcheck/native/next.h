/*
 * next.h — the functions under us: what dlsym(RTLD_NEXT) finds after libheaphook_rtcheck.so in
 * the lookup order (a heaphook backend preloaded after us, or libc). The malloc family's
 * pointers start at bootstrap functions that resolve the table on first use, so a hook never
 * tests whether it is resolved: a hook is the t_rt.active branch and one indirect call.
 */
#ifndef HH_RT_NEXT_H
#define HH_RT_NEXT_H

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>

#include "heaphook/bootstrap.h"
#include "rtcheck.h"

typedef struct hh_rt_next {
    /* the malloc family, the core's table (never NULL: bootstrap functions until resolved) */
    heaphook_next_allocator alloc;
    /* everything else (resolved with the family; NULL when the process has no such symbol) */
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    int (*madvise)(void *, size_t, int);
    int (*brk)(void *);
    void *(*sbrk)(intptr_t);
    int (*mutex_lock)(pthread_mutex_t *);
    int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
    int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    int (*sem_wait)(sem_t *);
    int (*sem_timedwait)(sem_t *, const struct timespec *);
    int (*nanosleep)(const struct timespec *, struct timespec *);
    int (*clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
    int (*usleep)(useconds_t);
    unsigned (*sleep)(unsigned);
    int (*open)(const char *, int, ...);
    int (*openat)(int, const char *, int, ...);
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*write)(int, const void *, size_t);
    FILE *(*fopen)(const char *, const char *);
    int (*fclose)(FILE *);
    int (*vfprintf)(FILE *, const char *, va_list);
    int (*puts)(const char *);
    int (*fputs)(const char *, FILE *);
    size_t (*fwrite)(const void *, size_t, size_t, FILE *);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    ssize_t (*recv)(int, void *, size_t, int);
    ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int (*pthread_join)(pthread_t, void **);
    pid_t (*fork)(void);
    int (*sched_setscheduler)(pid_t, int, const struct sched_param *);
    int (*pthread_setschedparam)(pthread_t, int, const struct sched_param *);
    int (*pthread_setschedprio)(pthread_t, int);
    int (*sched_setattr)(pid_t, void *, unsigned);
    long (*syscall)(long, ...);
} hh_rt_next;

extern hh_rt_next hh_next __attribute__((visibility("hidden")));

/* Blocks served while dlsym resolved the table come from the core's bootstrap arena
 * (heaphook/bootstrap.h: heaphook_bootstrap_owns, heaphook_bootstrap_block_size): never passed
 * on. */

/* C++ operators under us (libstdc++'s), found lazily: a C program has none until it dlopens
 * a C++ library. NULL when there is none yet. */
void *hh_rt_next_cxx(const char *mangled_name, void **cache);

#endif /* HH_RT_NEXT_H */
