/*
 * reloc_main.c — the GOT patcher (native/reloc.c, compiled in) against this program and the
 * library reloc_lib.c, both built by the test with one combination of RELRO / PIE / -fno-plt
 * flags, and a library dlopen'ed after the patch (argv[1]).
 *
 * Prints one line per failed check and "reloc: N checks, M failed"; exits with M != 0.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heaphook/reloc.h"

int reloc_lib_value(void);
int reloc_lib_getpid(void);
int reloc_lib_call_value(void);

static int checks, failures;
#define CHECK(cond, ...)                                           \
    do {                                                           \
        ++checks;                                                  \
        if (!(cond)) {                                             \
            ++failures;                                            \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                   \
            printf("\n");                                          \
        }                                                          \
    } while (0)

#define FAKE_PID 424242
static pid_t (*original_getpid)(void);
static int fake_calls;

static pid_t fake_getpid(void) {
    ++fake_calls;
    return FAKE_PID;
}
static int fake_value(void) {
    return 7;
}
static pid_t layered_getpid(void) {
    return original_getpid() + 1; /* calls the previous patch */
}

static int late_getpid(const char *path, void **handle) {
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (*handle == NULL) {
        printf("FAIL dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    int (*f)(void) = (int (*)(void))dlsym(*handle, "reloc_late_getpid");
    return f ? f() : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *late = argv[1];
    int pid = (int)syscall(SYS_getpid);
    void *handle;

    CHECK(getpid() == pid, "before: main %d", (int)getpid());
    CHECK(reloc_lib_getpid() == pid, "before: lib");
    CHECK(reloc_lib_value() == 1, "before: value");

    /* One object: the main program only. */
    heaphook_reloc_object *object;
    int error = heaphook_reloc_open(&object, NULL);
    CHECK(error == 0, "open main: %s", heaphook_reloc_strerror(error));
    /* Not called yet: with lazy binding its slot still points at the PLT stub; get resolves. */
    void *target = NULL;
    CHECK(heaphook_reloc_get(object, "reloc_lib_call_value", &target) == 0 &&
              target == dlsym(RTLD_DEFAULT, "reloc_lib_call_value"),
          "get of an unresolved slot: %p", target);
    void *old = NULL;
    error = heaphook_reloc_replace(object, "getpid", (void *)fake_getpid, &old);
    CHECK(error == 0, "replace: %s", heaphook_reloc_strerror(error));
    CHECK(getpid() == FAKE_PID, "object: main not redirected");
    void *current = NULL;
    CHECK(heaphook_reloc_get(object, "getpid", &current) == 0 && current == (void *)fake_getpid,
          "object: get");
    CHECK(reloc_lib_getpid() == pid, "object: lib redirected too");
    CHECK(old != NULL && ((pid_t(*)(void))old)() == pid, "object: old is not getpid");
    error = heaphook_reloc_replace(object, "getpid", old, NULL);
    CHECK(error == 0 && getpid() == pid, "object: restore");
    CHECK(heaphook_reloc_replace(object, "no_such_symbol_here", (void *)fake_getpid, NULL) ==
              HEAPHOOK_RELOC_NOT_FOUND,
          "object: missing symbol");
    heaphook_reloc_close(object);
    error = heaphook_reloc_open(&object, "libreloc_lib.so");
    CHECK(error == 0, "open by name: %s", heaphook_reloc_strerror(error));
    if (error == 0) heaphook_reloc_close(object);
    error = heaphook_reloc_open_by_address(&object, (void *)reloc_lib_value);
    CHECK(error == 0, "open by address: %s", heaphook_reloc_strerror(error));
    if (error == 0) heaphook_reloc_close(object);
    CHECK(heaphook_reloc_open(&object, "libnothing.so") == HEAPHOOK_RELOC_NOT_FOUND, "open none");

    /* The whole process. */
    heaphook_reloc_handle *patch = NULL;
    error = heaphook_reloc_patch("getpid", (void *)fake_getpid, (void **)&original_getpid, &patch);
    CHECK(error == 0 && patch != NULL, "patch: %s", heaphook_reloc_strerror(error));
    CHECK(getpid() == FAKE_PID, "patch: main");
    CHECK(reloc_lib_getpid() == FAKE_PID, "patch: lib");
    CHECK(original_getpid != NULL && original_getpid() == pid, "patch: original");
    CHECK(heaphook_reloc_patched_entries() >= 2, "patch: entries %lu",
          heaphook_reloc_patched_entries());
    int value = late_getpid(late, &handle);
    CHECK(value == FAKE_PID, "patch: late library not redirected (%d)", value);
    if (handle) dlclose(handle);
    value = late_getpid(late, &handle); /* loaded again after dlclose */
    CHECK(value == FAKE_PID, "patch: late library reloaded (%d)", value);

    /* A second layer over the first. */
    heaphook_reloc_handle *layer = NULL;
    pid_t (*layer_original)(void) = NULL;
    error =
        heaphook_reloc_patch("getpid", (void *)layered_getpid, (void **)&layer_original, &layer);
    CHECK(error == 0, "layer: %s", heaphook_reloc_strerror(error));
    CHECK(layer_original == fake_getpid, "layer: original is the first patch");
    original_getpid = layer_original;
    CHECK(getpid() == FAKE_PID + 1 && reloc_lib_getpid() == FAKE_PID + 1, "layer: calls");
    CHECK(heaphook_reloc_unpatch(layer) == 0, "layer: unpatch");
    CHECK(getpid() == FAKE_PID && reloc_lib_getpid() == FAKE_PID, "layer: undone");

    /* A symbol of our own library. */
    heaphook_reloc_handle *value_patch = NULL;
    error = heaphook_reloc_patch("reloc_lib_value", (void *)fake_value, NULL, &value_patch);
    CHECK(error == 0, "patch value: %s", heaphook_reloc_strerror(error));
    CHECK(reloc_lib_value() == 7, "patch value: main");
    CHECK(reloc_lib_call_value() == 70, "patch value: lib's call to itself (%d)",
          reloc_lib_call_value());

    /* Undo. */
    CHECK(heaphook_reloc_unpatch(patch) == 0, "unpatch");
    CHECK(heaphook_reloc_unpatch(patch) == HEAPHOOK_RELOC_INVALID_ARG, "unpatch twice");
    CHECK(getpid() == pid, "unpatched: main");
    CHECK(reloc_lib_getpid() == pid, "unpatched: lib");
    int (*f)(void) = handle ? (int (*)(void))dlsym(handle, "reloc_late_getpid") : NULL;
    CHECK(f && f() == pid, "unpatched: late library");
    if (handle) dlclose(handle);
    value = late_getpid(late, &handle);
    CHECK(value == pid, "unpatched: late library loaded again (%d)", value);
    CHECK(heaphook_reloc_unpatch(value_patch) == 0, "unpatch value");
    CHECK(reloc_lib_value() == 1 && reloc_lib_call_value() == 10, "unpatched value");
    CHECK(heaphook_reloc_patched_entries() == 0, "entries left %lu",
          heaphook_reloc_patched_entries());
    CHECK(fake_calls > 0, "fake never called");

    /* Errors. */
    CHECK(heaphook_reloc_patch(NULL, (void *)fake_getpid, NULL, NULL) == HEAPHOOK_RELOC_INVALID_ARG,
          "null symbol");
    CHECK(heaphook_reloc_patch("no_such_function_xyz", (void *)fake_getpid, NULL, NULL) ==
              HEAPHOOK_RELOC_NO_ORIGINAL,
          "no original");

    printf("reloc: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
