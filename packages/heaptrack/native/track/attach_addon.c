/*
 * attach_addon.c — heaptrack_addon.node: lets a Node program trace its own native allocations
 * (src/record/attach.ts). It loads libheaphook_heaptrack.so with dlopen (RTLD_LOCAL: the library's
 * malloc does not interpose anything by being loaded) and calls heaphook_heaptrack_attach /
 * _detach (include/heaphook/heaptrack.h). The library stays loaded for the life of the process:
 * a thread may still be inside one of its hooks after a detach.
 *
 *   open(libraryPath, ucmLibraryPath?) -> true, or throws with dlerror()'s text (ucm-hooks'
 *                             library, when given, is loaded RTLD_GLOBAL first)
 *   attach(dir | undefined)   -> { status, path }   (status: HEAPHOOK_HEAPTRACK_*)
 *   detach()                  -> { status, path }
 */
#include <dlfcn.h>
#include <errno.h>
#include <node_api.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "heaphook/heaptrack.h"

static int (*attach_fn)(const char *);
static int (*detach_fn)(void);
static const char *(*log_path_fn)(void);

#define CHECK(call)                                                           \
    do {                                                                      \
        if ((call) != napi_ok) {                                              \
            napi_throw_error(env, NULL, "heaptrack addon: " #call " failed"); \
            return NULL;                                                      \
        }                                                                     \
    } while (0)

static napi_value result(napi_env env, int status) {
    napi_value object, value;
    CHECK(napi_create_object(env, &object));
    CHECK(napi_create_int32(env, status, &value));
    CHECK(napi_set_named_property(env, object, "status", value));
    CHECK(napi_create_int32(env, errno, &value));
    CHECK(napi_set_named_property(env, object, "errno", value));
    CHECK(napi_create_string_utf8(env, log_path_fn(), NAPI_AUTO_LENGTH, &value));
    CHECK(napi_set_named_property(env, object, "path", value));
    return object;
}

static napi_value open_library(napi_env env, napi_callback_info info) {
    size_t argc = 2;
    napi_value argv[2];
    CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    char path[4096];
    size_t len = 0;
    CHECK(napi_get_value_string_utf8(env, argv[0], path, sizeof path, &len));
    napi_valuetype second = napi_undefined;
    if (argc > 1) CHECK(napi_typeof(env, argv[1], &second));
    if (second == napi_string) {
        /* ucm-hooks, global, so that the tracer finds its registration function (vm.c) */
        char ucm[4096];
        CHECK(napi_get_value_string_utf8(env, argv[1], ucm, sizeof ucm, &len));
        if (dlopen(ucm, RTLD_NOW | RTLD_GLOBAL) == NULL) {
            napi_throw_error(env, NULL, dlerror());
            return NULL;
        }
    }
    if (attach_fn == NULL) {
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) {
            napi_throw_error(env, NULL, dlerror());
            return NULL;
        }
        attach_fn = (int (*)(const char *))dlsym(lib, "heaphook_heaptrack_attach");
        detach_fn = (int (*)(void))dlsym(lib, "heaphook_heaptrack_detach");
        log_path_fn = (const char *(*)(void))dlsym(lib, "heaphook_heaptrack_log_path");
        if (attach_fn == NULL || detach_fn == NULL || log_path_fn == NULL) {
            attach_fn = NULL;
            napi_throw_error(env, NULL, "the library has no heaphook_heaptrack_attach: rebuild it");
            return NULL;
        }
    }
    napi_value yes;
    CHECK(napi_get_boolean(env, true, &yes));
    return yes;
}

static bool opened(napi_env env) {
    if (attach_fn != NULL) return true;
    napi_throw_error(env, NULL, "heaptrack addon: call open(libraryPath) first");
    return false;
}

static napi_value attach(napi_env env, napi_callback_info info) {
    if (!opened(env)) return NULL;
    size_t argc = 1;
    napi_value argv[1];
    CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    char dir[4096];
    const char *where = NULL;
    napi_valuetype type = napi_undefined;
    if (argc >= 1) CHECK(napi_typeof(env, argv[0], &type));
    if (type == napi_string) {
        size_t len = 0;
        CHECK(napi_get_value_string_utf8(env, argv[0], dir, sizeof dir, &len));
        where = dir;
    }
    errno = 0;
    return result(env, attach_fn(where));
}

static napi_value detach(napi_env env, napi_callback_info info) {
    (void)info;
    if (!opened(env)) return NULL;
    errno = 0;
    return result(env, detach_fn());
}

static napi_value init(napi_env env, napi_value exports) {
    napi_property_descriptor props[] = {
        {"open", NULL, open_library, NULL, NULL, NULL, napi_default, NULL},
        {"attach", NULL, attach, NULL, NULL, NULL, napi_default, NULL},
        {"detach", NULL, detach, NULL, NULL, NULL, napi_default, NULL},
    };
    CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
