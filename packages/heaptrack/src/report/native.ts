/**
 * The report's pass over a log in C (heaplog_addon.node, native/analyze/scan.h): the blocks are
 * read, checked and decompressed here (readLogPayloads) and the declarations decoded here
 * (decodeRecord), while the events of each block are decoded and replayed into the report's
 * figures by the addon, with no JavaScript per event. ReportBuilder.apply stays the reference:
 * a test runs both passes over the same logs and compares the models.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { DecodeState } from '../decode/engine.js';
import { STREAM_NAMES } from '../decode/format.generated.js';
import {
  blockStreams,
  decodeRecord,
  expectStreamsConsumed,
  readLogPayloads,
  undecodableRecord,
  type DecodeOptions,
} from '../decoder.js';
import { OPS, type LogRecord } from '../records.js';
import { LatencyHistogram, SizeHistogram } from './histogram.js';
import type { EventFigures, ExternalEvents, SiteStats } from './model.js';
import type { SeriesPoint } from './series.js';

interface ScannerResult {
  readonly totals: Float64Array;
  readonly latency: ({ counts: Float64Array; count: number; max: number; sum: number } | null)[];
  readonly series: {
    readonly width: number;
    readonly present: Uint8Array;
    readonly min: Float64Array;
    readonly max: Float64Array;
    readonly last: Float64Array;
  };
  readonly sites: Float64Array;
  readonly live: Float64Array;
}

interface Scanner {
  setFlags(flags: number, unitNs: number): void;
  setThread(index: number, tid: number): void;
  startBlock(): void;
  run(payload: Uint8Array, pos: Float64Array): number;
  error(): string;
  blockEvents(): number;
  events(): number;
  liveBlock(ptr: number): [number, number] | null;
  result(): ScannerResult;
}

interface HeaplogAddon {
  Scanner: new (points: number, widthNs: number) => Scanner;
}

const RUN_BLOCK_END = 0;
const RUN_RECORD = 1;
const RUN_NO_MEMORY = 3;
const SIZE_BUCKETS = 65;
const SITE_FIELDS = 7;
const LIVE_FIELDS = 3;

const addonPath = join(
  resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'),
  'build',
  'Release',
  'heaplog_addon.node',
);
let addon: HeaplogAddon | null | undefined;

/**
 * The addon, or undefined when it is not built (the TypeScript pass is used then). One that is
 * there but does not load (built for another Node ABI) is an error that names the fix.
 */
export function heaplogAddon(): HeaplogAddon | undefined {
  if (addon === undefined) {
    if (!existsSync(addonPath)) addon = null;
    else {
      try {
        addon = createRequire(import.meta.url)(addonPath) as HeaplogAddon;
      } catch (error) {
        throw new Error(
          `${addonPath} does not load (${(error as Error).message}): rebuild it with "npx nx build heaptrack", or read the log with buildReportModel(log, { engine: 'js' })`,
        );
      }
    }
  }
  return addon ?? undefined;
}

/** The native event pass behind a ReportBuilder (ExternalEvents). */
export class NativeEvents implements ExternalEvents {
  readonly scanner: Scanner;

  constructor(points: number, initialWidthNs: number) {
    const a = heaplogAddon();
    if (a === undefined) {
      throw new Error(
        `heaplog_addon.node is missing at ${addonPath}. Build it with "npx nx build heaptrack".`,
      );
    }
    this.scanner = new a.Scanner(points, initialWidthNs);
  }

  get eventCount(): number {
    return this.scanner.events();
  }

  liveBlock(ptr: number): { weight: number; stack: number } | undefined {
    const found = this.scanner.liveBlock(ptr);
    return found === null ? undefined : { weight: found[0], stack: found[1] };
  }

  figures(): EventFigures {
    const r = this.scanner.result();
    const t = r.totals;
    let at = OPS.length;
    const next = (): number => t[at++]!;
    const scalars = {
      events: next(),
      allocatedBytes: next(),
      liveBytes: next(),
      peakBytes: next(),
      peakTime: next(),
      peakBlocks: next(),
      peakBlocksTime: next(),
      lastTime: next(),
      temporary: next(),
      unknownFrees: next(),
      failedCalls: next(),
    };
    const sizes = SizeHistogram.fromBuckets(
      t.subarray(at, at + SIZE_BUCKETS),
      t.subarray(at + SIZE_BUCKETS, at + 2 * SIZE_BUCKETS),
    );
    const series: SeriesPoint[] = [];
    const sr = r.series;
    for (let i = 0; i < sr.present.length; i++) {
      if (sr.present[i] !== 0)
        series.push({ time: i * sr.width, min: sr.min[i]!, max: sr.max[i]!, last: sr.last[i]! });
    }
    const sites: SiteStats[] = [];
    for (let i = 0; i < r.sites.length; i += SITE_FIELDS) {
      const s = r.sites;
      sites.push({
        stack: s[i]!,
        allocations: s[i + 1]!,
        bytes: s[i + 2]!,
        liveBlocks: s[i + 3]!,
        liveBytes: s[i + 4]!,
        peakBytes: s[i + 5]!,
        temporary: s[i + 6]!,
        epoch: 0,
      });
    }
    const live = [];
    for (let i = 0; i < r.live.length; i += LIVE_FIELDS) {
      live.push({ ptr: r.live[i]!, bytes: r.live[i + 1]!, stack: sites[r.live[i + 2]!]!.stack });
    }
    return {
      ...scalars,
      calls: t.subarray(0, OPS.length),
      sizes,
      latency: r.latency.map((h) =>
        h === null ? undefined : LatencyHistogram.fromBuckets(h.counts, h),
      ),
      series,
      sites,
      live,
    };
  }
}

/**
 * One pass over a log: each block's events go to the native scanner, every other record (in
 * log order, between the events) to `onRecord`. Damage is a LogFormatError as decodeLogColumns
 * reports it, thrown after everything before it has been replayed.
 */
export async function scanLogNative(
  path: string,
  events: NativeEvents,
  onRecord: (record: LogRecord) => void,
  options: DecodeOptions & { readonly onBlock?: (eventsSoFar: number) => void } = {},
): Promise<void> {
  const scanner = events.scanner;
  const state = new DecodeState();
  const pos = new Float64Array(2 * STREAM_NAMES.length);
  const out: LogRecord[] = [];
  for await (const { offset, payload } of readLogPayloads(path, options)) {
    state.startBlock();
    scanner.startBlock();
    const streams = blockStreams(path, offset, payload);
    const cursors = STREAM_NAMES.map((name) => streams[name]);
    cursors.forEach((c, i) => {
      pos[i] = c.pos;
      pos[STREAM_NAMES.length + i] = c.end;
    });
    let records = 0;
    try {
      for (;;) {
        const status = scanner.run(payload, pos);
        if (status === RUN_BLOCK_END) break;
        if (status === RUN_NO_MEMORY)
          throw new Error(`${path}: out of memory in the report's pass`);
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
        onRecord(record);
      }
      cursors.forEach((c, i) => {
        c.pos = pos[i]!;
      });
      expectStreamsConsumed(streams);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      throw undecodableRecord(path, offset, scanner.blockEvents() + records, error);
    }
    options.onBlock?.(scanner.events());
  }
}
