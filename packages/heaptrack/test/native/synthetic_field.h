/*
 * synthetic_field.h — a field added to the log through the table of event fields
 * (native/format/fields.h) and nothing else, force-included (-include) into the writer, the C
 * decoder and test/native/field_roundtrip.c by the hh_test_field_roundtrip target. The writer
 * takes its value from field_roundtrip.c (HH_WRITER_FIELDS_SOURCE); the decoder hands every
 * event's decoded fields to it (HH_SCAN_FIELDS_TAP), which compares them with what was written.
 */
#ifndef HH_SYNTHETIC_FIELD_H
#define HH_SYNTHETIC_FIELD_H

/* After the table's last field, on every call, whatever the flags. */
#define HH_EVENT_FIELDS_EXTRA(X) X(synthetic, NUM, HH_OPS_CALLS, 0)

#include "format/fields.h"

struct hh_rec_event;
void synthetic_source(const struct hh_rec_event *e, hh_field_values *f);
void synthetic_tap(int op, const hh_field_decoded *f);

#define HH_WRITER_FIELDS_SOURCE(e, f) synthetic_source(e, f)
#define HH_SCAN_FIELDS_TAP(op, f) synthetic_tap(op, f)

#endif
