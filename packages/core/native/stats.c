/*
 * stats.c — the statistics calls of the malloc family, fed by the backend's get_stats.
 *
 * glibc's mallinfo2 fields are mapped from heaphook_stats like this:
 *
 *   arena    = pool_bytes           ordblks  = free_blocks      smblks, fsmblks = 0
 *   hblks    = mmapped_blocks       hblkhd   = mmapped_bytes    usmblks = peak_used_bytes
 *   uordblks = used_bytes           fordblks = free_bytes       keepcost = largest_free_block
 *
 * mallinfo (int fields) saturates at INT_MAX rather than wrapping. malloc_stats writes to the
 * report fd, not fd 2 (see log.h for why), using the backend's print_stats when it has one.
 */
#include <limits.h>
#include <malloc.h>
#include <string.h>

#include "heaphook/core.h"
#include "heaphook/log.h"
#include "internal.h"

#if !__GLIBC_PREREQ(2, 33)
/* Older headers lack mallinfo2 (glibc 2.33); programs built against newer ones may call it. */
struct mallinfo2 {
    size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
#endif

HH_EXPORT int heaphook_get_stats(heaphook_stats *out) {
    memset(out, 0, sizeof *out);
    if (!hh_backend_is_ready() || hh_backend.get_stats == NULL) return -1;
    return hh_backend.get_stats(out) == 0 ? 0 : -1;
}

HH_EXPORT struct mallinfo2 mallinfo2(void) {
    struct mallinfo2 info;
    memset(&info, 0, sizeof info);
    heaphook_stats stats;
    if (heaphook_get_stats(&stats) != 0) return info;
    info.arena = stats.pool_bytes;
    info.ordblks = stats.free_blocks;
    info.hblks = stats.mmapped_blocks;
    info.hblkhd = stats.mmapped_bytes;
    info.usmblks = stats.peak_used_bytes; /* glibc's old meaning: the peak of bytes in use */
    info.uordblks = stats.used_bytes;
    info.fordblks = stats.free_bytes;
    info.keepcost = stats.largest_free_block;
    return info;
}

static int hh_saturate(size_t value) {
    return value > INT_MAX ? INT_MAX : (int)value;
}

/* mallinfo is deprecated in glibc's header, and still called by old programs. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
HH_EXPORT struct mallinfo mallinfo(void) {
    struct mallinfo2 wide = mallinfo2();
    struct mallinfo info;
    memset(&info, 0, sizeof info);
    info.arena = hh_saturate(wide.arena);
    info.ordblks = hh_saturate(wide.ordblks);
    info.hblks = hh_saturate(wide.hblks);
    info.hblkhd = hh_saturate(wide.hblkhd);
    info.usmblks = hh_saturate(wide.usmblks);
    info.uordblks = hh_saturate(wide.uordblks);
    info.fordblks = hh_saturate(wide.fordblks);
    info.keepcost = hh_saturate(wide.keepcost);
    return info;
}
#pragma GCC diagnostic pop

/* The core's rendering of heaphook_stats, for backends without print_stats. */
static void hh_print_stats(int fd) {
    static const struct {
        const char *label;
        size_t offset;
    } rows[] = {
        {"pool bytes", offsetof(heaphook_stats, pool_bytes)},
        {"used bytes", offsetof(heaphook_stats, used_bytes)},
        {"free bytes", offsetof(heaphook_stats, free_bytes)},
        {"used blocks", offsetof(heaphook_stats, used_blocks)},
        {"free blocks", offsetof(heaphook_stats, free_blocks)},
        {"largest free block", offsetof(heaphook_stats, largest_free_block)},
        {"mmapped bytes", offsetof(heaphook_stats, mmapped_bytes)},
        {"mmapped blocks", offsetof(heaphook_stats, mmapped_blocks)},
        {"pool growths", offsetof(heaphook_stats, growth_count)},
        {"peak used bytes", offsetof(heaphook_stats, peak_used_bytes)},
        {"largest request", offsetof(heaphook_stats, largest_request)},
    };
    char text[1024];
    size_t len = heaphook_formatf(text, sizeof text, "heaphook malloc_stats: backend %s\n",
                                  hh_backend_is_ready() ? hh_backend.name : "(initialising)");
    heaphook_stats stats;
    if (heaphook_get_stats(&stats) != 0) {
        len +=
            heaphook_formatf(text + len, sizeof text - len, "(the backend keeps no statistics)\n");
    } else {
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            size_t value = *(const size_t *)((const char *)&stats + rows[i].offset);
            len += heaphook_formatf(text + len, sizeof text - len, "%s", rows[i].label);
            for (size_t pad = strlen(rows[i].label); pad < 20; pad++) text[len++] = ' ';
            len += heaphook_formatf(text + len, sizeof text - len, "= %14zu\n", value);
        }
    }
    len += heaphook_formatf(text + len, sizeof text - len, "bootstrap arena     = %14zu of %zu\n",
                            hh_bootstrap_used_bytes(), hh_bootstrap_capacity());
    heaphook_write_all(fd, text, len);
}

HH_EXPORT void malloc_stats(void) {
    int fd = heaphook_report_fd();
    if (hh_backend_is_ready() && hh_backend.print_stats != NULL) {
        hh_backend.print_stats(fd);
    } else {
        hh_print_stats(fd);
    }
}

HH_EXPORT int malloc_trim(size_t pad) {
    if (!hh_backend_is_ready() || hh_backend.trim == NULL) return 0;
    return hh_backend.trim(pad);
}

HH_EXPORT int mallopt(int param, int value) {
    if (!hh_backend_is_ready() || hh_backend.mallopt == NULL) return 1;
    return hh_backend.mallopt(param, value);
}
