/**
 * The one decoder of events and the one replay of a log (heaplog_addon.node,
 * native/analyze/scan.h): the blocks are read, checked and decompressed here (readLogPayloads)
 * and the declarations decoded here (decodeRecord), while the events of each block are decoded
 * in C and replayed there into the heap's states, with no JavaScript per event, or written
 * into named columns (events.ts: decodeLog, dump). The report and the summary (src/report)
 * and recommend (src/recommend) read the replay's results, every one by name; test/oracle/
 * holds the TypeScript replay the tests compare it with.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { HeaphookError, nativeFile } from '@heaphook/core';

import type { EventColumns } from './columns.js';
import { decodeRecord, DeclarationState } from './declarations.js';
import {
  blockStreams,
  expectStreamsConsumed,
  LogFormatError,
  readLogPayloads,
  undecodableRecord,
  type DecodeOptions,
} from './decoder.js';
import { OPS, type LogRecord, type Op } from './records.js';
import { STREAM_NAMES } from './format.generated.js';
import type { Streams } from './streams.js';

/** What Scanner.result() returns (native/analyze/scan_addon.c). */
export interface ScannerResult {
  readonly totals: ScannerTotals;
  readonly latency: ({ counts: Float64Array; count: number; max: number; sum: number } | null)[];
  readonly series: {
    readonly width: number;
    readonly present: Uint8Array;
    readonly min: Float64Array;
    readonly max: Float64Array;
    readonly last: Float64Array;
  };
  /** Allocations by thread on the series' buckets, threads in the order they first allocated
   * (tid -1: the threads beyond the first 64, summed). */
  readonly threads: readonly {
    readonly tid: number;
    readonly allocations: number;
    readonly bytes: number;
    readonly counts: Float64Array;
    readonly sums: Float64Array;
  }[];
  /** The sites, in first-seen order. */
  readonly sites: SiteColumns;
}

/** The scalar figures of the replay's totals, by the names native/analyze/scan.h's
 * HH_SCAN_TOTALS_SCALARS gives them. */
export interface TotalsScalars {
  /** realloc_done not counted. */
  readonly events: number;
  readonly allocatedBytes: number;
  readonly liveBytes: number;
  readonly peakBytes: number;
  readonly peakTime: number;
  readonly peakBlocks: number;
  readonly peakBlocksTime: number;
  readonly lastTime: number;
  readonly temporary: number;
  readonly unknownFrees: number;
  readonly failedCalls: number;
  /** Allocations at an address already live (should be 0). */
  readonly anomalies: number;
  /** In a log that began with an attach: frees of blocks allocated before it. */
  readonly freedBeforeAttach: number;
}

/** ScannerResult.totals: the calls by op code, the scalar figures by name and the size
 * histogram (SIZE_BUCKETS): allocations and their bytes per bucket. */
export interface ScannerTotals extends TotalsScalars {
  readonly calls: Float64Array;
  readonly sizeCounts: Float64Array;
  readonly sizeBytes: Float64Array;
}

/** The sites, a column per figure (scan.h, HH_SITE_COLUMNS): stack, allocations, bytes, live
 * blocks, live bytes, peak bytes, temporary, and the lowest address of its live blocks
 * (Infinity when none). */
export type SiteColumns = Readonly<Record<keyof SiteRow, Float64Array>>;

/** The live blocks, a column per figure (scan.h, HH_LIVE_COLUMNS): address, weight, site index
 * (in the order of the sites) and op code of the allocating function. */
export type LiveColumns = Readonly<Record<'address' | 'weight' | 'site' | 'op', Float64Array>>;

/** The addon's scanner (native/analyze/scan_addon.c describes each method). */
export interface Scanner {
  setBlockLimit(n: number): void;
  blockLimit(): number;
  startSequence(tally: boolean, allocCode: number, freeCode: number, reallocCode: number): void;
  setFlags(flags: number, unitNs: number): void;
  setThread(index: number, tid: number): void;
  /** Before a block's first record; streams: how many the block stored (6 or 10). */
  startBlock(streams: number): void;
  run(payload: Uint8Array, pos: Float64Array): number;
  error(): string;
  blockEvents(): number;
  events(): number;
  /** A live block's weight and stack, and the start (ns) of its timeline bucket when the
   * timeline was started. */
  liveBlock(ptr: number): { weight: number; stack: number; bucketStartNs?: number } | null;
  sites(): SiteColumns;
  liveBlocks(): LiveColumns;
  takeSequence(): { ops: Float64Array; events: Float64Array };
  sequenceFigures(): SequenceFigures;
  result(): ScannerResult;
  /** Before the first event: per site and time bucket, its calls (native/analyze/scan.h). */
  startTimeline(buckets: number): void;
  /** Before the first event, without a timeline: no heap series and no thread series (result()
   * gives them empty), for a report that shows neither. */
  skipSeries(): void;
  /** null: not started, or lost for want of memory (timelineOf gives it as the report reads it). */
  timeline(): { buckets: number; width: number; cells: TimelineColumns } | null;
  /** Before the first event: run() also writes the events into the columns of eventColumns();
   * replay false: it only decodes them. */
  startEvents(replay: boolean): void;
  /** New columns of `capacity` entries that run() writes each block's events into, from index
   * 0 (the block's events so far: blockEvents()), until the next call. */
  eventColumns(capacity: number): EventColumns;
}

/** The allocation sequence's figures, by the names native/analyze/scan.h's
 * HH_SCAN_SEQUENCE_FIGURES gives them: the peak of the live requests' bytes and of their TLSF
 * footprints, the largest request and alignment, and the threads that had an event. */
export const SEQUENCE_FIGURES = [
  'peakBytes',
  'peakFootprint',
  'largestRequest',
  'largestAlign',
  'threads',
] as const;
/** Scanner.sequenceFigures(). */
export type SequenceFigures = Readonly<Record<(typeof SEQUENCE_FIGURES)[number], number>>;

/** A timeline cell's columns, by the names native/analyze/scan.h's HH_TIMELINE_COLUMNS gives
 * them: its site's index (in the order of sites()), its bucket, the allocations in it, their
 * bytes, the bytes freed in it, its temporary allocations, and of the bytes allocated in it
 * those live at the end and at the peak. In this order, they are the fields of a cell of
 * ScannerTimeline.cells (and of report.html's timeline). */
export const TIMELINE_COLUMNS = [
  'site',
  'bucket',
  'allocations',
  'bytes',
  'freedBytes',
  'temporary',
  'liveAtEnd',
  'liveAtPeak',
] as const;
/** A column's name. */
export type TimelineColumn = (typeof TIMELINE_COLUMNS)[number];
/** Scanner.timeline()'s cells: a column per field, by name. */
export type TimelineColumns = Readonly<Record<TimelineColumn, Float64Array>>;
/** The fields of a cell of ScannerTimeline.cells. */
export const TIMELINE_FIELDS = TIMELINE_COLUMNS.length;

/** The timeline as the report reads it (timelineOf): TIMELINE_FIELDS per cell, the columns of
 * TIMELINE_COLUMNS in its order, by site in the order of sites() then by bucket. */
export interface ScannerTimeline {
  readonly buckets: number;
  /** ns per bucket. */
  readonly width: number;
  readonly cells: Float64Array;
}

/** The scanner's timeline, its named columns laid out a cell after another in the order of
 * TIMELINE_COLUMNS; null when it has none. */
export function timelineOf(scanner: Scanner): ScannerTimeline | null {
  const t = scanner.timeline();
  if (t === null) return null;
  const n = t.cells.site.length;
  const cells = new Float64Array(n * TIMELINE_FIELDS);
  TIMELINE_COLUMNS.forEach((name, f) => {
    const column = t.cells[name];
    if (column?.length !== n)
      throw new Error(
        `heaplog_addon.node has no timeline column ${name}: rebuild it with "npx nx build heaptrack"`,
      );
    for (let i = 0; i < n; i++) cells[i * TIMELINE_FIELDS + f] = column[i]!;
  });
  return { buckets: t.buckets, width: t.width, cells };
}

interface HeaplogAddon {
  Scanner: new (points: number, widthNs: number) => Scanner;
  /** The request the backend gets for an event of op code `op`: [bytes, alignment]. */
  requestOf(
    op: number,
    size: number,
    count: number,
    align: number,
  ): { size: number; align: number };
  /** The least bytes a block of `size` takes in a TLSF pool. */
  footprintOf(size: number): number;
}

const RUN_BLOCK_END = 0;
const RUN_RECORD = 1;
const RUN_NO_MEMORY = 3;
const RUN_LIMIT = 4;

/** Buckets of the size histogram (bucket 0: size 0; bucket k: [2^(k-1), 2^k)). */
export const SIZE_BUCKETS = 65;
/** The scalar figures of a result's totals. */
export function totalsOf(totals: ScannerTotals): TotalsScalars {
  const { calls: _calls, sizeCounts: _counts, sizeBytes: _bytes, ...scalars } = totals;
  return scalars;
}

/** Calls per function from a result's totals. */
export function callsOf(totals: ScannerTotals): Record<Op, number> {
  return Object.fromEntries(OPS.map((op, i) => [op, totals.calls[i]!])) as Record<Op, number>;
}

/** A site of Scanner.sites(), by name. */
export interface SiteRow {
  readonly stack: number;
  readonly allocations: number;
  readonly bytes: number;
  readonly liveBlocks: number;
  readonly liveBytes: number;
  readonly peakBytes: number;
  readonly temporary: number;
  readonly lowestLiveAddress: number;
}

export function siteRows(sites: SiteColumns): SiteRow[] {
  const names = Object.keys(sites) as (keyof SiteRow)[];
  const rows: SiteRow[] = [];
  for (let i = 0; i < sites.stack.length; i++) {
    const row = {} as Record<keyof SiteRow, number>;
    for (const name of names) row[name] = sites[name][i]!;
    rows.push(row);
  }
  return rows;
}

/**
 * The replay holds at most so many blocks live at once (scan.h, HH_SCAN_DEFAULT_BLOCK_LIMIT,
 * ~100 bytes each): a crafted log of a few KB can declare millions. This variable sets another
 * limit.
 */
const BLOCK_LIMIT_VARIABLE = 'HEAPHOOK_MAX_LIVE_BLOCKS';

/** HEAPHOOK_MAX_LIVE_BLOCKS, or undefined when not set. */
function blockLimit(): number | undefined {
  const text = process.env[BLOCK_LIMIT_VARIABLE];
  if (text === undefined || text === '') return undefined;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 0xffff_fffe) {
    throw new HeaphookError(
      `${BLOCK_LIMIT_VARIABLE}=${text}: give a whole number of blocks from 1 to 4294967294, e.g. ${BLOCK_LIMIT_VARIABLE}=16777216`,
    );
  }
  return n;
}

const addonPath = nativeFile(
  resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'),
  'heaplog_addon.node',
);
let addon: HeaplogAddon | undefined;

/** The addon; an error that names the fix when it is not built or does not load. */
export function heaplogAddon(): HeaplogAddon {
  if (addon === undefined) {
    if (!existsSync(addonPath)) {
      throw new Error(
        `${addonPath} is missing: the log reader is native code built with the package. Build it with "npx nx build heaptrack".`,
      );
    }
    try {
      addon = createRequire(import.meta.url)(addonPath) as HeaplogAddon;
    } catch (error) {
      throw new Error(
        `${addonPath} does not load (${(error as Error).message}): rebuild it with "npx nx build heaptrack".`,
      );
    }
  }
  return addon;
}

/** A new scanner: a heap series of `points` buckets `widthNs` wide to begin with. */
export function newScanner(points: number, widthNs: number): Scanner {
  const scanner = new (heaplogAddon().Scanner)(points, widthNs);
  const limit = blockLimit();
  if (limit !== undefined) scanner.setBlockLimit(limit);
  return scanner;
}

export interface ReplayOptions extends DecodeOptions {
  /** After each block, with the events so far; false stops the reading there. */
  readonly onBlock?: (eventsSoFar: number) => boolean | void;
}

/**
 * A scanner's walk over the blocks of one log: the events of each block decoded (and replayed,
 * or written into columns) by the scanner in C, every other record decoded here, in log order
 * between the events, and its declarations handed back to the scanner.
 */
export class LogWalk {
  private readonly state = new DeclarationState();
  private readonly pos = new Float64Array(2 * STREAM_NAMES.length);

  constructor(
    private readonly path: string,
    readonly scanner: Scanner,
  ) {}

  /** The log's PROCESS flags so far (0 before its PROCESS record). */
  get flags(): number {
    return this.state.flags;
  }

  /** A block's streams (a payload that does not split is a LogFormatError). */
  streams(offset: number, payload: Buffer): Streams {
    return blockStreams(this.path, offset, payload);
  }

  /**
   * Decodes a block: its events through the scanner, every other record to `onRecord` with
   * the number of the block's events before it. Damage, and more live blocks than the
   * scanner's limit, are a LogFormatError thrown after everything before them went through.
   */
  block(
    offset: number,
    payload: Buffer,
    streams: Streams,
    onRecord: (record: LogRecord, eventsBefore: number) => void,
  ): void {
    const { path, scanner, state, pos } = this;
    state.startBlock();
    scanner.startBlock(streams.count);
    const cursors = STREAM_NAMES.map((name) => streams[name]);
    cursors.forEach((c, i) => {
      pos[i] = c.pos;
      pos[STREAM_NAMES.length + i] = c.end;
    });
    const out: LogRecord[] = [];
    let records = 0;
    try {
      for (;;) {
        const status = scanner.run(payload, pos);
        if (status === RUN_BLOCK_END) break;
        if (status === RUN_NO_MEMORY) throw new Error(`${path}: out of memory in the replay`);
        if (status === RUN_LIMIT) {
          throw new LogFormatError(
            path,
            offset,
            `${scanner.error()} (${BLOCK_LIMIT_VARIABLE}=${scanner.blockLimit()}; set it higher for a log that really holds more) in the block`,
          );
        }
        if (status !== RUN_RECORD) throw new RangeError(scanner.error());
        cursors.forEach((c, i) => {
          c.pos = pos[i]!;
        });
        out.length = 0;
        decodeRecord(streams, state, out);
        records++;
        const record = out[0]!;
        if (record.type === 'process') scanner.setFlags(state.flags, state.unit);
        else if (record.type === 'thread') scanner.setThread(record.index, record.tid);
        cursors.forEach((c, i) => {
          pos[i] = c.pos;
        });
        onRecord(record, scanner.blockEvents());
      }
      cursors.forEach((c, i) => {
        c.pos = pos[i]!;
      });
      expectStreamsConsumed(streams);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      throw undecodableRecord(path, offset, scanner.blockEvents() + records, error);
    }
  }
}

/**
 * One pass over a log: each block's events go to the scanner, every other record (in log
 * order, between the events) to `onRecord`. Damage is a LogFormatError as decodeLogColumns
 * reports it, thrown after everything before it has been replayed; so is more live blocks
 * than the scanner's limit.
 */
export async function replayLog(
  path: string,
  scanner: Scanner,
  onRecord: (record: LogRecord) => void,
  options: ReplayOptions = {},
): Promise<void> {
  const walk = new LogWalk(path, scanner);
  for await (const { offset, payload } of readLogPayloads(path, options)) {
    walk.block(offset, payload, walk.streams(offset, payload), onRecord);
    if (options.onBlock?.(scanner.events()) === false) return;
  }
}
