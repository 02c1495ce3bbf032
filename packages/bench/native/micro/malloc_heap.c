/*
 * malloc_heap.c — bench_addon.node: the process's own malloc behind the interface of
 * @heaphook/tlsf's TlsfHeap, so that `bench:micro` runs every case against TLSF and against
 * malloc with the same cost per operation (one N-API call):
 *
 *   new MallocHeap()            the process's malloc (glibc, or whatever is preloaded)
 *   alloc(size, align = 1)      malloc / posix_memalign → the address as a number, or null
 *   free(address)               free
 *   realloc(address, size)      realloc → the new address, or null (the block is kept)
 *   usableSize(address)         malloc_usable_size
 *   calls                       allocation-family calls made through this heap (a getter)
 *
 * Addresses are exact in a double (user space is below 2^47 on x86-64 and aarch64).
 */
#include <malloc.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct malloc_heap {
    double calls;
} malloc_heap;

#define CHECK(call)                         \
    do {                                    \
        if ((call) != napi_ok) return NULL; \
    } while (0)

/* this, its malloc_heap and up to two numeric arguments (missing ones stay at their default). */
static malloc_heap *unwrap(napi_env env, napi_callback_info info, double *args, size_t want) {
    size_t argc = 2;
    napi_value argv[2], self;
    void *data = NULL;
    if (napi_get_cb_info(env, info, &argc, argv, &self, NULL) != napi_ok) return NULL;
    if (napi_unwrap(env, self, &data) != napi_ok) return NULL;
    for (size_t i = 0; i < want && i < argc; i++) {
        napi_valuetype type;
        if (napi_typeof(env, argv[i], &type) == napi_ok && type == napi_number)
            napi_get_value_double(env, argv[i], &args[i]);
    }
    return data;
}

static napi_value address_or_null(napi_env env, void *p) {
    napi_value out;
    if (p == NULL) {
        napi_get_null(env, &out);
    } else {
        napi_create_double(env, (double)(uintptr_t)p, &out);
    }
    return out;
}

static napi_value heap_alloc(napi_env env, napi_callback_info info) {
    double args[2] = {1, 1};
    malloc_heap *h = unwrap(env, info, args, 2);
    if (h == NULL) return NULL;
    size_t size = (size_t)args[0], align = (size_t)args[1];
    void *p = NULL;
    h->calls++;
    if (align <= 16) {
        p = malloc(size);
    } else if (posix_memalign(&p, align, size) != 0) {
        p = NULL;
    }
    return address_or_null(env, p);
}

static napi_value heap_free(napi_env env, napi_callback_info info) {
    double args[1] = {0};
    malloc_heap *h = unwrap(env, info, args, 1);
    if (h == NULL) return NULL;
    h->calls++;
    free((void *)(uintptr_t)args[0]);
    return NULL;
}

static napi_value heap_realloc(napi_env env, napi_callback_info info) {
    double args[2] = {0, 1};
    malloc_heap *h = unwrap(env, info, args, 2);
    if (h == NULL) return NULL;
    h->calls++;
    return address_or_null(env, realloc((void *)(uintptr_t)args[0], (size_t)args[1]));
}

static napi_value heap_usable_size(napi_env env, napi_callback_info info) {
    double args[1] = {0};
    malloc_heap *h = unwrap(env, info, args, 1);
    if (h == NULL) return NULL;
    napi_value out;
    CHECK(napi_create_double(env, (double)malloc_usable_size((void *)(uintptr_t)args[0]), &out));
    return out;
}

static napi_value heap_calls(napi_env env, napi_callback_info info) {
    malloc_heap *h = unwrap(env, info, NULL, 0);
    if (h == NULL) return NULL;
    napi_value out;
    CHECK(napi_create_double(env, h->calls, &out));
    return out;
}

static void heap_finalize(napi_env env, void *data, void *hint) {
    (void)env, (void)hint;
    free(data);
}

static napi_value heap_new(napi_env env, napi_callback_info info) {
    napi_value self;
    CHECK(napi_get_cb_info(env, info, NULL, NULL, &self, NULL));
    malloc_heap *h = calloc(1, sizeof *h);
    if (h == NULL) {
        napi_throw_error(env, NULL, "MallocHeap: out of memory");
        return NULL;
    }
    CHECK(napi_wrap(env, self, h, heap_finalize, NULL, NULL));
    return self;
}

static napi_value init(napi_env env, napi_value exports) {
    napi_property_descriptor methods[] = {
        {"alloc", NULL, heap_alloc, NULL, NULL, NULL, napi_default, NULL},
        {"free", NULL, heap_free, NULL, NULL, NULL, napi_default, NULL},
        {"realloc", NULL, heap_realloc, NULL, NULL, NULL, napi_default, NULL},
        {"usableSize", NULL, heap_usable_size, NULL, NULL, NULL, napi_default, NULL},
        {"calls", NULL, NULL, heap_calls, NULL, NULL, napi_default, NULL},
    };
    napi_value ctor;
    CHECK(napi_define_class(env, "MallocHeap", NAPI_AUTO_LENGTH, heap_new, NULL,
                            sizeof methods / sizeof methods[0], methods, &ctor));
    CHECK(napi_set_named_property(env, exports, "MallocHeap", ctor));
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
