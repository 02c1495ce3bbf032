/*
 * start.c — how the client comes to report, whichever way it was loaded:
 *
 *   preloaded ahead of the allocator   its exported malloc family (hooks.c) is the process's;
 *                                      its constructor starts it when HEAPHOOK_AGENT is set
 *   preloaded behind another allocator its constructor starts it, and attach.c redirects the
 *                                      malloc family to its hooks (GOT patching)
 *   loaded by a backend's core         HEAPHOOK_AGENT with only libheaphook_<backend>.so
 *                                      preloaded: the core's constructor (agent_loader.c)
 *                                      dlopens it and calls heaphook_agent_start
 *   injected into a running process    `heaphook attach PID --agent PATH` calls
 *                                      heaphook_agent_set_sample_bytes, heaphook_agent_attach
 *
 * At start-up a bad HEAPHOOK_AGENT or HEAPHOOK_AGENT_SAMPLE_BYTES stops the program before
 * main with one line; in a running process nothing stops it: the entries return a code.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

#include "client.h"
#include "heaphook/config.h"
#include "heaphook/log.h"

#define HH_EXPORT __attribute__((visibility("default")))
#define HH_DEFAULT_SAMPLE_BYTES (512u * 1024u) /* tcmalloc's and jemalloc's default */

/* heaphook_agent_attach's answers (src/attach/command.ts names them). */
#define HH_ATTACH_OK 0
#define HH_ATTACH_ALREADY 1   /* reporting already (preloaded, or attached before) */
#define HH_ATTACH_BAD_VALUE 2 /* not "unix:PATH", or a bad sampling interval */
#define HH_ATTACH_FAILED 3    /* the malloc family could not be redirected */

static _Atomic bool g_started; /* the first entry to run starts the client; once */
static uint64_t g_attach_sample_bytes = HH_DEFAULT_SAMPLE_BYTES;

/* The object that defines address: its load base. */
static const void *hh_object_of(const void *address) {
    Dl_info info;
    return address != NULL && dladdr(address, &info) != 0 ? info.dli_fbase : NULL;
}

/* The process's malloc is this library's own (hooks.c): preloaded ahead of the allocator. */
static bool hh_client_interposes(void) {
    return hh_object_of(dlsym(RTLD_DEFAULT, "malloc")) == hh_object_of((const void *)hh_object_of);
}

/* Starts reporting to the agent at value (already checked) with hooks reached either way. */
static const char *hh_start(uint64_t sample_bytes) {
    hh_agent_fork_register(); /* before attach.c's first patch */
    bool interposes = hh_client_interposes();
    if (!interposes) {
        const char *error = hh_agent_attach_resolve();
        if (error != NULL) return error;
    }
    hh_agent_extras_start(); /* before the first STATS, which the link sends at once */
    const char *error = hh_agent_link_start(sample_bytes);
    if (error != NULL || interposes) return error;
    return hh_agent_attach_patch();
}

/* Start-up: HEAPHOOK_AGENT's value; a bad value of it or of HEAPHOOK_AGENT_SAMPLE_BYTES stops
 * the program. NULL when the process reports (or did already), else why it cannot. */
HH_EXPORT const char *heaphook_agent_start(const char *value) {
    if (atomic_exchange(&g_started, true)) return NULL;
    if (!hh_agent_parse_address(value)) {
        heaphook_config_fail("HEAPHOOK_AGENT", value,
                             "unix: and the path of the agent's socket (at most 107 bytes)",
                             "unix:/run/heaphook/agent.sock");
    }
    uint64_t sample_bytes =
        heaphook_env_size("HEAPHOOK_AGENT_SAMPLE_BYTES", NULL, HH_DEFAULT_SAMPLE_BYTES);
    if (sample_bytes == 0) {
        heaphook_config_fail("HEAPHOOK_AGENT_SAMPLE_BYTES", "0",
                             "a mean sampling interval of at least 1 byte", "512KiB");
    }
    hh_agent_busy++;
    const char *error = hh_start(sample_bytes);
    hh_agent_busy--;
    return error;
}

/* A running process: the mean sampling interval for the next heaphook_agent_attach (the
 * core's size syntax: "4096", "512KiB"). */
HH_EXPORT int heaphook_agent_set_sample_bytes(const char *text) {
    size_t bytes;
    if (text == NULL || heaphook_parse_size(text, &bytes) != 0 || bytes == 0)
        return HH_ATTACH_BAD_VALUE;
    g_attach_sample_bytes = bytes;
    return HH_ATTACH_OK;
}

/* A running process (`heaphook attach`): starts reporting to the agent at value ("unix:PATH").
 * Never stops the process; returns one of HH_ATTACH_*. */
HH_EXPORT int heaphook_agent_attach(const char *value) {
    if (atomic_exchange(&g_started, true)) return HH_ATTACH_ALREADY;
    if (!hh_agent_parse_address(value)) {
        atomic_store(&g_started, false);
        return HH_ATTACH_BAD_VALUE;
    }
    hh_agent_busy++;
    const char *error = hh_start(g_attach_sample_bytes);
    hh_agent_busy--;
    return error == NULL ? HH_ATTACH_OK : HH_ATTACH_FAILED;
}

/* Preloaded (in the global scope, ahead of the allocator or behind it), the constructor starts
 * the client. Loaded with dlopen (a backend's core, heaphook attach) it waits to be called. */
__attribute__((constructor)) static void hh_agent_constructor(void) {
    const char *value = heaphook_env_get_unless_secure("HEAPHOOK_AGENT", NULL);
    if (value == NULL) return;
    hh_agent_busy++;
    bool global = hh_object_of(dlsym(RTLD_DEFAULT, "heaphook_agent_start")) ==
                  hh_object_of((const void *)hh_object_of);
    hh_agent_busy--;
    if (!global) return;
    const char *error = heaphook_agent_start(value);
    if (error != NULL) heaphook_log_error("agent: not reporting: %s", error);
}
