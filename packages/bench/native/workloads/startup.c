/*
 * startup: what an allocator costs every process it starts in, as a shell pipeline or a build
 * starts hundreds of short ones. The program starts --size copies of itself one after the
 * other (posix_spawn of /proc/self/exe, the environment inherited, so a preloaded allocator is
 * loaded, initialised and torn down in each), and waits for each. A child makes a few dozen
 * allocations of the sizes a small C program makes at start-up (stdio buffers, a path, a
 * small table), checks them and exits; its exit status says whether they were right.
 * The wall time of the whole run is the figure: --size start-ups and exits.
 */
#include <spawn.h>
#include <sys/wait.h>

#include "bench.h"

extern char **environ;

#define CHILD_ALLOCATIONS 48

/* The child: allocations of start-up sizes, stamped and checked; exit 0 when all were right. */
static int child(uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    void *blocks[CHILD_ALLOCATIONS];
    size_t sizes[CHILD_ALLOCATIONS];
    for (int i = 0; i < CHILD_ALLOCATIONS; i++) {
        sizes[i] =
            rng_pct(&r) < 90 ? (size_t)rng_range(&r, 16, 512) : (size_t)rng_range(&r, 4096, 65536);
        blocks[i] = bench_xmalloc(sizes[i]);
        stamp(blocks[i], sizes[i], seed + (uint64_t)i);
    }
    for (int i = CHILD_ALLOCATIONS - 1; i >= 0; i--) {
        check_stamp(blocks[i], sizes[i], seed + (uint64_t)i, "start-up block");
        free(blocks[i]);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(strtoull(argv[2], NULL, 10));
    bench_args_t a;
    bench_parse_args(argc, argv, &a, 200, 1);
    long long t0 = now_ns();
    uint64_t checksum = 0;
    for (long long i = 0; i < a.size; i++) {
        char seed[32];
        snprintf(seed, sizeof seed, "%llu",
                 (unsigned long long)(a.seed * 1000003ull + (uint64_t)i));
        char *child_argv[] = {argv[0], "--child", seed, NULL};
        pid_t pid;
        int err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, child_argv, environ);
        if (err != 0) bench_fail("posix_spawn: %s", strerror(err));
        int status;
        if (waitpid(pid, &status, 0) != pid) bench_fail("waitpid: %s", strerror(errno));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bench_fail("start-up %lld ended with status 0x%x", i, status);
        checksum = checksum * 31 + (uint64_t)i;
    }
    long long elapsed = now_ns() - t0;
    printf(
        "{\"workload\":\"startup\",\"ok\":true,\"starts\":%lld,\"checksum\":\"%016llx\","
        "\"elapsed_ns\":%lld,\"start_us\":%.1f}\n",
        a.size, (unsigned long long)checksum, elapsed, (double)elapsed / 1e3 / (double)a.size);
    return 0;
}
