/*
 * modules.c — the module map (modules.h), from dl_iterate_phdr: no allocation, no stdio.
 */
#include "modules.h"

#include <link.h>
#include <string.h>
#include <unistd.h>

#include "tracer.h"
#include "trace.h"

#define HH_MODULES_CAP 4096

typedef struct hh_module {
    uintptr_t lo, hi; /* absolute */
} hh_module;

static hh_module hh_modules[HH_MODULES_CAP];
static _Atomic int hh_module_count;
static unsigned long long hh_seen_adds = ~0ull, hh_seen_subs = ~0ull;
static _Atomic int hh_modules_lock;

bool hh_modules_contains(uintptr_t pc) {
    int n = atomic_load_explicit(&hh_module_count, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (pc >= hh_modules[i].lo && pc < hh_modules[i].hi) return true;
    }
    return false;
}

static bool hh_known(uintptr_t lo, uintptr_t hi) {
    int n = atomic_load_explicit(&hh_module_count, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (hh_modules[i].lo == lo && hh_modules[i].hi == hi) return true;
    }
    return false;
}

static size_t hh_build_id(const struct dl_phdr_info *info, const uint8_t **out) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t *end = p + ph->p_memsz;
        size_t align = ph->p_align >= 8 ? 8 : 4;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const uint8_t *name = p + sizeof *nh;
            const uint8_t *desc = name + ((nh->n_namesz + align - 1) & ~(align - 1));
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                *out = desc;
                return nh->n_descsz;
            }
            p = desc + ((nh->n_descsz + align - 1) & ~(align - 1));
        }
    }
    return 0;
}

static int hh_module_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    bool *first = arg;
    if (*first) {
        *first = false;
        if (info->dlpi_adds == hh_seen_adds && info->dlpi_subs == hh_seen_subs) return 1;
        hh_seen_adds = info->dlpi_adds;
        hh_seen_subs = info->dlpi_subs;
    }
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lo) lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
    }
    if (hi == 0) return 0;
    uintptr_t abs_lo = info->dlpi_addr + lo, abs_hi = info->dlpi_addr + hi;
    if (hh_known(abs_lo, abs_hi)) return 0;
    int n = atomic_load_explicit(&hh_module_count, memory_order_relaxed);
    if (n >= HH_MODULES_CAP) return 0;
    char exe[4096];
    const char *path = info->dlpi_name;
    if (path == NULL || path[0] == '\0') {
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[len > 0 ? len : 0] = '\0';
        path = exe;
    }
    const uint8_t *id = NULL;
    size_t id_len = hh_build_id(info, &id);
    if (id_len > 64) id_len = 64;
    size_t path_len = strlen(path);
    if (path_len > 4000) path_len = 4000;
    uint32_t len = (uint32_t)hh_round8(sizeof(hh_rec_module) + id_len + path_len);
    hh_rec_module *m = hh_tracer_reserve(len);
    if (m == NULL) return 0; /* dropped: try again at the next sync */
    m->base = info->dlpi_addr;
    m->lo = lo;
    m->hi = hi;
    m->build_id_len = (uint32_t)id_len;
    m->path_len = (uint32_t)path_len;
    memcpy((uint8_t *)(m + 1), id, id_len);
    memcpy((uint8_t *)(m + 1) + id_len, path, path_len);
    hh_tracer_commit(m, HH_REC_MODULE);
    hh_modules[n].lo = abs_lo;
    hh_modules[n].hi = abs_hi;
    atomic_store_explicit(&hh_module_count, n + 1, memory_order_release);
    return 0;
}

void hh_modules_sync(void) {
    int expected = 0;
    while (!atomic_compare_exchange_weak(&hh_modules_lock, &expected, 1)) expected = 0;
    bool first = true;
    dl_iterate_phdr(hh_module_cb, &first);
    atomic_store(&hh_modules_lock, 0);
}

void hh_modules_reset(void) {
    atomic_store(&hh_module_count, 0);
    atomic_store(&hh_modules_lock, 0);
    hh_seen_adds = hh_seen_subs = ~0ull;
}

typedef struct hh_range_query {
    uintptr_t addr, lo, hi;
    bool found;
} hh_range_query;

static int hh_range_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    hh_range_query *q = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lo) lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
    }
    if (q->addr >= info->dlpi_addr + lo && q->addr < info->dlpi_addr + hi) {
        q->lo = info->dlpi_addr + lo;
        q->hi = info->dlpi_addr + hi;
        q->found = true;
        return 1;
    }
    return 0;
}

bool hh_modules_range_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi) {
    hh_range_query q = {addr, 0, 0, false};
    dl_iterate_phdr(hh_range_cb, &q);
    *lo = q.lo;
    *hi = q.hi;
    return q.found;
}
