/*
 * sys.h — system calls made by the library itself go straight to the kernel: the library
 * interposes syscall(), write(), open() and read(), and its own calls (the report at exit, the
 * page-fault counts) must neither go through those hooks nor count as the program's. They are
 * the core's unobserved calls, HEAPHOOK_OS_UNOBSERVED (heaphook/os.h): the kernel's result,
 * -errno on failure, errno untouched.
 */
#ifndef HH_RT_SYS_H
#define HH_RT_SYS_H

#include <sys/syscall.h>

#include "heaphook/os.h"

/* Elsewhere os.h falls back to the C library's syscall(), which is one of our hooks. */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "rtcheck: raw system calls are written for x86-64 and aarch64"
#endif

#endif /* HH_RT_SYS_H */
