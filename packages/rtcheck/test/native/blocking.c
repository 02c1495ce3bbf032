/*
 * blocking.c — one family of blocking calls, made once inside heaphook_rt_enter/exit.
 *
 *   rt_blocking FAMILY      mutex cond sem sleep file stdio socket thread fork mmap
 *   rt_blocking suppressed  a malloc from log_message (for the suppression tests), then exit 0
 *   rt_blocking exit3       a malloc in the context, then exit status 3
 */
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaphook/rt.h"

static void *thread_body(void *arg) {
    return arg;
}

__attribute__((noinline)) void log_message(void) {
    free(malloc(100));
}

__attribute__((noinline)) static void family(const char *name) {
    if (strcmp(name, "mutex") == 0) {
        static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
    } else if (strcmp(name, "cond") == 0) {
        static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&m);
        pthread_cond_timedwait(&c, &m, &until);
        pthread_mutex_unlock(&m);
    } else if (strcmp(name, "sem") == 0) {
        sem_t s;
        sem_init(&s, 0, 1);
        sem_wait(&s);
        sem_destroy(&s);
    } else if (strcmp(name, "sleep") == 0) {
        struct timespec t = {0, 1000};
        nanosleep(&t, NULL);
        clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
        usleep(1);
        sleep(0);
    } else if (strcmp(name, "file") == 0) {
        char buf[16];
        int fd = open("/dev/zero", O_RDONLY);
        read(fd, buf, sizeof buf);
        close(fd);
        fd = open("/dev/null", O_WRONLY);
        write(fd, buf, sizeof buf);
        close(fd);
    } else if (strcmp(name, "stdio") == 0) {
        FILE *f = fopen("/dev/null", "w");
        fprintf(f, "%d\n", 42);
        fputs("x\n", f);
        fwrite("y", 1, 1, f);
        fclose(f);
        printf("stdio from the loop\n");
    } else if (strcmp(name, "socket") == 0) {
        int sv[2];
        char byte = 1;
        socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
        send(sv[0], &byte, 1, 0);
        recv(sv[1], &byte, 1, 0);
        sendto(sv[0], &byte, 1, 0, NULL, 0);
        recvfrom(sv[1], &byte, 1, 0, NULL, NULL);
        close(sv[0]);
        close(sv[1]);
    } else if (strcmp(name, "thread") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, thread_body, NULL);
        pthread_join(t, NULL);
    } else if (strcmp(name, "fork") == 0) {
        pid_t child = fork();
        if (child == 0) _exit(0);
        waitpid(child, NULL, 0);
    } else if (strcmp(name, "mmap") == 0) {
        char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        madvise(p, 4096, MADV_DONTNEED);
        p = mremap(p, 8192, 16384, MREMAP_MAYMOVE);
        munmap(p, 16384);
        sbrk(0);
    } else if (strcmp(name, "suppressed") == 0 || strcmp(name, "exit3") == 0) {
        log_message();
    } else {
        fprintf(stderr, "rt_blocking: unknown family %s\n", name);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: rt_blocking FAMILY\n");
        return 2;
    }
    heaphook_rt_enter();
    family(argv[1]);
    heaphook_rt_exit();
    return strcmp(argv[1], "exit3") == 0 ? 3 : 0;
}
