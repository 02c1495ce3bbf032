/**
 * The events of one log block stored by columns, one typed array per field, event k at index k
 * of each, as the C decoder writes them (native/analyze/scan.h, hh_event_columns): the common
 * part of every event (EVENT_COMMON_COLUMNS) and then every field of the table of event fields
 * (native/format/fields.h, EVENT_FIELDS of format.generated.ts) under the table's name. A field
 * added to the table is a column here with no change to this file. decodeLogColumns yields them;
 * the record objects (EventRecord) are built from them only when asked for (events.ts).
 */
import type { EVENT_FIELDS } from './format.generated.js';
import type { LogRecord } from './records.js';

/** The columns every event has, before the table's fields (scan.h, HH_EVENT_COMMON_COLUMNS). */
export const EVENT_COMMON_COLUMNS = ['op', 'split', 'time', 'tid', 'stack'] as const;

/** A field of the table of event fields (native/format/fields.h), by its name there. */
export type EventFieldName = (typeof EVENT_FIELDS)[number]['name'];

export type EventColumns = {
  /** Number of events (entries in use in every column). */
  length: number;
  /** Operation code: the index of the function in OPS (10 = realloc_done). */
  readonly op: Uint8Array;
  /** 1 when realloc moved the block (EventRecord.split). */
  readonly split: Uint8Array;
  /** ns since the process started. */
  readonly time: Float64Array;
  readonly tid: Float64Array;
  /** Stack node of the innermost frame; 0 when none was recorded. */
  readonly stack: Float64Array;
} & {
  /**
   * Each field of the table (count, align, size, old, ptr, duration, weight, ...), as the C
   * decoder gives it: a field the event does not carry is count 1, duration and weight NaN,
   * else 0; a free's block is its `ptr` (its `old` 0). duration is valid when the log records
   * durations (EventBatch.timing), weight when it is sampled (EventBatch.sampling).
   */
  readonly [field in EventFieldName]: Float64Array;
};

/** One block of a log: its events by columns and its other records, in place. */
export interface EventBatch {
  readonly events: EventColumns;
  /** The block's declarations (and any record that is not an event), in log order. */
  readonly records: LogRecord[];
  /** recordAt[i]: how many of the block's events come before records[i]. */
  readonly recordAt: number[];
  /** Durations recorded (events.duration is valid). */
  readonly timing: boolean;
  /** Sampled log (events.weight is valid). */
  readonly sampling: boolean;
  /** File offset of the block. */
  readonly offset: number;
}
