/**
 * The report's aggregation: one pass over the records, memory bounded by the live blocks and
 * the distinct stacks (never by the number of events). It replays the heap as HeapReplay does
 * (a moved realloc's new block exists from its realloc_done; frees of blocks the log never saw
 * allocated are counted and otherwise ignored) and keeps, per allocation stack ("site"), the
 * calls, bytes, live bytes and the live bytes at the moment of the peak.
 */
import {
  type EndRecord,
  type EventRecord,
  type LeakCheckRecord,
  type LogRecord,
  type ModuleRecord,
  type Op,
  type ProcessRecord,
  type StackNodeRecord,
} from '../records.js';
import { LatencyHistogram, SizeHistogram } from './histogram.js';
import { LiveTable } from './live.js';
import { leakVerdict, type LeakCheck, type LeakedBlock, type LeakVerdict } from './leaks.js';
import { HeapSeries, type SeriesPoint } from './series.js';

/** Functions that create a block from nothing (realloc is counted apart). */
export const ALLOCATION_OPS: readonly Op[] = [
  'malloc',
  'calloc',
  'posix_memalign',
  'memalign',
  'aligned_alloc',
  'valloc',
  'pvalloc',
];

export interface SiteStats {
  /** Stack id of the allocation (0 = no stack recorded). */
  readonly stack: number;
  /** Successful allocations (realloc's new blocks included). */
  allocations: number;
  /** Bytes allocated (sampling weights in sampled logs). */
  bytes: number;
  liveBlocks: number;
  liveBytes: number;
  /** Live bytes of this site when the heap was at its peak. */
  peakBytes: number;
  /** Allocations freed by the next event of the same thread. */
  temporary: number;
  /** Internal: the peak epoch peakBytes was taken in. */
  epoch: number;
}

export interface ReportModel {
  readonly process?: ProcessRecord;
  readonly end?: EndRecord;
  readonly modules: readonly ModuleRecord[];
  readonly stacks: ReadonlyMap<number, StackNodeRecord>;
  readonly calls: Readonly<Record<Op, number>>;
  /** Events (realloc_done markers not counted). */
  readonly events: number;
  readonly allocations: number;
  readonly reallocs: number;
  readonly frees: number;
  readonly allocatedBytes: number;
  readonly peakHeapBytes: number;
  readonly peakTimeNs: number;
  readonly peakLiveBlocks: number;
  readonly peakLiveBlocksTimeNs: number;
  /** Time of the last event, ns. */
  readonly lastTimeNs: number;
  readonly finalLiveBytes: number;
  readonly finalLiveBlocks: number;
  /** Blocks never freed, grouped by allocation stack. */
  readonly neverFreed: LeakVerdict;
  /** Leaked as the report counts it (never freed, or the latest leak check's verdict). */
  readonly leaks: LeakVerdict;
  readonly latestLeakCheck?: LeakCheckRecord;
  readonly temporaryAllocations: number;
  readonly sizeHistogram: SizeHistogram;
  /** Per function, when durations were recorded (ProcessRecord.timing). */
  readonly latency: ReadonlyMap<Op, LatencyHistogram>;
  readonly series: readonly SeriesPoint[];
  readonly sites: readonly SiteStats[];
  readonly unknownFrees: number;
  readonly failedCalls: number;
  readonly dropped: number;
}

export class ReportBuilder {
  private process: ProcessRecord | undefined;
  private end: EndRecord | undefined;
  private readonly modules: ModuleRecord[] = [];
  private readonly stacks = new Map<number, StackNodeRecord>();
  // An object literal (fast properties), not Object.fromEntries (a dictionary).
  private readonly calls: Record<Op, number> = {
    malloc: 0,
    calloc: 0,
    realloc: 0,
    reallocarray: 0,
    free: 0,
    posix_memalign: 0,
    memalign: 0,
    aligned_alloc: 0,
    valloc: 0,
    pvalloc: 0,
    realloc_done: 0,
  };
  private events = 0;
  private readonly live = new LiveTable();
  private readonly pending = new Map<
    number,
    { ptr: number; size: number; weight: number; stack: number }
  >();
  private readonly siteIndex = new Map<number, number>();
  private readonly sites: SiteStats[] = [];
  /** Per thread: the block its previous event allocated (0: none), to spot temporary allocations. */
  private readonly lastAllocated = new Map<number, { ptr: number }>();
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
  private failedCalls = 0;
  private readonly sizes = new SizeHistogram();
  private readonly latency = new Map<Op, LatencyHistogram>();
  private readonly series: HeapSeries;
  private pendingLeaks: LeakedBlock[] = [];
  private latestCheck: LeakCheck | undefined;

  constructor(options: { points?: number } = {}) {
    // 0.1 ms buckets to start with (the default time resolution); they widen as time goes on.
    this.series = new HeapSeries(options.points ?? 1024, 100_000);
  }

  /** Records so far, for progress. */
  get eventCount(): number {
    return this.events;
  }

  addBatch(records: readonly LogRecord[]): void {
    for (const r of records) this.add(r);
  }

  add(r: LogRecord): void {
    switch (r.type) {
      case 'event':
        this.event(r);
        break;
      case 'stack':
        this.stacks.set(r.id, r);
        break;
      case 'module':
        this.modules.push(r);
        break;
      case 'process':
        this.process ??= r;
        break;
      case 'end':
        this.end = r;
        break;
      case 'leak': {
        const slot = this.live.find(r.ptr);
        this.pendingLeaks.push({
          ptr: r.ptr,
          bytes: slot >= 0 ? this.live.weightAt(slot) : r.size,
          stack: slot >= 0 ? this.sites[this.live.siteAt(slot)]!.stack : 0,
        });
        break;
      }
      case 'leak_check':
        this.latestCheck = { record: r, blocks: this.pendingLeaks };
        this.pendingLeaks = [];
        break;
      default:
        break;
    }
  }

  /** The index of a stack's site in this.sites. */
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
    if (this.live.find(ptr) >= 0) this.removeBlock(ptr); // should not happen; keep totals sane
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
      this.unknownFrees++;
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

  private event(e: EventRecord): void {
    this.calls[e.op]++;
    if (e.time > this.lastTime) this.lastTime = e.time;
    if (e.op !== 'realloc_done') {
      this.events++;
      if (e.duration !== undefined) {
        let h = this.latency.get(e.op);
        if (h === undefined) this.latency.set(e.op, (h = new LatencyHistogram()));
        h.add(e.duration);
      }
      // A temporary allocation: the thread's very next event frees it.
      let last = this.lastAllocated.get(e.tid);
      if (last === undefined) this.lastAllocated.set(e.tid, (last = { ptr: 0 }));
      const previous = last.ptr;
      if (previous !== 0) {
        last.ptr = 0;
        const freesIt =
          (e.op === 'free' && e.ptr === previous) ||
          ((e.op === 'realloc' || e.op === 'reallocarray') &&
            e.oldPtr === previous &&
            e.ptr === 0 &&
            e.size === 0);
        const slot = freesIt ? this.live.find(previous) : -1;
        if (slot >= 0) {
          this.temporary++;
          this.sites[this.live.siteAt(slot)]!.temporary++;
        }
      }
    }
    const bytes = e.op === 'calloc' || e.op === 'reallocarray' ? e.count * e.size : e.size;
    const weight = e.weight ?? bytes;
    switch (e.op) {
      case 'free':
        this.removeBlock(e.ptr, e.time);
        return;
      case 'realloc':
      case 'reallocarray': {
        if (e.ptr === 0 && bytes > 0) {
          this.failedCalls++;
          return;
        }
        if (e.oldPtr !== 0) this.removeBlock(e.oldPtr, e.time);
        if (e.ptr === 0 || weight === 0) return;
        if (e.split) this.pending.set(e.tid, { ptr: e.ptr, size: bytes, weight, stack: e.stack });
        else {
          this.addBlock(e.ptr, bytes, weight, e.stack, e.time);
          this.allocatedBy(e.tid, e.ptr);
        }
        return;
      }
      case 'realloc_done': {
        const moved = this.pending.get(e.tid);
        if (moved !== undefined) {
          this.pending.delete(e.tid);
          this.addBlock(moved.ptr, moved.size, moved.weight, moved.stack, e.time);
          this.allocatedBy(e.tid, moved.ptr);
        }
        return;
      }
      default:
        if (e.ptr === 0) {
          this.failedCalls++;
          return;
        }
        this.addBlock(e.ptr, bytes, weight, e.stack, e.time);
        this.allocatedBy(e.tid, e.ptr);
    }
  }

  private allocatedBy(tid: number, ptr: number): void {
    const last = this.lastAllocated.get(tid);
    if (last !== undefined) last.ptr = ptr;
    else this.lastAllocated.set(tid, { ptr });
  }

  finish(): ReportModel {
    const neverFreedBlocks: LeakedBlock[] = [];
    for (const [ptr, , weight, site] of this.live.entries()) {
      neverFreedBlocks.push({ ptr, bytes: weight, stack: this.sites[site]!.stack });
    }
    for (const site of this.sites) this.touch(site);
    const sum = (ops: readonly Op[]): number => ops.reduce((n, op) => n + this.calls[op], 0);
    return {
      ...(this.process !== undefined ? { process: this.process } : {}),
      ...(this.end !== undefined ? { end: this.end } : {}),
      modules: this.modules,
      stacks: this.stacks,
      calls: { ...this.calls },
      events: this.events,
      allocations: sum(ALLOCATION_OPS),
      reallocs: sum(['realloc', 'reallocarray']),
      frees: this.calls.free,
      allocatedBytes: this.allocatedBytes,
      peakHeapBytes: this.peakBytes,
      peakTimeNs: this.peakTime,
      peakLiveBlocks: this.peakBlocks,
      peakLiveBlocksTimeNs: this.peakBlocksTime,
      lastTimeNs: this.lastTime,
      finalLiveBytes: this.liveBytes,
      finalLiveBlocks: this.live.size,
      neverFreed: leakVerdict(neverFreedBlocks, undefined),
      leaks: leakVerdict(neverFreedBlocks, this.latestCheck),
      ...(this.latestCheck !== undefined ? { latestLeakCheck: this.latestCheck.record } : {}),
      temporaryAllocations: this.temporary,
      sizeHistogram: this.sizes,
      latency: this.latency,
      series: this.series.points(),
      sites: [...this.sites],
      unknownFrees: this.unknownFrees,
      failedCalls: this.failedCalls,
      dropped: this.end?.dropped ?? 0,
    };
  }
}

/** Sites ordered by a measure, the largest first, at most `n`. */
export function topSites(
  sites: readonly SiteStats[],
  by: 'peakBytes' | 'allocations' | 'bytes',
  n: number,
): SiteStats[] {
  return sites
    .filter((s) => s[by] > 0)
    .sort((a, b) => b[by] - a[by] || b.bytes - a.bytes || a.stack - b.stack)
    .slice(0, n);
}
