/*
 * events.c — the events themselves, for the readers that want every one (decodeLog, dump:
 * scan.h, hh_scan_set_event_columns): the block loop (decode.c) decodes each event once, with
 * the replay's decoder, and hands it here to be written into named columns; no second decoder.
 */
#include <stdio.h>

#include "analyze/state.h"

int hh_scan_start_events(hh_scan *s, bool replay) {
    if (s->all_events > 0) return -1;
    s->events_on = true;
    s->events_replay = replay;
    return 0;
}

void hh_scan_set_event_columns(hh_scan *s, const hh_event_columns *columns) {
    s->event_columns = *columns;
}

bool events_put(hh_scan *s, int op, uint8_t tag, uint64_t thread, double stack,
                const hh_field_decoded *f) {
    const hh_event_columns *c = &s->event_columns;
    size_t k = s->block_events;
    if (k >= c->capacity) {
        snprintf(s->error, sizeof s->error, "more events than the %zu the columns hold",
                 c->capacity);
        return false;
    }
    c->op[k] = (uint8_t)op;
    c->split[k] = (tag & HH_EVT_SPLIT) != 0;
    c->time[k] = s->time;
    c->tid[k] = s->thread_tid[thread];
    c->stack[k] = stack;
#define PUT_FIELD(name, coding, ops, flag) c->name[k] = (double)f->name;
    HH_EVENT_FIELDS(PUT_FIELD)
#undef PUT_FIELD
    return true;
}
