/*
 * agent_loader.c — HEAPHOOK_AGENT=unix:PATH with a backend library preloaded alone: the
 * constructor loads the agent's client (libheaphook_agent.so, @heaphook/agent) and starts it.
 *
 * The client reports sampled allocations to `heaphook agent`. Preloaded ahead of the backend it
 * interposes the malloc family itself; loaded here (RTLD_LOCAL, after the backend is ready) it
 * redirects the malloc family of every loaded object to its hooks by GOT patching, and those
 * forward to the backend. So the core's interposition path is left exactly as it is: with the
 * variable unset the whole cost is one getenv in the constructor, and a backend never pays for
 * reporting it does not do.
 *
 * Where the client is found, first that exists:
 *   1. HEAPHOOK_AGENT_CLIENT, a path (ignored under secure execution, as every path variable);
 *   2. next to this library (a user's layout, or both libraries copied to one directory);
 *   3. the @heaphook/agent package beside this library's package: <pkg>/build/Release/ ->
 *      <pkg>/../agent/build/Release/ (this repository, and node_modules/@heaphook/).
 * HEAPHOOK_AGENT set and no client found stops the program before main, with one line naming
 * HEAPHOOK_AGENT_CLIENT: the user asked for reporting and would otherwise get none, silently.
 *
 * Nothing here allocates but dlopen and dlsym, which go to the ready backend; paths are built
 * in fixed buffers; lines go out with write(2) (log.h).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/log.h"
#include "internal.h"

#define HH_AGENT_VARIABLE "HEAPHOOK_AGENT"
#define HH_AGENT_CLIENT_VARIABLE "HEAPHOOK_AGENT_CLIENT"
#define HH_AGENT_CLIENT_FILE "libheaphook_agent.so"
#define HH_AGENT_PREFIX "unix:"
/* sizeof(struct sockaddr_un.sun_path) - 1: the path and its NUL must fit. */
#define HH_AGENT_MAX_SOCKET_PATH 107u
/* The client's start-up entry (native/client/start.c of @heaphook/agent): 0 when it reports
 * (or already did), else a short reason it could not. */
#define HH_AGENT_START_SYMBOL "heaphook_agent_start"
typedef const char *(*hh_agent_start_fn)(const char *value);

/* Stops the program for a bad HEAPHOOK_AGENT (the same line the client gives). */
static void hh_agent_check_value(const char *value) {
    size_t prefix = sizeof HH_AGENT_PREFIX - 1;
    size_t path = strlen(value) - prefix;
    if (strncmp(value, HH_AGENT_PREFIX, prefix) != 0 || path == 0 ||
        path > HH_AGENT_MAX_SOCKET_PATH) {
        heaphook_config_fail(HH_AGENT_VARIABLE, value,
                             "unix: and the path of the agent's socket (at most 107 bytes)",
                             "unix:/run/heaphook/agent.sock");
    }
}

/* dir + "/" + tail into out (PATH_MAX); false when it does not fit. */
static bool hh_join(char *out, const char *dir, size_t dir_len, const char *tail) {
    size_t tail_len = strlen(tail);
    if (dir_len + 1 + tail_len + 1 > PATH_MAX) return false;
    memcpy(out, dir, dir_len);
    out[dir_len] = '/';
    memcpy(out + dir_len + 1, tail, tail_len + 1);
    return true;
}

/* The client's path into out, or false. Also gives this library's own path (for the error). */
static bool hh_agent_find_client(char *out, const char **own_path) {
    const char *named = heaphook_env_get_unless_secure(HH_AGENT_CLIENT_VARIABLE, NULL);
    if (named != NULL) {
        size_t len = strlen(named);
        if (len + 1 > PATH_MAX || access(named, R_OK) != 0) return false;
        memcpy(out, named, len + 1);
        return true;
    }
    Dl_info self;
    if (dladdr((const void *)hh_agent_find_client, &self) == 0 || self.dli_fname == NULL)
        return false;
    *own_path = self.dli_fname;
    const char *slash = strrchr(self.dli_fname, '/');
    if (slash == NULL) return false; /* preloaded by bare name: no directory to look in */
    size_t dir_len = (size_t)(slash - self.dli_fname);
    static const char *const candidates[] = {
        HH_AGENT_CLIENT_FILE,
        "../../../agent/build/Release/" HH_AGENT_CLIENT_FILE,
    };
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (hh_join(out, self.dli_fname, dir_len, candidates[i]) && access(out, R_OK) == 0)
            return true;
    }
    return false;
}

__attribute__((noreturn)) static void hh_agent_stop(const char *what, const char *detail) {
    char line[1024];
    size_t len = heaphook_formatf(
        line, sizeof line - 1,
        "heaphook: " HH_AGENT_VARIABLE " is set but %s%s; set " HH_AGENT_CLIENT_VARIABLE
        " to the client library, e.g. " HH_AGENT_CLIENT_VARIABLE
        "=/opt/heaphook/" HH_AGENT_CLIENT_FILE " (`heaphook path agent` prints it)",
        what, detail);
    line[len++] = '\n';
    heaphook_write_all(heaphook_report_fd(), line, len);
    _exit(HEAPHOOK_EXIT_CONFIG);
}

void hh_agent_loader_start(void) {
    const char *value = heaphook_env_get_unless_secure(HH_AGENT_VARIABLE, NULL);
    if (HH_LIKELY(value == NULL)) return;
    hh_agent_check_value(value);
    /* The client is in the global scope already (preloaded, ahead of this library or after
     * it): its own constructor starts it. */
    if (dlsym(RTLD_DEFAULT, HH_AGENT_START_SYMBOL) != NULL) return;
    char path[PATH_MAX];
    const char *own_path = "this library";
    if (!hh_agent_find_client(path, &own_path)) {
        const char *named = heaphook_env_get_unless_secure(HH_AGENT_CLIENT_VARIABLE, NULL);
        char where[PATH_MAX + 64];
        if (named != NULL)
            heaphook_formatf(where, sizeof where,
                             " (" HH_AGENT_CLIENT_VARIABLE "=%s is not a readable file)", named);
        else
            heaphook_formatf(where, sizeof where, " (looked beside %s)", own_path);
        hh_agent_stop(HH_AGENT_CLIENT_FILE " was not found", where);
    }
    void *client = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (client == NULL) {
        const char *error = dlerror();
        hh_agent_stop("the client could not be loaded: ", error != NULL ? error : path);
    }
    hh_agent_start_fn start = (hh_agent_start_fn)dlsym(client, HH_AGENT_START_SYMBOL);
    if (start == NULL)
        hh_agent_stop(path, " is not the agent's client (no " HH_AGENT_START_SYMBOL ")");
    const char *refused = start(value);
    /* The program runs on without reporting: the agent itself may come and go, but a client
     * that cannot hook in is worth one line. */
    if (refused != NULL) heaphook_log_error("agent: not reporting: %s", refused);
}
