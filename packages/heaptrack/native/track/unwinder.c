/*
 * unwinder.c — the cached CFI unwinder (unwinder.h).
 *
 * Contents:
 *   1. The rule cache (lock-free lookups, inserts under a try-lock)
 *   2. Finding the FDE of an address (.eh_frame_hdr binary search table)
 *   3. Running the CFA program up to the address -> a rule
 *   4. The walk, and the _Unwind_Backtrace fallback
 */
#include "unwinder.h"

#include <dlfcn.h>
#include <pthread.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>
#include <string.h>
#include <sys/mman.h>
#include <unwind.h>

#include "trace.h"

static uintptr_t hh_skip_lo, hh_skip_hi;
/* A second range left out of stacks: ucm-hooks' library, between a mapping call and vm.c's
 * handler (hh_unwind_skip_also). */
static uintptr_t hh_skip2_lo, hh_skip2_hi;
static bool hh_fast_enabled;
static _Atomic uint64_t hh_slow_walks;

static bool hh_skipped(uintptr_t pc) {
    return (pc >= hh_skip_lo && pc < hh_skip_hi) || (pc >= hh_skip2_lo && pc < hh_skip2_hi);
}

void hh_unwind_skip_also(uintptr_t lo, uintptr_t hi) {
    hh_skip2_lo = lo;
    hh_skip2_hi = hi;
}

/* ---- 4b. The fallback ------------------------------------------------------------------ */

typedef struct hh_bt {
    uintptr_t *pcs;
    int n, max;
} hh_bt;

static _Unwind_Reason_Code hh_bt_step(struct _Unwind_Context *ctx, void *arg) {
    hh_bt *bt = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    if (ip == 0) return _URC_END_OF_STACK;
    if (hh_skipped(ip)) return _URC_NO_REASON;
    bt->pcs[bt->n++] = ip;
    return bt->n >= bt->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

static int hh_unwind_slow(uintptr_t *pcs, int max) {
    atomic_fetch_add_explicit(&hh_slow_walks, 1, memory_order_relaxed);
    hh_bt bt = {pcs, 0, max};
    _Unwind_Backtrace(hh_bt_step, &bt);
    return bt.n;
}

uint64_t hh_unwind_slow_walks(void) {
    return atomic_load(&hh_slow_walks);
}

#if defined(__x86_64__)

/* ---- 1. The rule cache ------------------------------------------------------------------- */

/* A rule, packed: bits 0-1 kind, bit 2 CFA is rbp-based (else rsp), bit 3 rbp saved,
 * bits 8-39 CFA offset, bits 40-55 rbp save offset from the CFA (signed),
 * bits 56-63 return address offset from the CFA (signed). */
enum { HH_RULE_NONE = 0, HH_RULE_OK = 1, HH_RULE_END = 2, HH_RULE_BAD = 3 };
/* With HH_RULE_END: the address has no unwind table (JIT code, hand-written assembly), as
 * opposed to the outermost frame; the walk may then follow the frame pointer chain. */
#define HH_RULE_NOFDE 16u
#define HH_MAX_FP_STEPS 64
#define HH_RULE_KIND(r) ((unsigned)((r)&3))
#define HH_RULE_CFA_BP(r) (((r) >> 2) & 1)
#define HH_RULE_BP_SAVED(r) (((r) >> 3) & 1)
#define HH_RULE_CFA_OFF(r) ((uint32_t)((r) >> 8))
#define HH_RULE_BP_OFF(r) ((int16_t)((r) >> 40))
#define HH_RULE_RA_OFF(r) ((int8_t)((r) >> 56))

typedef struct hh_rule_slot {
    _Atomic uintptr_t pc;
    _Atomic uint64_t rule;
} hh_rule_slot;

#define HH_RULES_BITS 17
#define HH_RULES_CAP (1u << HH_RULES_BITS)
#define HH_RULES_PROBES 32
#define HH_RULES_TABLES_MAX 64

static _Atomic(hh_rule_slot *) hh_rules;
static _Atomic int hh_rules_lock;
static _Atomic int hh_rules_tables;

static hh_rule_slot *hh_rules_new_table(void) {
    if (atomic_fetch_add(&hh_rules_tables, 1) >= HH_RULES_TABLES_MAX) return NULL;
    void *p = hh_sys_mmap(NULL, sizeof(hh_rule_slot) * HH_RULES_CAP, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline uint32_t hh_rule_hash(uintptr_t pc) {
    return (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> (64 - HH_RULES_BITS));
}

static inline uint64_t hh_rule_lookup(hh_rule_slot *t, uintptr_t pc) {
    uint32_t i = hh_rule_hash(pc);
    for (int n = 0; n < HH_RULES_PROBES; n++, i = (i + 1) & (HH_RULES_CAP - 1)) {
        uintptr_t k = atomic_load_explicit(&t[i].pc, memory_order_acquire);
        if (k == pc) return atomic_load_explicit(&t[i].rule, memory_order_relaxed);
        if (k == 0) return 0;
    }
    return 0;
}

static void hh_rule_insert(hh_rule_slot *t, uintptr_t pc, uint64_t rule) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hh_rules_lock, &expected, 1)) return; /* busy: skip */
    uint32_t i = hh_rule_hash(pc);
    for (int n = 0; n < HH_RULES_PROBES; n++, i = (i + 1) & (HH_RULES_CAP - 1)) {
        uintptr_t k = atomic_load_explicit(&t[i].pc, memory_order_relaxed);
        if (k == pc) break;
        if (k == 0) {
            atomic_store_explicit(&t[i].rule, rule, memory_order_relaxed);
            atomic_store_explicit(&t[i].pc, pc, memory_order_release);
            break;
        }
    }
    atomic_store_explicit(&hh_rules_lock, 0, memory_order_release);
}

void hh_unwind_postfork_child(void) {
    atomic_store_explicit(&hh_rules_lock, 0, memory_order_release);
}

void hh_unwind_invalidate(void) {
    if (!hh_fast_enabled) return;
    hh_rule_slot *fresh = hh_rules_new_table();
    /* The old table stays mapped: a thread may be reading it right now. */
    atomic_store_explicit(&hh_rules, fresh, memory_order_release);
}

/* ---- 2. Finding the FDE ------------------------------------------------------------------ */

enum {
    DW_EH_PE_absptr = 0x00,
    DW_EH_PE_uleb128 = 0x01,
    DW_EH_PE_udata2 = 0x02,
    DW_EH_PE_udata4 = 0x03,
    DW_EH_PE_udata8 = 0x04,
    DW_EH_PE_sleb128 = 0x09,
    DW_EH_PE_sdata2 = 0x0a,
    DW_EH_PE_sdata4 = 0x0b,
    DW_EH_PE_sdata8 = 0x0c,
    DW_EH_PE_pcrel = 0x10,
    DW_EH_PE_datarel = 0x30,
    DW_EH_PE_indirect = 0x80,
    DW_EH_PE_omit = 0xff,
};

static uint64_t hh_uleb(const uint8_t **p, const uint8_t *end) {
    uint64_t v = 0;
    unsigned shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
    }
    return v;
}

static int64_t hh_sleb(const uint8_t **p, const uint8_t *end) {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    while (*p < end) {
        b = *(*p)++;
        if (shift < 64) v |= (int64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
    }
    if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
    return v;
}

/* Reads a pointer in encoding enc; datarel is relative to data_base. ok is cleared on an
 * encoding we do not know. */
static uintptr_t hh_read_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc,
                                 uintptr_t data_base, bool *ok) {
    if (enc == DW_EH_PE_omit) return 0;
    const uint8_t *start = *p;
    uintptr_t v;
    switch (enc & 0x0f) {
        case DW_EH_PE_absptr:
        case DW_EH_PE_udata8:
        case DW_EH_PE_sdata8: {
            uint64_t x;
            memcpy(&x, *p, 8);
            *p += 8;
            v = (uintptr_t)x;
            break;
        }
        case DW_EH_PE_udata4: {
            uint32_t x;
            memcpy(&x, *p, 4);
            *p += 4;
            v = x;
            break;
        }
        case DW_EH_PE_sdata4: {
            int32_t x;
            memcpy(&x, *p, 4);
            *p += 4;
            v = (uintptr_t)(intptr_t)x;
            break;
        }
        case DW_EH_PE_udata2: {
            uint16_t x;
            memcpy(&x, *p, 2);
            *p += 2;
            v = x;
            break;
        }
        case DW_EH_PE_sdata2: {
            int16_t x;
            memcpy(&x, *p, 2);
            *p += 2;
            v = (uintptr_t)(intptr_t)x;
            break;
        }
        case DW_EH_PE_uleb128:
            v = (uintptr_t)hh_uleb(p, end);
            break;
        case DW_EH_PE_sleb128:
            v = (uintptr_t)hh_sleb(p, end);
            break;
        default:
            *ok = false;
            return 0;
    }
    switch (enc & 0x70) {
        case 0:
            break;
        case DW_EH_PE_pcrel:
            v += (uintptr_t)start;
            break;
        case DW_EH_PE_datarel:
            v += data_base;
            break;
        default:
            *ok = false;
            return 0;
    }
    if (enc & DW_EH_PE_indirect) v = *(const uintptr_t *)v;
    return v;
}

/* The FDE covering pc from .eh_frame_hdr, or NULL. */
static const uint8_t *hh_find_fde(const uint8_t *hdr, uintptr_t pc, bool *ok) {
    if (hdr[0] != 1) {
        *ok = false;
        return NULL;
    }
    uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
    const uint8_t *p = hdr + 4, *end = hdr + 64;
    hh_read_encoded(&p, end, ptr_enc, (uintptr_t)hdr, ok);
    uintptr_t count = hh_read_encoded(&p, end, count_enc, (uintptr_t)hdr, ok);
    if (!*ok || table_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4) || count == 0) {
        *ok = false;
        return NULL;
    }
    const int32_t *table = (const int32_t *)p;
    uintptr_t base = (uintptr_t)hdr;
    size_t lo = 0, hi = count;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (base + (intptr_t)table[2 * mid] <= pc) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if (base + (intptr_t)table[2 * lo] > pc) return NULL;
    return (const uint8_t *)(base + (intptr_t)table[2 * lo + 1]);
}

/* ---- 3. The CFA program ------------------------------------------------------------------ */

enum { HH_REG_RBP = 6, HH_REG_RSP = 7, HH_REG_RA = 16 };
enum { HH_REG_SAME = 0, HH_REG_OFFSET = 1, HH_REG_UNDEF = 2, HH_REG_OTHER = 3 };

typedef struct hh_cfa_state {
    int cfa_reg;
    int64_t cfa_off;
    int bp_how, ra_how;
    int64_t bp_off, ra_off;
} hh_cfa_state;

typedef struct hh_cie {
    int64_t data_align;
    uint64_t code_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    bool has_z;
    bool signal;
    const uint8_t *insns, *end;
} hh_cie;

static bool hh_parse_cie(const uint8_t *cie, hh_cie *out) {
    uint64_t len = *(const uint32_t *)cie;
    const uint8_t *p = cie + 4;
    if (len == 0xffffffffu) return false; /* 64-bit DWARF: not produced for x86-64 user code */
    const uint8_t *end = p + len;
    if (*(const uint32_t *)p != 0) return false; /* not a CIE */
    p += 4;
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    while (p < end && *p) p++;
    p++;
    bool ok = true;
    memset(out, 0, sizeof *out);
    out->fde_enc = DW_EH_PE_absptr;
    if (aug[0] == 'e' && aug[1] == 'h') return false;
    out->code_align = hh_uleb(&p, end);
    out->data_align = hh_sleb(&p, end);
    out->ra_reg = version == 1 ? *p++ : hh_uleb(&p, end);
    if (aug[0] == 'z') {
        out->has_z = true;
        uint64_t aug_len = hh_uleb(&p, end);
        const uint8_t *q = p;
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'R') {
                out->fde_enc = *q++;
            } else if (*a == 'P') {
                uint8_t enc = *q++;
                hh_read_encoded(&q, end, enc & 0x7f, 0, &ok); /* skip, do not dereference */
            } else if (*a == 'L') {
                q++;
            } else if (*a == 'S') {
                out->signal = true;
            } else if (*a == 'B' || *a == 'G') {
            } else {
                break;
            }
        }
        p += aug_len;
    }
    out->insns = p;
    out->end = end;
    return ok && out->ra_reg == HH_REG_RA;
}

/* Runs instructions [p, end) while loc <= target. Returns false on something unsupported. */
static bool hh_run_cfa(const uint8_t *p, const uint8_t *end, uintptr_t loc, uintptr_t target,
                       const hh_cie *cie, hh_cfa_state *s, const hh_cfa_state *init) {
    hh_cfa_state stack[8];
    int depth = 0;
    bool ok = true;
    while (p < end) {
        uint8_t op = *p++;
        uint8_t high = op & 0xc0, low = op & 0x3f;
        uint64_t reg;
        int64_t off;
        if (high == 0x40) { /* advance_loc */
            loc += low * cie->code_align;
            if (loc > target) return true;
            continue;
        }
        if (high == 0x80) { /* offset */
            reg = low;
            off = (int64_t)hh_uleb(&p, end) * cie->data_align;
            goto set_offset;
        }
        if (high == 0xc0) { /* restore */
            reg = low;
            goto restore;
        }
        switch (op) {
            case 0x00: /* nop */
                break;
            case 0x01: /* set_loc */
                loc = hh_read_encoded(&p, end, cie->fde_enc, 0, &ok);
                if (!ok) return false;
                if (loc > target) return true;
                break;
            case 0x02:
                loc += *p++ * cie->code_align;
                if (loc > target) return true;
                break;
            case 0x03: {
                uint16_t d;
                memcpy(&d, p, 2);
                p += 2;
                loc += d * cie->code_align;
                if (loc > target) return true;
                break;
            }
            case 0x04: {
                uint32_t d;
                memcpy(&d, p, 4);
                p += 4;
                loc += d * cie->code_align;
                if (loc > target) return true;
                break;
            }
            case 0x05: /* offset_extended */
                reg = hh_uleb(&p, end);
                off = (int64_t)hh_uleb(&p, end) * cie->data_align;
                goto set_offset;
            case 0x11: /* offset_extended_sf */
                reg = hh_uleb(&p, end);
                off = hh_sleb(&p, end) * cie->data_align;
                goto set_offset;
            case 0x06: /* restore_extended */
                reg = hh_uleb(&p, end);
                goto restore;
            case 0x07: /* undefined */
                reg = hh_uleb(&p, end);
                if (reg == HH_REG_RA) s->ra_how = HH_REG_UNDEF;
                if (reg == HH_REG_RBP) s->bp_how = HH_REG_UNDEF;
                break;
            case 0x08: /* same_value */
                reg = hh_uleb(&p, end);
                if (reg == HH_REG_RBP) s->bp_how = HH_REG_SAME;
                if (reg == HH_REG_RA) s->ra_how = HH_REG_OTHER;
                break;
            case 0x09: /* register */
                reg = hh_uleb(&p, end);
                hh_uleb(&p, end);
                if (reg == HH_REG_RBP) s->bp_how = HH_REG_OTHER;
                if (reg == HH_REG_RA) s->ra_how = HH_REG_OTHER;
                break;
            case 0x0a: /* remember_state */
                if (depth == 8) return false;
                stack[depth++] = *s;
                break;
            case 0x0b: /* restore_state */
                if (depth == 0) return false;
                *s = stack[--depth];
                break;
            case 0x0c: /* def_cfa */
                s->cfa_reg = (int)hh_uleb(&p, end);
                s->cfa_off = (int64_t)hh_uleb(&p, end);
                break;
            case 0x12: /* def_cfa_sf */
                s->cfa_reg = (int)hh_uleb(&p, end);
                s->cfa_off = hh_sleb(&p, end) * cie->data_align;
                break;
            case 0x0d: /* def_cfa_register */
                s->cfa_reg = (int)hh_uleb(&p, end);
                break;
            case 0x0e: /* def_cfa_offset */
                s->cfa_off = (int64_t)hh_uleb(&p, end);
                break;
            case 0x13: /* def_cfa_offset_sf */
                s->cfa_off = hh_sleb(&p, end) * cie->data_align;
                break;
            case 0x0f: /* def_cfa_expression */
                s->cfa_reg = -1;
                p += hh_uleb(&p, end);
                break;
            case 0x10: /* expression */
            case 0x16: /* val_expression */
                reg = hh_uleb(&p, end);
                p += hh_uleb(&p, end);
                if (reg == HH_REG_RBP) s->bp_how = HH_REG_OTHER;
                if (reg == HH_REG_RA) s->ra_how = HH_REG_OTHER;
                break;
            case 0x14: /* val_offset */
            case 0x15: /* val_offset_sf */
                reg = hh_uleb(&p, end);
                if (op == 0x14) {
                    hh_uleb(&p, end);
                } else {
                    hh_sleb(&p, end);
                }
                if (reg == HH_REG_RBP) s->bp_how = HH_REG_OTHER;
                if (reg == HH_REG_RA) s->ra_how = HH_REG_OTHER;
                break;
            case 0x2e: /* GNU_args_size */
                hh_uleb(&p, end);
                break;
            case 0x2f: /* GNU_negative_offset_extended */
                reg = hh_uleb(&p, end);
                off = -(int64_t)hh_uleb(&p, end) * cie->data_align;
                goto set_offset;
            default:
                return false;
        }
        continue;
    set_offset:
        if (reg == HH_REG_RBP) {
            s->bp_how = HH_REG_OFFSET;
            s->bp_off = off;
        } else if (reg == HH_REG_RA) {
            s->ra_how = HH_REG_OFFSET;
            s->ra_off = off;
        }
        continue;
    restore:
        if (init == NULL) return false; /* restore inside the CIE itself */
        if (reg == HH_REG_RBP) {
            s->bp_how = init->bp_how;
            s->bp_off = init->bp_off;
        } else if (reg == HH_REG_RA) {
            s->ra_how = init->ra_how;
            s->ra_off = init->ra_off;
        }
    }
    return true;
}

/* The rule for stepping out of the frame executing at target. */
static uint64_t hh_compute_rule(uintptr_t target) {
    struct dl_find_object dlfo;
    if (_dl_find_object((void *)target, &dlfo) != 0) return HH_RULE_END | HH_RULE_NOFDE;
    if (dlfo.dlfo_eh_frame == NULL) return HH_RULE_END | HH_RULE_NOFDE;
    bool ok = true;
    const uint8_t *fde = hh_find_fde(dlfo.dlfo_eh_frame, target, &ok);
    if (!ok) return HH_RULE_BAD;
    if (fde == NULL) return HH_RULE_END | HH_RULE_NOFDE;
    uint32_t len = *(const uint32_t *)fde;
    if (len == 0 || len == 0xffffffffu) return HH_RULE_BAD;
    const uint8_t *p = fde + 4, *end = p + len;
    uint32_t cie_off = *(const uint32_t *)p;
    const uint8_t *cie_ptr = p - cie_off;
    p += 4;
    hh_cie cie;
    if (!hh_parse_cie(cie_ptr, &cie) || cie.signal) return HH_RULE_BAD;
    uintptr_t pc_begin = hh_read_encoded(&p, end, cie.fde_enc, 0, &ok);
    uintptr_t pc_range = hh_read_encoded(&p, end, cie.fde_enc & 0x0f, 0, &ok);
    if (!ok) return HH_RULE_BAD;
    if (target < pc_begin || target >= pc_begin + pc_range) return HH_RULE_END | HH_RULE_NOFDE;
    if (cie.has_z) {
        uint64_t aug_len = hh_uleb(&p, end);
        p += aug_len;
    }
    hh_cfa_state s = {HH_REG_RSP, 8, HH_REG_SAME, HH_REG_OFFSET, 0, -8};
    if (!hh_run_cfa(cie.insns, cie.end, 0, UINTPTR_MAX, &cie, &s, NULL)) return HH_RULE_BAD;
    hh_cfa_state init = s;
    if (!hh_run_cfa(p, end, pc_begin, target, &cie, &s, &init)) return HH_RULE_BAD;
    if (s.ra_how == HH_REG_UNDEF) return HH_RULE_END; /* the outermost frame (_start) */
    if (s.ra_how != HH_REG_OFFSET || s.bp_how == HH_REG_OTHER) return HH_RULE_BAD;
    if (s.cfa_reg != HH_REG_RSP && s.cfa_reg != HH_REG_RBP) return HH_RULE_BAD;
    if (s.cfa_off < 0 || s.cfa_off > 0x7fffffff || s.ra_off < -128 || s.ra_off > 127 ||
        s.bp_off < -32768 || s.bp_off > 32767) {
        return HH_RULE_BAD;
    }
    uint64_t rule = HH_RULE_OK;
    if (s.cfa_reg == HH_REG_RBP) rule |= 4;
    if (s.bp_how == HH_REG_OFFSET) rule |= 8 | ((uint64_t)(uint16_t)(int16_t)s.bp_off << 40);
    rule |= (uint64_t)(uint32_t)s.cfa_off << 8;
    rule |= (uint64_t)(uint8_t)(int8_t)s.ra_off << 56;
    return rule;
}

/* ---- 4. The stack's extent ------------------------------------------------------------- */

/* The top of the calling thread's stack: the end of the mapping that holds sp, read once per
 * thread from /proc/self/maps (no allocation, no lock). Every read of the walk stays inside
 * [sp, top), so a wrong unwind rule can end a stack early but never fault. */
static HH_TLS uintptr_t t_stack_lo, t_stack_top;

static uintptr_t hh_parse_hex(const char **p, const char *end) {
    uintptr_t v = 0;
    while (*p < end) {
        char c = **p;
        unsigned d;
        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            d = (unsigned)(c - 'a' + 10);
        } else {
            break;
        }
        v = v * 16 + d;
        (*p)++;
    }
    return v;
}

static uintptr_t hh_find_stack_top(uintptr_t sp, uintptr_t *lo_out) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096];
    size_t have = 0;
    uintptr_t top = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n <= 0) break;
        have += (size_t)n;
        const char *line = buf, *end = buf + have;
        for (;;) {
            const char *nl = memchr(line, '\n', (size_t)(end - line));
            if (nl == NULL) break;
            const char *p = line;
            uintptr_t lo = hh_parse_hex(&p, nl);
            if (p < nl && *p == '-') p++;
            uintptr_t hi = hh_parse_hex(&p, nl);
            if (sp >= lo && sp < hi) {
                top = hi;
                *lo_out = lo;
            }
            line = nl + 1;
        }
        if (top != 0) break;
        have = (size_t)(end - line);
        memmove(buf, line, have);
    }
    close(fd);
    return top;
}

/* ---- 5. The walk cache ------------------------------------------------------------------
 *
 * A program allocates from the same places over and over, so a thread's walks repeat: most of
 * a stack is the same as the last time. Each thread keeps the frames of its previous walk:
 * for each step, the CFA reached, the return address and rbp after it, where those two were
 * read (their slots on the stack) and the frame-pointer steps taken so far. A step's result
 * depends only on its inputs (sp, rbp, the return address, and the cached rule of that
 * address), so when a new walk reaches a frame equal to cached frame j (same CFA, return
 * address and rbp), the rest of the walk is the cached one for as long as each outer frame's
 * slots still hold the values read last time: one load and compare per frame instead of a
 * rule lookup and a step. The rules only change when code is unloaded (hh_unwind_invalidate
 * installs a new table), so a cache is used only with the table it was made with.
 *
 * The cache is anchored at its outer end: the outermost frame cached sits in the last slot,
 * the innermost at `base`. A walk that joins the cache at slot j writes only its own new inner
 * frames (kept in a scratch array until then) into the slots before j; the outer frames, most
 * of a deep stack, stay where they are, checked in place and never copied.
 *
 * The caches live outside static TLS (which must stay small for dlopen, see stacks.c): a
 * fixed pool of HH_WALK_POOL slabs, claimed by a thread on its first walk and given back by a
 * pthread key destructor when it exits. A thread that finds the pool empty walks uncached. */

#define HH_WALK_FRAMES 64 /* frames cached per walk; deeper stacks walk on from there */
#define HH_WALK_POOL 1024 /* threads with a cache at once */

typedef struct hh_walk_frame {
    uintptr_t cfa;     /* sp after the step */
    uintptr_t ra;      /* the return address read */
    uintptr_t bp;      /* rbp after the step */
    uintptr_t ra_slot; /* where ra was read */
    uintptr_t bp_slot; /* where rbp was read; 0: carried over from the frame before */
    uint32_t fp_steps;
    uint32_t listed; /* 1: ra is listed; 0: it is the tracer's own (hh_skipped) */
} hh_walk_frame;

typedef struct hh_walk_cache {
    const void *table; /* the rule table the walks used; NULL: no cache */
    uintptr_t top;     /* the stack top they used */
    int base;          /* slot of the innermost frame cached; frames: f[base .. HH_WALK_FRAMES) */
    bool complete;     /* the walk ended by itself after the last slot's frame */
    hh_walk_frame f[HH_WALK_FRAMES];
} hh_walk_cache;

typedef struct hh_walk_slab {
    _Atomic int used;
    hh_walk_cache cache;
    hh_walk_frame scratch[HH_WALK_FRAMES]; /* a walk's own frames, innermost first */
} hh_walk_slab;

#define HH_WALK_NONE ((hh_walk_slab *)1) /* this thread walks uncached */

static hh_walk_slab *hh_walk_pool;
static pthread_key_t hh_walk_key;
static HH_TLS hh_walk_slab *t_walk;
/* The pcs of this thread's last walk were exactly the listed frames of its cache, slots
 * base .. HH_WALK_FRAMES (that walk ended by itself there, not cut short by max, not slow). */
static HH_TLS bool t_walk_exact;

static void hh_walk_release(void *slab) {
    if (slab != NULL) atomic_store_explicit(&((hh_walk_slab *)slab)->used, 0, memory_order_release);
}

static void hh_walk_pool_init(void) {
    if (hh_walk_pool != NULL) return;
    void *p = hh_sys_mmap(NULL, sizeof(hh_walk_slab) * HH_WALK_POOL, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    if (pthread_key_create(&hh_walk_key, hh_walk_release) != 0) {
        hh_sys_munmap(p, sizeof(hh_walk_slab) * HH_WALK_POOL);
        return;
    }
    hh_walk_pool = p;
}

/* This thread's slab, claimed on first use; NULL when it walks uncached. */
static hh_walk_slab *hh_walk_slab_of_thread(void) {
    hh_walk_slab *slab = t_walk;
    if (HH_LIKELY(slab != NULL)) return slab == HH_WALK_NONE ? NULL : slab;
    t_walk = HH_WALK_NONE;
    if (hh_walk_pool == NULL) return NULL;
    for (int i = 0; i < HH_WALK_POOL; i++) {
        hh_walk_slab *s = &hh_walk_pool[i];
        int expected = 0;
        if (atomic_load_explicit(&s->used, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong(&s->used, &expected, 1)) {
            continue;
        }
        /* glibc keeps the first 32 keys' values inside the thread: no allocation here */
        if (pthread_setspecific(hh_walk_key, s) != 0) {
            hh_walk_release(s);
            return NULL;
        }
        s->cache.table = NULL;
        t_walk = s;
        return s;
    }
    return NULL;
}

/* Do the slots of cached frames [from, HH_WALK_FRAMES) still hold what the walk read? Lists
 * their return addresses into pcs[n ..] meanwhile, up to max; *listed_to is where the listing
 * ended and *stop the first frame not listed (max reached), or HH_WALK_FRAMES. What it writes
 * counts only when it returns true. */
static bool hh_walk_check_outer(const hh_walk_cache *c, int from, uintptr_t *pcs, int n, int max,
                                int *listed_to, int *stop) {
    int i = from;
    for (; i < HH_WALK_FRAMES && n < max; i++) {
        const hh_walk_frame *f = &c->f[i];
        if (*(const uintptr_t *)f->ra_slot != f->ra) return false;
        if (f->bp_slot != 0 && *(const uintptr_t *)f->bp_slot != f->bp) return false;
        pcs[n] = f->ra;
        n += (int)f->listed;
    }
    *listed_to = n;
    *stop = i;
    for (; i < HH_WALK_FRAMES; i++) { /* max reached: only check the rest */
        const hh_walk_frame *f = &c->f[i];
        if (*(const uintptr_t *)f->ra_slot != f->ra) return false;
        if (f->bp_slot != 0 && *(const uintptr_t *)f->bp_slot != f->bp) return false;
    }
    return true;
}

/* Puts a walk's frames scratch[0 .. count) (innermost first) into the cache's slots ending
 * before slot `end`, dropping the innermost ones that do not fit. */
static void hh_walk_cache_put(hh_walk_cache *c, const hh_walk_frame *scratch, int count, int end) {
    int from = count > end ? count - end : 0;
    c->base = end - (count - from);
    memcpy(&c->f[c->base], &scratch[from], (size_t)(count - from) * sizeof scratch[0]);
}

/* ---- 6. The walk ------------------------------------------------------------------------- */

/* Walks from a frame executing at pc with these sp and rbp (exact pc: not a return address).
 * It reads the last walk's cache (prev) and writes its own (next). *same_outer: see
 * hh_unwind_from; left as it is unless known. */
static int hh_walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *pcs, int max,
                   int *same_outer) {
    const bool last_exact = t_walk_exact;
    t_walk_exact = false; /* until this walk ends where it can say so */
    hh_rule_slot *table = atomic_load_explicit(&hh_rules, memory_order_acquire);
    uintptr_t target = pc; /* the first frame is exact, the others are return addresses */
    /* (re)read when sp is outside the known mapping: first use, or a signal's alternate stack */
    if (HH_UNLIKELY(sp < t_stack_lo || sp >= t_stack_top)) {
        t_stack_top = hh_find_stack_top(sp, &t_stack_lo);
    }
    uintptr_t top = t_stack_top;
    if (top <= sp) return hh_unwind_slow(pcs, max);
    hh_walk_slab *slab = hh_walk_slab_of_thread();
    hh_walk_cache *cache = slab != NULL ? &slab->cache : NULL;
    hh_walk_frame *scratch = slab != NULL ? slab->scratch : NULL;
    /* j: the slot of the cache the walk compares with (it only moves outward) */
    int j = HH_WALK_FRAMES;
    if (cache != NULL && cache->table == table && cache->top == top) j = cache->base;
    int n = 0, k = 0; /* pcs written, frames stepped */
    uint32_t fp_steps = 0;
    bool complete = true;
    for (; k < 512; k++) {
        if (n >= max) {
            complete = false;
            break;
        }
        uint64_t rule = hh_rule_lookup(table, target);
        if (rule == 0) {
            rule = hh_compute_rule(target);
            hh_rule_insert(table, target, rule);
        }
        unsigned kind = HH_RULE_KIND(rule);
        uintptr_t ra, ra_slot, bp_slot = 0;
        if (kind == HH_RULE_END) {
            /* Code without unwind tables, such as V8's JIT code and builtins, keeps rbp as a
             * frame pointer: follow that chain (inside the stack only) until code with tables
             * is reached again. */
            if (!(rule & HH_RULE_NOFDE) || ++fp_steps > HH_MAX_FP_STEPS) break;
            if (bp < sp || (bp & 7) != 0 || bp + 16 > top) break;
            ra_slot = bp + 8;
            bp_slot = bp;
            ra = *(const uintptr_t *)ra_slot;
            sp = bp + 16;
            bp = *(const uintptr_t *)bp_slot;
            if (ra < 4096) break;
        } else {
            if (kind != HH_RULE_OK) {
                if (cache != NULL) cache->table = NULL; /* the next walk finds no cache */
                return hh_unwind_slow(pcs, max);
            }
            uintptr_t cfa = (HH_RULE_CFA_BP(rule) ? bp : sp) + HH_RULE_CFA_OFF(rule);
            if (cfa <= sp || (cfa & 7) != 0) break; /* a frame must move up the stack */
            ra_slot = cfa + (intptr_t)HH_RULE_RA_OFF(rule);
            if (ra_slot < sp || ra_slot + 8 > top) break;
            ra = *(const uintptr_t *)ra_slot;
            if (HH_RULE_BP_SAVED(rule)) {
                bp_slot = cfa + (intptr_t)HH_RULE_BP_OFF(rule);
                if (bp_slot < sp || bp_slot + 8 > top) break;
                bp = *(const uintptr_t *)bp_slot;
            }
            sp = cfa;
            if (ra == 0) break;
        }
        const uint32_t listed = !hh_skipped(ra);
        if (listed) pcs[n++] = ra;
        target = ra - 1;
        if (scratch == NULL) continue;
        if (k < HH_WALK_FRAMES)
            scratch[k] = (hh_walk_frame){sp, ra, bp, ra_slot, bp_slot, fp_steps, listed};
        if (j >= HH_WALK_FRAMES) continue;
        /* The same frame as slot j of the cache, with its outer frames unchanged? */
        while (j < HH_WALK_FRAMES && cache->f[j].cfa < sp) j++;
        if (j >= HH_WALK_FRAMES) continue;
        const hh_walk_frame *same = &cache->f[j];
        if (same->cfa != sp || same->ra != ra || same->bp != bp || same->fp_steps != fp_steps) {
            continue;
        }
        int listed_to, stop;
        if (k >= HH_WALK_FRAMES ||
            !hh_walk_check_outer(cache, j + 1, pcs, n, max, &listed_to, &stop)) {
            j = HH_WALK_FRAMES; /* an outer frame changed: walk on without the cache */
            continue;
        }
        /* The rest is the cache's. This walk's frames 0 .. k (k is slot j's) go before the
         * outer ones, which stay where they are. */
        hh_walk_cache_put(cache, scratch, k + 1, j + 1);
        const int joined_at = n - (int)listed; /* pcs from frame k (slot j) outward */
        n = listed_to;
        k += stop - (j + 1); /* the index of the last frame taken */
        if (stop == HH_WALK_FRAMES && cache->complete) {
            /* That walk ended there. Slots j .. the last hold the previous walk's frames
             * (checked in place just now); when that walk returned exactly the cached frames,
             * its outer pcs are these. */
            if (last_exact) *same_outer = n - joined_at;
            t_walk_exact = true;
            return n;
        }
        if (n >= max) return n; /* the cache describes the stack beyond; it stays as it is */
        /* the cache ran out at its outer end: walk on from its last frame, uncached */
        const hh_walk_frame *last = &cache->f[HH_WALK_FRAMES - 1];
        sp = last->cfa;
        bp = last->bp;
        fp_steps = last->fp_steps;
        target = last->ra - 1;
        scratch = NULL;
        j = HH_WALK_FRAMES;
    }
    if (scratch != NULL) { /* no join: this walk's frames become the cache */
        cache->table = table;
        cache->top = top;
        cache->complete = complete && k <= HH_WALK_FRAMES;
        hh_walk_cache_put(cache, scratch, k < HH_WALK_FRAMES ? k : HH_WALK_FRAMES, HH_WALK_FRAMES);
        t_walk_exact = cache->complete;
    }
    return n;
}

__attribute__((noinline)) int hh_unwind(uintptr_t *pcs, int max) {
    if (!hh_fast_enabled || atomic_load_explicit(&hh_rules, memory_order_acquire) == NULL) {
        t_walk_exact = false;
        return hh_unwind_slow(pcs, max);
    }
    hh_regs r;
    HH_CAPTURE_REGS(r);
    int same_outer;
    return hh_walk(r.pc, r.sp, r.bp, pcs, max, &same_outer);
}

int hh_unwind_from(const hh_regs *regs, uintptr_t *pcs, int max, int *same_outer) {
    *same_outer = 0;
    if (regs == NULL || regs->pc == 0 || !hh_fast_enabled ||
        atomic_load_explicit(&hh_rules, memory_order_acquire) == NULL) {
        t_walk_exact = false; /* this walk is not the cache's */
        return hh_unwind(pcs, max);
    }
    return hh_walk(regs->pc, regs->sp, regs->bp, pcs, max, same_outer);
}

void hh_unwind_init(uintptr_t skip_lo, uintptr_t skip_hi, bool use_fast) {
    hh_skip_lo = skip_lo;
    hh_skip_hi = skip_hi;
    hh_fast_enabled = use_fast;
    if (use_fast && atomic_load(&hh_rules) == NULL) atomic_store(&hh_rules, hh_rules_new_table());
    if (use_fast) hh_walk_pool_init();
    /* The first _Unwind_Backtrace initialises libgcc_s's state: do it now, outside any hook. */
    uintptr_t scratch[4];
    hh_unwind_slow(scratch, 4);
    atomic_store(&hh_slow_walks, 0);
}

#else /* not x86-64: libgcc's unwinder throughout */

int hh_unwind(uintptr_t *pcs, int max) {
    return hh_unwind_slow(pcs, max);
}

int hh_unwind_from(const hh_regs *regs, uintptr_t *pcs, int max, int *same_outer) {
    (void)regs;
    *same_outer = 0;
    return hh_unwind_slow(pcs, max);
}

void hh_unwind_init(uintptr_t skip_lo, uintptr_t skip_hi, bool use_fast) {
    (void)use_fast;
    hh_fast_enabled = false; /* the cached CFI walker is x86-64 code */
    hh_skip_lo = skip_lo;
    hh_skip_hi = skip_hi;
    uintptr_t scratch[4];
    hh_unwind_slow(scratch, 4);
}

void hh_unwind_invalidate(void) {}

/* No rule cache, so no lock for a forked child to reset. */
void hh_unwind_postfork_child(void) {}

#endif
