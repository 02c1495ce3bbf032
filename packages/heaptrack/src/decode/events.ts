/**
 * Every event of a log, for the readers that want them all (decodeLog, `heaphook dump`): decoded
 * in C by the replay's own decoder (native/analyze/, heaplog_addon.node) into named columns, a
 * block at a time, with no object per event (decodeLogColumns); the record objects are built
 * from the columns only when asked for (eventAt, recordsOf, decodeLogBatches, decodeLog).
 * Damage is reported as a LogFormatError naming the byte offset; every record before it has
 * been yielded already.
 */
import type { EventBatch, EventColumns } from './columns.js';
import { readLogPayloads, type DecodeOptions } from './decoder.js';
import { OP_FREE, OP_REALLOC_DONE, PF_SAMPLING, PF_TIMING } from './format.generated.js';
import { OPS, type EventRecord, type LogRecord } from './records.js';
import { LogWalk, newScanner } from './replay.js';

export interface ColumnDecodeOptions extends DecodeOptions {
  /**
   * Reuse one set of columns for every block (default false): each batch is valid only until
   * the next one is requested. Saves allocating ~100 bytes per event of every block.
   */
  readonly reuseColumns?: boolean;
}

/** The decoder's scanner needs no heap series: the smallest it takes. */
const NO_SERIES_POINTS = 2;

/**
 * Decodes a heaplog block by block, each block's events by columns (EventBatch): the fast
 * path, with no object per event. Memory use is bounded by the largest block plus one chunk,
 * plus the address state (live blocks). On damage, the batch of the valid part of the damaged
 * block is yielded, then a LogFormatError is thrown.
 */
export async function* decodeLogColumns(
  path: string,
  options: ColumnDecodeOptions = {},
): AsyncGenerator<EventBatch> {
  const scanner = newScanner(NO_SERIES_POINTS, 1);
  scanner.startEvents(false);
  const walk = new LogWalk(path, scanner);
  let shared: EventColumns | undefined;
  for await (const { offset, payload } of readLogPayloads(path, options)) {
    const streams = walk.streams(offset, payload);
    // an event is at least its tag byte
    const capacity = Math.max(1, streams.tag.end - streams.tag.pos);
    let events: EventColumns;
    if (options.reuseColumns === true) {
      if (shared === undefined || shared.op.length < capacity)
        shared = scanner.eventColumns(capacity);
      events = shared;
    } else {
      events = scanner.eventColumns(capacity);
    }
    events.length = 0;
    const records: LogRecord[] = [];
    const recordAt: number[] = [];
    // with the log's flags as they are after the block (its PROCESS record may set them)
    const batch = (): EventBatch => ({
      events,
      records,
      recordAt,
      timing: (walk.flags & PF_TIMING) !== 0,
      sampling: (walk.flags & PF_SAMPLING) !== 0,
      offset,
    });
    try {
      walk.block(offset, payload, streams, (record, eventsBefore) => {
        records.push(record);
        recordAt.push(eventsBefore);
      });
    } catch (error) {
      events.length = scanner.blockEvents();
      if (events.length + records.length > 0) yield batch();
      throw error;
    }
    events.length = scanner.blockEvents();
    yield batch();
  }
}

/** An EventRecord whose fields eventInto overwrites (one object for many events). */
export type MutableEventRecord = { -readonly [field in keyof EventRecord]: EventRecord[field] };

/** Event `k` of a batch written into `e` (no object made: `dump` formats millions). */
export function eventInto(batch: EventBatch, k: number, e: MutableEventRecord): EventRecord {
  const c = batch.events;
  const code = c.op[k]!;
  const marker = code === OP_REALLOC_DONE;
  e.type = 'event';
  e.op = OPS[code]!;
  e.time = c.time[k]!;
  e.tid = c.tid[k]!;
  e.stack = c.stack[k]!;
  e.ptr = c.ptr[k]!;
  e.oldPtr = c.old[k]!;
  e.size = c.size[k]!;
  e.count = c.count[k]!;
  e.align = c.align[k]!;
  e.split = c.split[k] !== 0;
  e.duration = batch.timing && !marker ? c.duration[k]! : undefined;
  e.weight = batch.sampling && !marker && code !== OP_FREE ? c.weight[k]! : undefined;
  return e;
}

/** A record for eventInto to fill: every field present from the start, in the record's order
 * (one shape for every event, and the order JSON.stringify writes). */
export function blankEvent(): MutableEventRecord {
  return {
    type: 'event',
    op: 'malloc',
    time: 0,
    tid: 0,
    stack: 0,
    ptr: 0,
    oldPtr: 0,
    size: 0,
    count: 0,
    align: 0,
    split: false,
    duration: undefined,
    weight: undefined,
  };
}

/** The record object of event `k` of a batch. */
export function eventAt(batch: EventBatch, k: number): EventRecord {
  return eventInto(batch, k, blankEvent());
}

/** The records of a batch in log order: each declaration to onRecord, event k to onEvent(k). */
export function forEachRecord(
  batch: EventBatch,
  onRecord: (record: LogRecord) => void,
  onEvent: (k: number) => void,
): void {
  const n = batch.events.length;
  let r = 0;
  for (let k = 0; k < n; k++) {
    while (r < batch.records.length && batch.recordAt[r]! <= k) onRecord(batch.records[r++]!);
    onEvent(k);
  }
  while (r < batch.records.length) onRecord(batch.records[r++]!);
}

/** All the records of a batch as objects, in log order. */
export function recordsOf(batch: EventBatch): LogRecord[] {
  const out: LogRecord[] = [];
  forEachRecord(
    batch,
    (record) => out.push(record),
    (k) => out.push(eventAt(batch, k)),
  );
  return out;
}

/**
 * Decodes a heaplog block by block: yields the records of each block as an array. Memory use
 * is bounded by the largest block plus one chunk. (decodeLogColumns is the faster form.)
 */
export async function* decodeLogBatches(
  path: string,
  options: DecodeOptions = {},
): AsyncGenerator<LogRecord[]> {
  for await (const batch of decodeLogColumns(path, { ...options, reuseColumns: true })) {
    yield recordsOf(batch);
  }
}

/** Decodes a heaplog record by record (see decodeLogBatches). */
export async function* decodeLog(
  path: string,
  options: DecodeOptions = {},
): AsyncGenerator<LogRecord> {
  for await (const batch of decodeLogBatches(path, options)) yield* batch;
}
