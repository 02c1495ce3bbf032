/*
 * os_test.c — heaphook/os.h's two kinds of call, and the logger's channels, called directly
 * (links libheaphook_core.a; no interposition by the core). The program defines mmap and
 * munmap itself, counting, as an event hook (ucm-hooks) does: the core's observed calls must
 * reach them, the unobserved ones must not. Prints "ok: ..." or "FAIL: ..." per check and
 * "os_test: N failed"; with "log", writes lines on a channel and on the core's logger and exits.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heaphook/log.h"
#include "heaphook/os.h"

/* The program's own mmap and munmap: every call made through the symbol lands here. */
static int mmap_calls, munmap_calls;
void *mmap(void *addr, size_t size, int prot, int flags, int fd, off_t offset) {
    ++mmap_calls;
    return heaphook_os_unobserved_mmap(addr, size, prot, flags, fd, offset);
}
void *mmap64(void *addr, size_t size, int prot, int flags, int fd, off_t offset)
    __attribute__((alias("mmap")));
int munmap(void *addr, size_t size) {
    ++munmap_calls;
    return heaphook_os_unobserved_munmap(addr, size);
}

static int failures;
static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) ++failures;
}

static int log_lines(void) {
    heaphook_log_channel channel = {.name = "os-test", .level = HEAPHOOK_LOG_WARN};
    heaphook_log_to(&channel, HEAPHOOK_LOG_INFO, "channel info line");
    heaphook_log_to(&channel, HEAPHOOK_LOG_WARN, "channel warn line %d", 7);
    heaphook_log_to(&channel, HEAPHOOK_LOG_ERROR, "channel error line");
    heaphook_log_warn("core warn line");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "log") == 0) return log_lines();
    size_t page = heaphook_os_page_size();

    char *observed = heaphook_os_map(page);
    check(observed != NULL && mmap_calls == 1, "heaphook_os_map goes through the mmap symbol");
    check(heaphook_os_unmap(observed, page) == 0 && munmap_calls == 1,
          "heaphook_os_unmap goes through the munmap symbol");

    char *quiet = heaphook_os_unobserved_mmap(NULL, page, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int usable = quiet != MAP_FAILED;
    if (usable) {
        quiet[0] = 1;
        quiet[page - 1] = 2;
        usable = quiet[0] == 1 && quiet[page - 1] == 2;
    }
    check(usable && mmap_calls == 1, "heaphook_os_unobserved_mmap maps without the mmap symbol");
    check(heaphook_os_unobserved_munmap(quiet, page) == 0 && munmap_calls == 1,
          "heaphook_os_unobserved_munmap unmaps without the munmap symbol");

    errno = 0;
    void *bad = heaphook_os_unobserved_mmap(NULL, page, PROT_READ, MAP_PRIVATE, -1, 0);
    check(bad == MAP_FAILED && errno == EBADF,
          "a failed unobserved mmap returns MAP_FAILED with errno EBADF, as the C library's");
    errno = 0;
    check(heaphook_os_unobserved_munmap((void *)1, page) == -1 && errno == EINVAL,
          "a failed unobserved munmap returns -1 with errno EINVAL");

    errno = 1234;
    long raw = HEAPHOOK_OS_UNOBSERVED(SYS_munmap, 1, page, 0, 0, 0, 0);
    check(raw == -EINVAL && heaphook_os_unobserved_failed(raw) && errno == 1234,
          "HEAPHOOK_OS_UNOBSERVED returns the kernel's -errno and leaves errno alone");
    long pid = HEAPHOOK_OS_UNOBSERVED(SYS_getpid, 0, 0, 0, 0, 0, 0);
    check(pid == (long)getpid() && !heaphook_os_unobserved_failed(pid),
          "HEAPHOOK_OS_UNOBSERVED returns the result of a call that succeeds");

    printf("os_test: %d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
