/**
 * The events of one log block stored by columns: one typed array per field, event k at index k
 * of each. decodeLogColumns yields it (the replay's test oracle reads it); the object records
 * (EventRecord) are built from it only when asked for.
 */
import type { LogRecord } from './records.js';

export interface EventColumns {
  /** Number of events (entries in use in every column). */
  length: number;
  /** Operation code: the index of the function in OPS (10 = realloc_done). */
  op: Uint8Array;
  /** 1 when realloc moved the block (EventRecord.split). */
  split: Uint8Array;
  /** ns since the process started. */
  time: Float64Array;
  tid: Float64Array;
  stack: Float64Array;
  ptr: Float64Array;
  oldPtr: Float64Array;
  size: Float64Array;
  count: Float64Array;
  align: Float64Array;
  /** Valid when the log records durations (EventBatch.timing). */
  duration: Float64Array;
  /** Valid when the log is sampled (EventBatch.sampling); NaN for frees and realloc_done. */
  weight: Float64Array;
}

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

export function allocColumns(capacity: number): EventColumns {
  return {
    length: 0,
    op: new Uint8Array(capacity),
    split: new Uint8Array(capacity),
    time: new Float64Array(capacity),
    tid: new Float64Array(capacity),
    stack: new Float64Array(capacity),
    ptr: new Float64Array(capacity),
    oldPtr: new Float64Array(capacity),
    size: new Float64Array(capacity),
    count: new Float64Array(capacity),
    align: new Float64Array(capacity),
    duration: new Float64Array(capacity),
    weight: new Float64Array(capacity),
  };
}
