/*
 * writer_codec.c — the log encoder's compression of a block (FORMAT.md, "Blocks"): zstd, loaded
 * at run time, or deflate, with zlib's memory from a mapping of the writer's own (the writer
 * runs inside the traced process, so never malloc).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "writer_internal.h"

static voidpf hh_zalloc(voidpf opaque, uInt items, uInt size) {
    hh_writer *w = opaque;
    size_t n = ((size_t)items * size + 15) & ~(size_t)15;
    if (w->zarena == NULL) {
        void *m = hh_sys_mmap(NULL, HH_ZARENA_SIZE, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return Z_NULL;
        w->zarena = m;
    }
    if (w->zused + n > HH_ZARENA_SIZE) return Z_NULL;
    void *p = w->zarena + w->zused;
    w->zused += n;
    return p;
}

static void hh_zfree(voidpf opaque, voidpf address) {
    (void)opaque;
    (void)address;
}

/* ---- zstd, loaded at run time -------------------------------------------------------------
 * libzstd.so.1 is on every Debian system (dpkg needs it), but its headers need not be: the
 * few functions used are declared here and found with dlopen. Without it, deflate. */
typedef struct {
    void *(*alloc)(void *opaque, size_t size);
    void (*free)(void *opaque, void *address);
    void *opaque;
} hh_zstd_mem;

typedef struct {
    const void *src;
    size_t size, pos;
} hh_zstd_in;

typedef struct {
    void *dst;
    size_t size, pos;
} hh_zstd_out;

enum { HH_ZSTD_C_LEVEL = 100, HH_ZSTD_E_FLUSH = 1 };

static struct {
    _Atomic int state; /* 0 not tried, 1 loading, 2 ready, 3 unavailable */
    void *(*create)(hh_zstd_mem);
    size_t (*set_param)(void *cctx, int param, int value);
    size_t (*stream)(void *cctx, hh_zstd_out *out, hh_zstd_in *in, int end_op);
    unsigned (*is_error)(size_t code);
} hh_zstd;

bool hh_zstd_ready(void) {
    int state = atomic_load(&hh_zstd.state);
    if (state == 2) return true;
    if (state == 3) return false;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hh_zstd.state, &expected, 1)) {
        while ((state = atomic_load(&hh_zstd.state)) == 1) sched_yield();
        return state == 2;
    }
    void *lib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
        *(void **)&hh_zstd.create = dlsym(lib, "ZSTD_createCCtx_advanced");
        *(void **)&hh_zstd.set_param = dlsym(lib, "ZSTD_CCtx_setParameter");
        *(void **)&hh_zstd.stream = dlsym(lib, "ZSTD_compressStream2");
        *(void **)&hh_zstd.is_error = dlsym(lib, "ZSTD_isError");
    }
    bool ok = hh_zstd.create != NULL && hh_zstd.set_param != NULL && hh_zstd.stream != NULL &&
              hh_zstd.is_error != NULL;
    atomic_store(&hh_zstd.state, ok ? 2 : 3);
    return ok;
}

static void *hh_zstd_alloc(void *opaque, size_t size) {
    return hh_zalloc(opaque, 1, (uInt)size);
}

static void hh_zstd_free(void *opaque, void *address) {
    hh_zfree(opaque, address);
}

void hh_writer_prepare(int codec) {
    if (codec == HH_CODEC_ZSTD) hh_zstd_ready();
}

/* The log's zstd blocks are one stream, flushed at every block, so that a block can refer to
 * what came before it (a pattern seen in one block costs next to nothing in the next). The
 * stored payload is the block's raw length (varint), then the flushed zstd bytes. Returns the
 * stored length, or 0 when zstd failed (the stream is then abandoned for deflate). */
uint32_t hh_zstd_block(hh_writer *w, uint32_t len) {
    if (w->zstd == NULL) {
        hh_zstd_mem mem = {hh_zstd_alloc, hh_zstd_free, w};
        w->zstd = hh_zstd.create(mem);
        if (w->zstd == NULL ||
            hh_zstd.is_error(hh_zstd.set_param(w->zstd, HH_ZSTD_C_LEVEL, HH_ZSTD_LEVEL))) {
            return 0;
        }
    }
    uint32_t head = 0;
    uint64_t v = len;
    while (v >= 0x80) {
        w->zbuf[head++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->zbuf[head++] = (uint8_t)v;
    hh_zstd_out out = {w->zbuf + head, sizeof w->zbuf - head, 0};
    /* Each stream is flushed on its own, so that it ends a zstd block: every zstd block has one
     * set of literal and sequence statistics, which the columns fit far better one at a time
     * than mixed. The first segment is the stream table with the first stream. */
    uint32_t streams = 0;
    for (int s = 0; s < HH_STREAM_COUNT; s++) streams += w->slen[s];
    uint32_t at = 0, cut = len - streams;
    for (int s = 0; s < HH_STREAM_COUNT; s++) {
        cut += w->slen[s];
        if (cut == at) continue;
        hh_zstd_in in = {w->buf + at, cut - at, 0};
        for (;;) {
            size_t left = hh_zstd.stream(w->zstd, &out, &in, HH_ZSTD_E_FLUSH);
            if (hh_zstd.is_error(left)) return 0;
            if (left == 0) break;
            if (out.pos == out.size) return 0; /* cannot happen: zbuf exceeds the bound */
        }
        at = cut;
    }
    return head + (uint32_t)out.pos;
}

/* Deflates the block into zbuf; returns the compressed length, or 0 to store it as it is. */
uint32_t hh_deflate(hh_writer *w, uint32_t len) {
    if (!w->z_ready) {
        memset(&w->z, 0, sizeof w->z);
        w->z.zalloc = hh_zalloc;
        w->z.zfree = hh_zfree;
        w->z.opaque = w;
        if (deflateInit2(&w->z, HH_DEFLATE_LEVEL, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            w->compress = HH_CODEC_NONE;
            return 0;
        }
        w->z_ready = true;
    }
    deflateReset(&w->z);
    w->z.next_in = w->buf;
    w->z.avail_in = len;
    w->z.next_out = w->zbuf;
    w->z.avail_out = sizeof w->zbuf;
    if (deflate(&w->z, Z_FINISH) != Z_STREAM_END) return 0;
    uint32_t n = (uint32_t)(sizeof w->zbuf - w->z.avail_out);
    return n < len ? n : 0;
}
