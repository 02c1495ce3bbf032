/*
 * heaphook-inject PID LIBRARY SYMBOL [STRING]
 *
 * Loads LIBRARY into the running process PID (dlopen(LIBRARY, RTLD_NOW) on one of its threads
 * that is not inside the allocator), calls int SYMBOL(const char *STRING) there (NULL when
 * STRING is absent), prints the returned int on stdout as one line, and detaches; the thread
 * puts its own registers back (session.c), so the injector may die at any instant without
 * harming the target. A second call for the same LIBRARY
 * reuses the loaded copy (dlopen's reference count). Exit 0 when the call was made; each
 * refusal has its own exit code (inject.h, packages/core/README.md) and one line on stderr, and
 * leaves the target untouched.
 */
#include "inject.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: heaphook-inject PID LIBRARY SYMBOL [STRING]\n");
        return INJECT_USAGE;
    }
    char *end = NULL;
    long pid = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || pid <= 0 || pid > INT_MAX)
        return refuse(INJECT_USAGE, "%s is not a process id", argv[1]);
    char library[PATH_MAX];
    if (argv[2][0] != '/') {
        /* The target resolves a relative name against its own working directory: make it ours. */
        if (strchr(argv[2], '/') != NULL && realpath(argv[2], library) == NULL)
            return refuse(INJECT_USAGE, "%s: no such library", argv[2]);
        if (strchr(argv[2], '/') == NULL) snprintf(library, sizeof library, "%s", argv[2]);
    } else {
        snprintf(library, sizeof library, "%s", argv[2]);
    }

    /* A Ctrl-C meant for the caller must not stop us between taking a thread and giving it back. */
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGINT);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGHUP);
    sigaddset(&blocked, SIGQUIT);
    sigprocmask(SIG_BLOCK, &blocked, NULL);

    pid_t tgid = 0;
    int code = check_target((pid_t)pid, &tgid);
    if (code != INJECT_OK) return code;
    struct target_map map;
    code = read_target_map(tgid, &map);
    if (code != INJECT_OK) return code;
    struct inject_request request = {tgid, library, argv[3], argc == 5 ? argv[4] : NULL};
    int result = 0;
    code = inject_call(&request, &map, &result);
    free_target_map(&map);
    if (code == INJECT_OK) printf("%d\n", result);
    return code;
}
