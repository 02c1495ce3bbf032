/*
 * writer_check.c — the collector's check of a record from a traced process (hh_writer_check),
 * before the encoder reads a field of it.
 */
#include <string.h>

#include "writer_internal.h"

/* ---- input from another process --------------------------------------------------------
 * The collector's records come from a process it does not trust: every one is checked before
 * the encoder above reads a field of it (the encoder trusts its input: lengths size copies into
 * the fixed streams, the time unit divides). */

#define HH_KNOWN_PF                                                                  \
    (HH_PF_STACKS | HH_PF_TIMING | HH_PF_SAMPLING | HH_PF_DROP | HH_PF_FREE_STACKS | \
     HH_PF_FORK_CHILD | HH_PF_VM | HH_PF_ATTACHED)

/* Whether an event time (CLOCK_MONOTONIC ns, or TSC ticks) gives ticks within HH_MAX_EXACT. */
static bool hh_time_fits(const hh_writer *w, uint64_t raw) {
    if (w->tsc) { /* ticks of a TSC of at least ~1 GHz: ns are at most ticks */
        int64_t ticks = (int64_t)(raw - w->tsc_start);
        return ticks < (int64_t)HH_MAX_EXACT / 4;
    }
    uint64_t ns = raw > w->start ? raw - w->start : 0;
    return ns / w->unit <= HH_MAX_EXACT;
}

const char *hh_writer_check(const hh_writer *w, unsigned type, const void *record, uint32_t len) {
    if (type != HH_REC_PROCESS && !w->have_process) return "a record before the PROCESS record";
    switch (type) {
        case HH_REC_PROCESS: {
            const hh_rec_process *p = record;
            if (len < sizeof *p) return "a PROCESS record shorter than its fields";
            if (w->have_process) return "a second PROCESS record";
            if (p->exe_len > HH_MAX_EXE_BYTES) return "a PROCESS record's exe is too long";
            if (p->cmdline_len > HH_MAX_CMDLINE_BYTES)
                return "a PROCESS record's cmdline is too long";
            if (sizeof *p + (uint64_t)p->exe_len + p->cmdline_len > len)
                return "a PROCESS record's strings run past its end";
            if (p->clock > 1) return "a PROCESS record names an unknown clock";
            if (p->flags & ~HH_KNOWN_PF) return "a PROCESS record has unknown flags";
            if (p->compress > HH_CODEC_ZSTD) return "a PROCESS record names an unknown codec";
            if (p->sample_bytes > HH_MAX_EXACT) return "a PROCESS record's sampling is too large";
            return NULL;
        }
        case HH_REC_MODULE: {
            const hh_rec_module *m = record;
            if (len < sizeof *m) return "a MODULE record shorter than its fields";
            if (m->build_id_len > HH_MAX_BUILD_ID_BYTES)
                return "a MODULE record's build id is too long";
            if (m->path_len > HH_MAX_PATH_BYTES) return "a MODULE record's path is too long";
            if (sizeof *m + (uint64_t)m->build_id_len + m->path_len > len)
                return "a MODULE record's bytes run past its end";
            if (m->base > HH_MAX_EXACT || m->lo > m->hi || m->hi > HH_MAX_EXACT)
                return "a MODULE record's addresses are outside the format";
            return NULL;
        }
        case HH_REC_NODE: {
            const hh_rec_node *n = record;
            if (len < sizeof *n) return "a NODE record shorter than its fields";
            if (n->id == 0 || n->parent >= n->id) return "a NODE record's parent is not older";
            if (n->pc > HH_MAX_EXACT) return "a NODE record's pc is outside the format";
            return NULL;
        }
        case HH_REC_EVENT: {
            const hh_rec_event *e = record;
            if (len < sizeof *e) return "an EVENT record shorter than its fields";
            if (e->tid == 0) return "an EVENT record's thread id is 0";
            if (e->op > HH_OP_REALLOC_DONE) return "an EVENT record has an unknown operation";
            if (e->flags & ~(HH_EV_SPLIT | HH_EV_EXTRA)) return "an EVENT record has unknown flags";
            if ((e->flags & HH_EV_EXTRA) && len < sizeof *e + sizeof(hh_rec_event_extra))
                return "an EVENT record shorter than its extra fields";
            if (e->addr > HH_MAX_EXACT || hh_event_old_block(e) > HH_MAX_EXACT)
                return "an EVENT record's address is outside the format";
            if (!hh_time_fits(w, e->time)) return "an EVENT record's time is outside the format";
            return NULL;
        }
        case HH_REC_EXIT:
            if (len < sizeof(hh_rec_exit)) return "an EXIT record shorter than its fields";
            return NULL;
        case HH_REC_LEAK:
            if (len < sizeof(hh_rec_leak)) return "a LEAK record shorter than its fields";
            return NULL;
        case HH_REC_LEAK_CHECK: {
            const hh_rec_leak_check *r = record;
            if (len < sizeof *r) return "a LEAK_CHECK record shorter than its fields";
            if (r->trigger > HH_TRIGGER_API) return "a LEAK_CHECK record has an unknown trigger";
            return NULL;
        }
        case HH_REC_VM: {
            const hh_rec_vm *r = record;
            if (len < sizeof *r) return "a VM record shorter than its fields";
            if (r->tid == 0) return "a VM record's thread id is 0";
            if (r->mapped > 1) return "a VM record is neither mapped nor unmapped";
            if (!hh_time_fits(w, r->time)) return "a VM record's time is outside the format";
            return NULL;
        }
        case HH_REC_RT: {
            const hh_rec_rt *r = record;
            if (len < sizeof *r) return "an RT record shorter than its fields";
            if (r->tid == 0) return "an RT record's thread id is 0";
            if (r->site == 0) return "an RT record's site is 0";
            if (r->count > HH_MAX_EXACT) return "an RT record's count is outside the format";
            if (!hh_time_fits(w, r->time)) return "an RT record's time is outside the format";
            return NULL;
        }
        default:
            return "a record of an unknown type";
    }
}

void hh_writer_record_checked(void *arg, uint64_t pos, unsigned type, const void *record,
                              uint32_t len) {
    hh_writer *w = arg;
    if (w->violation != NULL) return;
    const char *why = hh_writer_check(w, type, record, len);
    if (why != NULL) {
        w->violation = why;
        return;
    }
    hh_writer_record(w, pos, type, record, len);
}

const char *hh_writer_violation(const hh_writer *w) {
    return w->violation;
}
