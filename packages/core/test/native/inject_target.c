/* A target for heaphook-inject's tests: prints "ready" once running, then per SIGUSR1 line of
 * work makes `count` malloc/free pairs and prints "done <count>". argv: [mode [threads]]
 *   wait     (default) main thread blocked in sigwaitinfo (a syscall the allocator never makes)
 *   busy     main thread spins in a malloc/free loop: no thread is idle; the injector must
 *            trace it to a syscall outside the allocator (it calls getpid every 4096 pairs)
 *   threads  `threads` threads allocating all the time, the main thread in sigwaitinfo
 *   spin     spins in malloc/free without a syscall (the clock is the vDSO's) and exits with
 *            status 0 after `threads` milliseconds: a process that exits during the attach
 *   ringwait the only thread waits on a futex in a memfd named "heaphook-ring", as a thread of a
 *            traced process waits for room in the tracer's ring: it is inside the tracer's malloc,
 *            so the injector must not take it (it gives up: no thread outside the allocator)
 *   registers  reads stdin a byte at a time with a raw read syscall made with known values in
 *            every register the kernel keeps (general, every xmm and, with AVX, the upper halves
 *            of the ymm registers) and errno set to 4321, so the injector takes the thread in that
 *            read; after each byte prints "read <byte> handled <n>: registers kept" (n: SIGUSR2s
 *            handled, by a SA_RESTART handler: the read must go on, not fail with EINTR) or names
 *            what changed
 *   pause    waits in pause() with a SIGUSR2 handler without SA_RESTART; prints "pause EINTR <n>"
 *            each time pause returns (the handler ran: the kernel never restarts pause)
 * SIGTERM: prints "bye" and exits 0. */
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int stop;
static volatile sig_atomic_t handled;

static void count_signal(int sig) {
    (void)sig;
    handled++;
}

#if defined(__x86_64__) /* the registers mode is x86-64's: its syscall is written in assembly */
/* What "registers" loads before its read: 16 xmm registers (two words each), then the upper
 * halves of the 16 ymm registers; and the general registers' values. */
uint64_t hh_register_patterns[64];
static const uint64_t GENERAL[12] = {0x1111111111111111,
                                     0x2222222222222222,
                                     0x3333333333333333,
                                     0x4444444444444444,
                                     0x5555555555555555,
                                     0x6666666666666666,
                                     0x7777777777777777,
                                     0x8888888888888888,
                                     0x9999999999999999,
                                     0,
                                     0,
                                     1};
static const char *const GENERAL_NAMES[12] = {"rbx", "rbp", "r8",  "r9",  "r10", "r12",
                                              "r13", "r14", "r15", "rdi", "rsi", "rdx"};

/* read(0, buffer, 1) by the syscall instruction, every register loaded before it and stored
 * after it into out: the 12 general ones of GENERAL (rsi is the buffer), 16 xmm, 16 ymm upper
 * halves (avx != 0). Returns the syscall's result. */
long hh_read_keeping_registers(void *buffer, uint64_t *out, long avx);
__asm__(
    ".text\n"
    ".globl hh_read_keeping_registers\n"
    ".type hh_read_keeping_registers, @function\n"
    "hh_read_keeping_registers:\n"
    "    push %rbx\n push %rbp\n push %r12\n push %r13\n push %r14\n push %r15\n"
    "    push %rsi\n push %rdx\n"
    "    lea hh_register_patterns(%rip), %rax\n"
    "    .irp n,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "    movdqu 16*\\n(%rax), %xmm\\n\n"
    "    .endr\n"
    "    test %rdx, %rdx\n"
    "    jz 1f\n"
    "    .irp n,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "    vinsertf128 $1, 256+16*\\n(%rax), %ymm\\n, %ymm\\n\n"
    "    .endr\n"
    "1:  mov %rdi, %rsi\n"
    "    movabs $0x1111111111111111, %rbx\n"
    "    movabs $0x2222222222222222, %rbp\n"
    "    movabs $0x3333333333333333, %r8\n"
    "    movabs $0x4444444444444444, %r9\n"
    "    movabs $0x5555555555555555, %r10\n"
    "    movabs $0x6666666666666666, %r12\n"
    "    movabs $0x7777777777777777, %r13\n"
    "    movabs $0x8888888888888888, %r14\n"
    "    movabs $0x9999999999999999, %r15\n"
    "    xor %edi, %edi\n"
    "    mov $1, %edx\n"
    "    xor %eax, %eax\n"
    "    syscall\n"
    "    mov 8(%rsp), %rcx\n" /* out */
    "    mov %rbx, 0(%rcx)\n mov %rbp, 8(%rcx)\n mov %r8, 16(%rcx)\n mov %r9, 24(%rcx)\n"
    "    mov %r10, 32(%rcx)\n mov %r12, 40(%rcx)\n mov %r13, 48(%rcx)\n"
    "    mov %r14, 56(%rcx)\n mov %r15, 64(%rcx)\n mov %rdi, 72(%rcx)\n"
    "    mov %rsi, 80(%rcx)\n mov %rdx, 88(%rcx)\n"
    "    .irp n,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "    movdqu %xmm\\n, 96+16*\\n(%rcx)\n"
    "    .endr\n"
    "    cmpq $0, (%rsp)\n" /* avx */
    "    jz 2f\n"
    "    .irp n,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "    vextractf128 $1, %ymm\\n, 352+16*\\n(%rcx)\n"
    "    .endr\n"
    "    vzeroupper\n"
    "2:  add $16, %rsp\n"
    "    pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbp\n pop %rbx\n"
    "    ret\n"
    ".size hh_read_keeping_registers, .-hh_read_keeping_registers\n");

static int read_keeping_registers(void) {
    int avx = __builtin_cpu_supports("avx");
    for (int i = 0; i < 64; i++)
        hh_register_patterns[i] = 0x0123456789abcdefULL * (uint64_t)(i + 3);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = count_signal;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &action, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        char byte = 0;
        uint64_t out[96];
        memset(out, 0, sizeof out);
        errno = 4321;
        long got = hh_read_keeping_registers(&byte, out, avx);
        int error = errno;
        if (got <= 0) {
            printf("read returned %ld\n", got);
            fflush(stdout);
            return got == 0 ? 0 : 1;
        }
        char changed[256] = "";
        for (int i = 0; i < 12; i++) {
            uint64_t want = i == 10 ? (uint64_t)(uintptr_t)&byte : GENERAL[i];
            if (out[i] != want) strcat(changed, GENERAL_NAMES[i]), strcat(changed, " ");
        }
        for (int i = 0; i < (avx ? 64 : 32); i++) {
            if (out[12 + i] != hh_register_patterns[i]) {
                char name[16];
                snprintf(name, sizeof name, "%s%d ", i < 32 ? "xmm" : "ymm", (i % 32) / 2);
                if (strstr(changed, name) == NULL) strcat(changed, name);
            }
        }
        if (error != 4321) strcat(changed, "errno ");
        if (changed[0] != '\0')
            printf("read %c handled %d: changed %s\n", byte, (int)handled, changed);
        else
            printf("read %c handled %d: registers kept\n", byte, (int)handled);
        fflush(stdout);
    }
}
#else
static int read_keeping_registers(void) {
    fprintf(stderr, "inject_target: the registers mode is x86-64 only\n");
    return 2;
}
#endif

static void *allocate_forever(void *arg) {
    (void)arg;
    unsigned n = 0;
    while (!stop) {
        void *p = malloc(16 + (n++ % 512));
        memset(p, 1, 16);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "wait";
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    if (strcmp(mode, "registers") == 0) return read_keeping_registers();
    if (strcmp(mode, "pause") == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = count_signal; /* no SA_RESTART (pause never restarts anyway) */
        sigaction(SIGUSR2, &action, NULL);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        signal(SIGTERM, SIG_DFL);
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;) {
            int r = pause();
            printf("pause %s %d\n", r == -1 && errno == EINTR ? "EINTR" : "other", (int)handled);
            fflush(stdout);
        }
    }
    pthread_t workers[64];
    if (strcmp(mode, "threads") == 0)
        for (int i = 0; i < threads && i < 64; i++)
            pthread_create(&workers[i], NULL, allocate_forever, NULL);
    if (strcmp(mode, "ringwait") == 0) {
        /* set up before "ready": after it, the thread only waits */
        int fd = (int)syscall(SYS_memfd_create, "heaphook-ring", 1u /* MFD_CLOEXEC */);
        if (fd < 0 || ftruncate(fd, 4096) != 0) return 1;
        unsigned *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (word == MAP_FAILED) return 1;
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;) syscall(SYS_futex, word, FUTEX_WAIT, 0, NULL, NULL, 0);
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (strcmp(mode, "spin") == 0) {
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
            for (int i = 0; i < 1000; i++) free(malloc(64));
            clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 <
                 threads);
        _exit(0);
    }
    if (strcmp(mode, "busy") == 0) {
        unsigned long n = 0;
        struct timespec zero = {0, 0};
        for (;;) {
            void *p = malloc(32 + (n % 256));
            free(p);
            if (++n % 4096 == 0) {
                getpid();
                if (sigtimedwait(&set, NULL, &zero) == SIGTERM) break;
            }
        }
        printf("bye\n");
        return 0;
    }
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&set, &info);
        if (sig == SIGTERM) break;
        if (sig != SIGUSR1) continue;
        int count = 1000;
        void *blocks[1000];
        for (int i = 0; i < count; i++) blocks[i] = malloc(100 + i);
        for (int i = 0; i < count; i++) free(blocks[i]);
        printf("done %d\n", count);
        fflush(stdout);
    }
    stop = 1;
    if (strcmp(mode, "threads") == 0)
        for (int i = 0; i < threads && i < 64; i++) pthread_join(workers[i], NULL);
    printf("bye\n");
    return 0;
}
