/*
 * peercred.c — peercred.node: the kernel's credentials of the process at the other end of a
 * Unix socket (SO_PEERCRED), which Node's net module does not expose. The agent trusts these,
 * never what a process says about itself.
 *
 *   peerCredentials(fd) -> { pid, uid, gid }   (throws with the errno's text on failure)
 */
#include <errno.h>
#include <node_api.h>
#include <string.h>
#include <sys/socket.h>

static napi_value hh_throw(napi_env env, const char *what) {
    napi_throw_error(env, NULL, what);
    return NULL;
}

static napi_value hh_peer_credentials(napi_env env, napi_callback_info info) {
    size_t argc = 1;
    napi_value argv[1];
    int32_t fd = -1;
    if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 ||
        napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0)
        return hh_throw(env, "peerCredentials(fd): a socket's file descriptor is required");
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return hh_throw(env, strerror(errno));
    napi_value out, pid, uid, gid;
    napi_create_object(env, &out);
    napi_create_int32(env, cred.pid, &pid);
    napi_create_uint32(env, cred.uid, &uid);
    napi_create_uint32(env, cred.gid, &gid);
    napi_set_named_property(env, out, "pid", pid);
    napi_set_named_property(env, out, "uid", uid);
    napi_set_named_property(env, out, "gid", gid);
    return out;
}

NAPI_MODULE_INIT() {
    napi_value fn;
    napi_create_function(env, "peerCredentials", NAPI_AUTO_LENGTH, hh_peer_credentials, NULL, &fn);
    napi_set_named_property(env, exports, "peerCredentials", fn);
    return exports;
}
