/*
 * ucm_watch_target.c — a process to watch (test/watch-*.test.ts). It waits for signals and
 * answers each on stdout, one line:
 *   SIGUSR1  makes a known sequence of memory calls (below) and prints "sequence done"
 *   SIGUSR2  (with --self) ends its own stream: heaphook_ucm_stream_stop("wait") -> "stopped <rc>"
 *   SIGHUP   (with --self) starts its stream again -> "started <rc>"
 *   SIGWINCH prints "state mode=<install mode> got=<hooked|libc> code=<patched|original>
 *            dlopen=<hooked|libc>": where its GOT entry of mmap leads, whether the C library's
 *            mmap entry still has its first 8 bytes of before any stream (the hooks' code
 *            patch), and where its GOT entry of dlopen leads (the patcher's dlopen hook)
 *   SIGTERM  prints "exiting" and returns from main (a normal exit: destructors run)
 *
 * The sequence, for N (argv): N mmap of 4 pages; madvise(DONTNEED) of the first; mremap of the
 * second from 4 to 8 pages; N munmap; sbrk(+page), sbrk(-page); brk(sbrk(0)); shmat and shmdt
 * of one page. Events: MMAP N, MUNMAP N, MREMAP 1, MADVISE 1, SBRK 3, BRK 1, SHMAT 1, SHMDT 1.
 * No other call of the sequence maps memory (a static table, write(2) only, no stdio).
 *
 * --busy T: T threads map, fill, check and unmap 4 pages in a loop until SIGTERM (a mapping
 * that does not read back what was written ends the process with status 9); "busy <loops>"
 * is printed before "exiting".
 *
 * --self LIB SOCKET: the target dlopens LIB and calls heaphook_ucm_stream_start(SOCKET)
 * itself, which is what `heaphook watch -p` has the injector make it do. It prints
 * "started <rc>" first. Without --self it only prints "ready <pid>".
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "heaphook/reloc.h"

static void say(const char *line) {
    size_t n = strlen(line);
    if (write(1, line, n) != (ssize_t)n) _exit(3);
}

static unsigned char libc_mmap_bytes[8];
static void *libc_mmap, *libc_dlopen;

static void state(void) {
    void *lib = dlopen("libheaphook_ucm.so", RTLD_NOW | RTLD_NOLOAD);
    const char *mode = "none";
    if (lib != NULL) {
        const char *(*install_mode)(void) =
            (const char *(*)(void))dlsym(lib, "heaphook_ucm_install_mode");
        if (install_mode != NULL) mode = install_mode();
        dlclose(lib);
    }
    void *current = NULL, *current_dlopen = NULL;
    heaphook_reloc_object *program;
    if (heaphook_reloc_open(&program, NULL) == HEAPHOOK_RELOC_OK) {
        heaphook_reloc_get(program, "mmap", &current);
        heaphook_reloc_get(program, "dlopen", &current_dlopen);
        heaphook_reloc_close(program);
    }
    char line[160];
    snprintf(line, sizeof line, "state mode=%s got=%s code=%s dlopen=%s\n", mode,
             current == libc_mmap ? "libc" : "hooked",
             memcmp(libc_mmap, libc_mmap_bytes, 8) == 0 ? "original" : "patched",
             current_dlopen == libc_dlopen ? "libc" : "hooked");
    say(line);
}

#define MAX_N 250000
static void *maps[MAX_N];

static void sequence(int n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < n; ++i) {
        maps[i] = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (maps[i] == MAP_FAILED) _exit(4);
    }
    madvise(maps[0], 4 * page, MADV_DONTNEED);
    void *grown = n > 1 ? mremap(maps[1], 4 * page, 8 * page, MREMAP_MAYMOVE) : MAP_FAILED;
    if (n > 1 && grown == MAP_FAILED) _exit(5);
    for (int i = 0; i < n; ++i) {
        if (i == 1) {
            munmap(grown, 8 * page);
        } else {
            munmap(maps[i], 4 * page);
        }
    }
    sbrk((intptr_t)page);
    sbrk(-(intptr_t)page);
    brk(sbrk(0));
    int id = shmget(IPC_PRIVATE, page, IPC_CREAT | 0600);
    if (id >= 0) {
        void *s = shmat(id, NULL, 0);
        if (s != (void *)-1) shmdt(s);
        shmctl(id, IPC_RMID, NULL);
    }
}

static atomic_int busy_stop;
static atomic_long busy_loops;

static void *busy(void *arg) {
    (void)arg;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    while (!atomic_load(&busy_stop)) {
        unsigned char *p =
            mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) _exit(9);
        for (size_t i = 0; i < 4 * page; i += page) p[i] = (unsigned char)(i / page + 1);
        for (size_t i = 0; i < 4 * page; i += page) {
            if (p[i] != (unsigned char)(i / page + 1)) _exit(9);
        }
        if (munmap(p, 4 * page) != 0) _exit(9);
        atomic_fetch_add(&busy_loops, 1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int (*start)(const char *) = NULL, (*stop)(const char *) = NULL;
    int arg = 1, threads = 0;
    if (argc > 2 && strcmp(argv[1], "--busy") == 0) {
        threads = atoi(argv[2]);
        arg = 3;
    }
    if (argc > arg + 2 && strcmp(argv[arg], "--self") == 0) {
        void *lib = dlopen(argv[arg + 1], RTLD_NOW);
        if (lib == NULL) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 2;
        }
        start = (int (*)(const char *))dlsym(lib, "heaphook_ucm_stream_start");
        stop = (int (*)(const char *))dlsym(lib, "heaphook_ucm_stream_stop");
        if (start == NULL || stop == NULL) return 2;
        arg += 3;
    }
    if (argc <= arg) {
        fprintf(stderr, "usage: %s [--busy T] [--self LIB SOCKET] N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[arg]);
    if (n < 1 || n > MAX_N) return 2;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    libc_mmap = libc != NULL ? dlsym(libc, "mmap") : NULL;
    libc_dlopen = libc != NULL ? dlsym(libc, "dlopen") : NULL;
    if (libc_mmap == NULL || libc_dlopen == NULL) return 2;
    memcpy(libc_mmap_bytes, libc_mmap, 8);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGWINCH);
    sigprocmask(SIG_BLOCK, &set, NULL);
    char line[64];
    snprintf(line, sizeof line, "ready %d\n", (int)getpid());
    say(line);
    if (start != NULL) {
        snprintf(line, sizeof line, "started %d\n", start(argv[arg - 1]));
        say(line);
    }
    pthread_t workers[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; ++i) pthread_create(&workers[i], NULL, busy, NULL);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) return 6;
        if (sig == SIGUSR1) {
            sequence(n);
            say("sequence done\n");
        } else if (sig == SIGUSR2 && stop != NULL) {
            snprintf(line, sizeof line, "stopped %d\n", stop("wait"));
            say(line);
        } else if (sig == SIGHUP && start != NULL) {
            snprintf(line, sizeof line, "started %d\n", start(argv[arg - 1]));
            say(line);
        } else if (sig == SIGWINCH) {
            state();
        } else if (sig == SIGTERM) {
            atomic_store(&busy_stop, 1);
            for (int i = 0; i < threads; ++i) pthread_join(workers[i], NULL);
            if (threads > 0) {
                snprintf(line, sizeof line, "busy %ld\n", atomic_load(&busy_loops));
                say(line);
            }
            say("exiting\n");
            return 0;
        }
    }
}
