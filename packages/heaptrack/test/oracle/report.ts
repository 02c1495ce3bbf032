/**
 * The test oracle of the one replay (native/analyze/scan.c): the same replay of a log's events
 * written plainly in TypeScript over the decoder's columns (decodeLogColumns), one
 * event at a time. Tests compare its report model and allocation sequence with the native
 * replay's on real and random logs. Not part of the package: nothing in src/ calls it.
 */
import { LogFormatError } from '../../src/decode/decoder.js';
import { decodeLogColumns } from '../../src/decode/events.js';
import {
  OP_CALLOC,
  OP_FREE,
  OP_REALLOC,
  OP_REALLOC_DONE,
  OP_REALLOCARRAY,
} from '../../src/decode/format.generated.js';
import { OPS, type EventRecord, type LogRecord } from '../../src/decode/records.js';
import { LatencyHistogram, SizeHistogram } from '../../src/report/histogram.js';
import { totalsBySite } from '../../src/report/leaks.js';
import {
  ReportBuilder,
  SERIES_DEFAULT_POINTS,
  SERIES_INITIAL_WIDTH_NS,
  type EventFigures,
  type ReplayedEvents,
  type ReportModel,
  type SiteStats,
} from '../../src/report/model.js';
import { HeapSeries } from '../../src/report/series.js';
import type { EventColumns } from '../../src/decode/columns.js';
import { LiveTable } from './live.js';

/** The events of the report, replayed one at a time (ReplayedEvents for a ReportBuilder). */
export class OracleEvents implements ReplayedEvents {
  /** Calls by op code (the index in OPS). */
  private readonly calls = new Float64Array(OPS.length);
  private events = 0;
  readonly live = new LiveTable();
  private readonly pending = new Map<
    number,
    { ptr: number; size: number; weight: number; stack: number }
  >();
  private readonly siteIndex = new Map<number, number>();
  private readonly sites: SiteStats[] = [];
  /** Per thread: the block its previous event allocated (0: none), for temporary allocations. */
  private readonly lastAllocated = new Map<number, number>();
  private liveBytes = 0;
  private allocatedBytes = 0;
  private peakBytes = 0;
  private peakTime = 0;
  private peakEpoch = 0;
  private peakBlocks = 0;
  private peakBlocksTime = 0;
  private lastTime = 0;
  private temporary = 0;
  private unknownFrees = 0;
  private freedBeforeAttach = 0;
  /** The log began with an attach: unknown frees are blocks allocated before it. */
  attached = false;
  private failedCalls = 0;
  anomalies = 0;
  private readonly sizes = new SizeHistogram();
  private readonly latency: (LatencyHistogram | undefined)[] = [];
  private readonly series: HeapSeries;

  constructor(points: number) {
    this.series = new HeapSeries(points, SERIES_INITIAL_WIDTH_NS);
  }

  get eventCount(): number {
    return this.events;
  }

  liveBlock(ptr: number): { weight: number; stack: number } | undefined {
    const slot = this.live.find(ptr);
    if (slot < 0) return undefined;
    return { weight: this.live.weightAt(slot), stack: this.sites[this.live.siteAt(slot)]!.stack };
  }

  private site(stack: number): number {
    let index = this.siteIndex.get(stack);
    if (index === undefined) {
      index = this.sites.length;
      this.siteIndex.set(stack, index);
      this.sites.push({
        stack,
        allocations: 0,
        bytes: 0,
        liveBlocks: 0,
        liveBytes: 0,
        peakBytes: 0,
        temporary: 0,
        epoch: 0,
      });
    }
    return index;
  }

  /** Before a site's live bytes change: if the peak moved since, its value then is its value now. */
  private touch(site: SiteStats): void {
    if (site.epoch !== this.peakEpoch) {
      site.peakBytes = site.liveBytes;
      site.epoch = this.peakEpoch;
    }
  }

  private addBlock(ptr: number, size: number, weight: number, stack: number, time: number): void {
    if (this.live.find(ptr) >= 0) {
      this.anomalies++;
      this.removeBlock(ptr);
    }
    const index = this.site(stack);
    const site = this.sites[index]!;
    this.touch(site);
    site.allocations++;
    site.bytes += weight;
    site.liveBlocks++;
    site.liveBytes += weight;
    this.live.add(ptr, size, weight, index);
    this.liveBytes += weight;
    this.allocatedBytes += weight;
    this.sizes.add(size);
    if (this.liveBytes > this.peakBytes) {
      this.peakBytes = this.liveBytes;
      this.peakTime = time;
      this.peakEpoch++;
    }
    if (this.live.size > this.peakBlocks) {
      this.peakBlocks = this.live.size;
      this.peakBlocksTime = time;
    }
    this.series.add(time, this.liveBytes);
  }

  private removeBlock(ptr: number, time?: number): void {
    const slot = this.live.find(ptr);
    if (slot < 0) {
      if (this.attached) this.freedBeforeAttach++;
      else this.unknownFrees++;
      return;
    }
    const site = this.sites[this.live.siteAt(slot)]!;
    const weight = this.live.weightAt(slot);
    this.live.remove(ptr, slot);
    this.touch(site);
    site.liveBlocks--;
    site.liveBytes -= weight;
    this.liveBytes -= weight;
    if (time !== undefined) this.series.add(time, this.liveBytes);
  }

  /** Event k of a block's columns; `duration` and `weight` only when `timing` / `sampling`. */
  apply(c: EventColumns, k: number, timing: boolean, sampling: boolean): void {
    const code = c.op[k]!;
    const time = c.time[k]!;
    const tid = c.tid[k]!;
    const stack = c.stack[k]!;
    const ptr = c.ptr[k]!;
    const oldPtr = c.old[k]!;
    const size = c.size[k]!;
    this.calls[code]!++;
    if (time > this.lastTime) this.lastTime = time;
    if (code !== OP_REALLOC_DONE) {
      this.events++;
      if (timing) {
        let h = this.latency[code];
        if (h === undefined) this.latency[code] = h = new LatencyHistogram();
        h.add(c.duration[k]!);
      }
      // A temporary allocation: the thread's very next event frees it.
      const previous = this.lastAllocated.get(tid) ?? 0;
      if (previous !== 0) {
        this.lastAllocated.set(tid, 0);
        const freesIt =
          (code === OP_FREE && ptr === previous) ||
          ((code === OP_REALLOC || code === OP_REALLOCARRAY) &&
            oldPtr === previous &&
            ptr === 0 &&
            size === 0);
        const slot = freesIt ? this.live.find(previous) : -1;
        if (slot >= 0) {
          this.temporary++;
          this.sites[this.live.siteAt(slot)]!.temporary++;
        }
      }
    }
    const bytes = code === OP_CALLOC || code === OP_REALLOCARRAY ? c.count[k]! * size : size;
    // sampled logs: the bytes this record stands for
    const weight = sampling && code !== OP_FREE && code !== OP_REALLOC_DONE ? c.weight[k]! : bytes;
    switch (code) {
      case OP_FREE:
        this.removeBlock(ptr, time);
        return;
      case OP_REALLOC:
      case OP_REALLOCARRAY:
        if (ptr === 0 && bytes > 0) {
          this.failedCalls++;
          return;
        }
        if (oldPtr !== 0) this.removeBlock(oldPtr, time);
        if (ptr === 0 || weight === 0) return;
        if (c.split[k] !== 0) this.pending.set(tid, { ptr, size: bytes, weight, stack });
        else {
          this.addBlock(ptr, bytes, weight, stack, time);
          this.lastAllocated.set(tid, ptr);
        }
        return;
      case OP_REALLOC_DONE: {
        const moved = this.pending.get(tid);
        if (moved !== undefined) {
          this.pending.delete(tid);
          this.addBlock(moved.ptr, moved.size, moved.weight, moved.stack, time);
          this.lastAllocated.set(tid, moved.ptr);
        }
        return;
      }
      default:
        if (ptr === 0) {
          this.failedCalls++;
          return;
        }
        this.addBlock(ptr, bytes, weight, stack, time);
        this.lastAllocated.set(tid, ptr);
    }
  }

  figures(): EventFigures {
    const live = [...this.live.entries()]
      .map(([ptr, , weight, site]) => ({ ptr, bytes: weight, stack: this.sites[site]!.stack }))
      .sort((a, b) => a.ptr - b.ptr);
    for (const site of this.sites) this.touch(site);
    return {
      calls: this.calls,
      events: this.events,
      allocatedBytes: this.allocatedBytes,
      liveBytes: this.liveBytes,
      peakBytes: this.peakBytes,
      peakTime: this.peakTime,
      peakBlocks: this.peakBlocks,
      peakBlocksTime: this.peakBlocksTime,
      lastTime: this.lastTime,
      temporary: this.temporary,
      unknownFrees: this.unknownFrees,
      freedBeforeAttach: this.freedBeforeAttach,
      failedCalls: this.failedCalls,
      sizes: this.sizes,
      latency: this.latency,
      series: this.series.points(),
      sites: [...this.sites],
      liveBlocks: live.length,
      neverFreed: totalsBySite(live),
    };
  }
}

/** The report model of a log by the oracle (as buildReportModel gives it by the native replay). */
export async function oracleReportModel(
  path: string,
  points = SERIES_DEFAULT_POINTS,
  onRecord?: (record: LogRecord, events: OracleEvents) => void,
): Promise<{ model: ReportModel; events: OracleEvents; error?: LogFormatError }> {
  const events = new OracleEvents(points);
  const builder = new ReportBuilder(events, { points });
  const add = (r: LogRecord): void => {
    if (r.type === 'process') events.attached = r.attached;
    builder.add(r);
    onRecord?.(r, events);
  };
  let error: LogFormatError | undefined;
  try {
    for await (const batch of decodeLogColumns(path, { reuseColumns: true })) {
      const c = batch.events;
      let r = 0;
      for (let k = 0; k < c.length; k++) {
        while (r < batch.records.length && batch.recordAt[r]! <= k) add(batch.records[r++]!);
        events.apply(c, k, batch.timing, batch.sampling);
      }
      while (r < batch.records.length) add(batch.records[r++]!);
    }
  } catch (e) {
    if (!(e instanceof LogFormatError)) throw e;
    error = e;
  }
  return { model: builder.finish(), events, ...(error !== undefined ? { error } : {}) };
}

/** The report model of records made by hand (events and declarations, in log order). */
export function oracleModelOf(records: readonly LogRecord[], points = SERIES_DEFAULT_POINTS) {
  const events = new OracleEvents(points);
  const builder = new ReportBuilder(events, { points });
  const one = (e: EventRecord, field: (e: EventRecord) => number) => Float64Array.of(field(e));
  for (const r of records) {
    if (r.type !== 'event') {
      if (r.type === 'process') events.attached = r.attached;
      builder.add(r);
      continue;
    }
    const columns: EventColumns = {
      length: 1,
      op: Uint8Array.of(OPS.indexOf(r.op)),
      split: Uint8Array.of(r.split ? 1 : 0),
      time: one(r, (e) => e.time),
      tid: one(r, (e) => e.tid),
      stack: one(r, (e) => e.stack),
      ptr: one(r, (e) => e.ptr),
      old: one(r, (e) => e.oldPtr),
      size: one(r, (e) => e.size),
      count: one(r, (e) => e.count),
      align: one(r, (e) => e.align),
      duration: one(r, (e) => e.duration ?? Number.NaN),
      weight: one(r, (e) => e.weight ?? Number.NaN),
    };
    events.apply(columns, 0, r.duration !== undefined, r.weight !== undefined);
  }
  return builder.finish();
}
