/**
 * The report's aggregation: one pass over the records, memory bounded by the live blocks and
 * the distinct stacks (never by the number of events). It replays the heap as HeapReplay does
 * (a moved realloc's new block exists from its realloc_done; frees of blocks the log never saw
 * allocated are counted and otherwise ignored) and keeps, per allocation stack ("site"), the
 * calls, bytes, live bytes and the live bytes at the moment of the peak.
 */
import {
  OPS,
  type EndRecord,
  type EventRecord,
  type LeakCheckRecord,
  type LogRecord,
  type ModuleRecord,
  type Op,
  type ProcessRecord,
  type StackNodeRecord,
} from '../records.js';
import {
  OP_CALLOC,
  OP_FREE,
  OP_REALLOC,
  OP_REALLOC_DONE,
  OP_REALLOCARRAY,
} from '../decode/format.generated.js';
import { LatencyHistogram, SizeHistogram } from './histogram.js';
import { LiveTable } from './live.js';
import { leakVerdict, type LeakCheck, type LeakedBlock, type LeakVerdict } from './leaks.js';
import { HeapSeries, type SeriesPoint } from './series.js';
import { MappedMemory, type MappedMemorySummary } from '../vmmap.js';

const OP_CODE = new Map<Op, number>(OPS.map((op, i) => [op, i]));
/** The heap series' buckets start 0.1 ms wide (the default time resolution) and widen as needed. */
export const SERIES_INITIAL_WIDTH_NS = 100_000;
/** Points of the heap-over-time series unless asked otherwise. */
export const SERIES_DEFAULT_POINTS = 1024;

/** The events of one block by columns, as the decoder's decodeLogColumns yields them. */
export interface ColumnBatch {
  readonly events: {
    readonly length: number;
    readonly op: ArrayLike<number>;
    readonly split: ArrayLike<number>;
    readonly time: ArrayLike<number>;
    readonly tid: ArrayLike<number>;
    readonly stack: ArrayLike<number>;
    readonly ptr: ArrayLike<number>;
    readonly oldPtr: ArrayLike<number>;
    readonly size: ArrayLike<number>;
    readonly count: ArrayLike<number>;
    readonly duration: ArrayLike<number>;
    readonly weight: ArrayLike<number>;
  };
  readonly records: readonly LogRecord[];
  readonly recordAt: readonly number[];
  readonly timing: boolean;
  readonly sampling: boolean;
}

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
  /** Memory the program mapped (VM_MAPPED / VM_UNMAPPED), when the log records it. */
  readonly mapped?: MappedMemorySummary;
  readonly sites: readonly SiteStats[];
  readonly unknownFrees: number;
  readonly failedCalls: number;
  readonly dropped: number;
}

/**
 * What the pass over the events leaves for the model: the same figures whether the events were
 * replayed here (ReportBuilder.apply) or by the native pass (src/report/native.ts).
 */
export interface EventFigures {
  /** Calls by op code (the index in OPS). */
  readonly calls: ArrayLike<number>;
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
  readonly sizes: SizeHistogram;
  /** By op code; undefined where no duration was recorded. */
  readonly latency: readonly (LatencyHistogram | undefined)[];
  readonly series: SeriesPoint[];
  /** Peak figures brought up to date. */
  readonly sites: SiteStats[];
  /** The blocks live at the end (bytes: their weight). */
  readonly live: LeakedBlock[];
}

/** The event pass done elsewhere (natively): ReportBuilder takes the declarations only. */
export interface ExternalEvents {
  /** Events replayed so far, for progress. */
  readonly eventCount: number;
  /** The live block at `ptr` now, for LEAK records. */
  liveBlock(ptr: number): { weight: number; stack: number } | undefined;
  figures(): EventFigures;
}

export class ReportBuilder {
  private process: ProcessRecord | undefined;
  private end: EndRecord | undefined;
  private readonly modules: ModuleRecord[] = [];
  private readonly stacks = new Map<number, StackNodeRecord>();
  /** Calls by op code (the index in OPS). */
  private readonly calls = new Float64Array(OPS.length);

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
  private readonly latency: (LatencyHistogram | undefined)[] = [];
  private lastTid = -1;
  private lastOfTid: { ptr: number } | undefined;
  private readonly series: HeapSeries;
  private readonly mapped: MappedMemory;
  private pendingLeaks: LeakedBlock[] = [];
  private latestCheck: LeakCheck | undefined;

  private readonly external: ExternalEvents | undefined;

  /**
   * With `external`, the events are replayed elsewhere (the native pass) and this builder takes
   * only the other records (add); otherwise feed it everything (addColumns, add).
   */
  constructor(options: { points?: number; external?: ExternalEvents } = {}) {
    this.series = new HeapSeries(options.points ?? SERIES_DEFAULT_POINTS, SERIES_INITIAL_WIDTH_NS);
    this.mapped = new MappedMemory(options);
    this.external = options.external;
  }

  /** Records so far, for progress. */
  get eventCount(): number {
    return this.external?.eventCount ?? this.events;
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
        const block = this.liveBlock(r.ptr);
        this.pendingLeaks.push({
          ptr: r.ptr,
          bytes: block?.weight ?? r.size,
          stack: block?.stack ?? 0,
        });
        break;
      }
      case 'leak_check':
        this.latestCheck = { record: r, blocks: this.pendingLeaks };
        this.pendingLeaks = [];
        break;
      case 'vm':
        this.mapped.add(r);
        if (r.time > this.lastTime) this.lastTime = r.time;
        break;
      default:
        break;
    }
  }

  private liveBlock(ptr: number): { weight: number; stack: number } | undefined {
    if (this.external !== undefined) return this.external.liveBlock(ptr);
    const slot = this.live.find(ptr);
    if (slot < 0) return undefined;
    return { weight: this.live.weightAt(slot), stack: this.sites[this.live.siteAt(slot)]!.stack };
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
    this.apply(
      OP_CODE.get(e.op)!,
      e.time,
      e.tid,
      e.stack,
      e.ptr,
      e.oldPtr,
      e.size,
      e.count,
      e.duration ?? Number.NaN,
      e.weight ?? Number.NaN,
      e.split,
    );
  }

  /**
   * Events by columns (the decoder's EventColumns: op codes index OPS; duration and weight
   * valid when `timing` / `sampling`). Non-event records go through add() in log order.
   */
  addColumns(batch: ColumnBatch): void {
    if (this.external !== undefined) throw new Error('ReportBuilder: events are replayed natively');
    const c = batch.events;
    let r = 0;
    for (let k = 0; k < c.length; k++) {
      while (r < batch.records.length && batch.recordAt[r]! <= k) this.add(batch.records[r++]!);
      this.apply(
        c.op[k]!,
        c.time[k]!,
        c.tid[k]!,
        c.stack[k]!,
        c.ptr[k]!,
        c.oldPtr[k]!,
        c.size[k]!,
        c.count[k]!,
        batch.timing ? c.duration[k]! : Number.NaN,
        batch.sampling ? c.weight[k]! : Number.NaN,
        c.split[k] !== 0,
      );
    }
    while (r < batch.records.length) this.add(batch.records[r++]!);
  }

  /** One event; `duration` and `weight` are NaN when not recorded. */
  private apply(
    code: number,
    time: number,
    tid: number,
    stack: number,
    ptr: number,
    oldPtr: number,
    size: number,
    count: number,
    duration: number,
    sampleWeight: number,
    split: boolean,
  ): void {
    this.calls[code]!++;
    if (time > this.lastTime) this.lastTime = time;
    if (code !== OP_REALLOC_DONE) {
      this.events++;
      if (duration === duration) {
        let h = this.latency[code];
        if (h === undefined) this.latency[code] = h = new LatencyHistogram();
        h.add(duration);
      }
      // A temporary allocation: the thread's very next event frees it.
      let last = this.lastTid === tid ? this.lastOfTid : this.lastAllocated.get(tid);
      if (last === undefined) this.lastAllocated.set(tid, (last = { ptr: 0 }));
      this.lastTid = tid;
      this.lastOfTid = last;
      const previous = last.ptr;
      if (previous !== 0) {
        last.ptr = 0;
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
    const bytes = code === OP_CALLOC || code === OP_REALLOCARRAY ? count * size : size;
    // sampled logs: the bytes this record stands for (NaN for frees)
    const weight = sampleWeight === sampleWeight ? sampleWeight : bytes;
    switch (code) {
      case OP_FREE:
        this.removeBlock(ptr, time);
        return;
      case OP_REALLOC:
      case OP_REALLOCARRAY: {
        if (ptr === 0 && bytes > 0) {
          this.failedCalls++;
          return;
        }
        if (oldPtr !== 0) this.removeBlock(oldPtr, time);
        if (ptr === 0 || weight === 0) return;
        if (split) this.pending.set(tid, { ptr, size: bytes, weight, stack });
        else {
          this.addBlock(ptr, bytes, weight, stack, time);
          this.allocatedBy(tid, ptr);
        }
        return;
      }
      case OP_REALLOC_DONE: {
        const moved = this.pending.get(tid);
        if (moved !== undefined) {
          this.pending.delete(tid);
          this.addBlock(moved.ptr, moved.size, moved.weight, moved.stack, time);
          this.allocatedBy(tid, moved.ptr);
        }
        return;
      }
      default:
        if (ptr === 0) {
          this.failedCalls++;
          return;
        }
        this.addBlock(ptr, bytes, weight, stack, time);
        this.allocatedBy(tid, ptr);
    }
  }

  private allocatedBy(tid: number, ptr: number): void {
    const last = this.lastTid === tid ? this.lastOfTid : this.lastAllocated.get(tid);
    if (last !== undefined) last.ptr = ptr;
    else this.lastAllocated.set(tid, { ptr });
  }

  /** The figures of this builder's own event pass. */
  private ownFigures(): EventFigures {
    const live: LeakedBlock[] = [];
    for (const [ptr, , weight, site] of this.live.entries()) {
      live.push({ ptr, bytes: weight, stack: this.sites[site]!.stack });
    }
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
      failedCalls: this.failedCalls,
      sizes: this.sizes,
      latency: this.latency,
      series: this.series.points(),
      sites: [...this.sites],
      live,
    };
  }

  finish(): ReportModel {
    const f = this.external?.figures() ?? this.ownFigures();
    // In address order, so that leak sites of equal size list the same way from either pass.
    const neverFreedBlocks = [...f.live].sort((a, b) => a.ptr - b.ptr);
    const calls = Object.fromEntries(OPS.map((op, i) => [op, f.calls[i]!])) as Record<Op, number>;
    const latency = new Map<Op, LatencyHistogram>();
    f.latency.forEach((h, i) => {
      if (h !== undefined) latency.set(OPS[i]!, h);
    });
    const sum = (ops: readonly Op[]): number => ops.reduce((n, op) => n + calls[op], 0);
    return {
      ...(this.process !== undefined ? { process: this.process } : {}),
      ...(this.end !== undefined ? { end: this.end } : {}),
      modules: this.modules,
      stacks: this.stacks,
      calls,
      events: f.events,
      allocations: sum(ALLOCATION_OPS),
      reallocs: sum(['realloc', 'reallocarray']),
      frees: calls.free,
      allocatedBytes: f.allocatedBytes,
      peakHeapBytes: f.peakBytes,
      peakTimeNs: f.peakTime,
      peakLiveBlocks: f.peakBlocks,
      peakLiveBlocksTimeNs: f.peakBlocksTime,
      // Memory events are records this builder takes itself.
      lastTimeNs: Math.max(f.lastTime, this.lastTime),
      finalLiveBytes: f.liveBytes,
      finalLiveBlocks: f.live.length,
      neverFreed: leakVerdict(neverFreedBlocks, undefined),
      leaks: leakVerdict(neverFreedBlocks, this.latestCheck),
      ...(this.latestCheck !== undefined ? { latestLeakCheck: this.latestCheck.record } : {}),
      temporaryAllocations: f.temporary,
      sizeHistogram: f.sizes,
      latency,
      series: f.series,
      ...(this.mapped.seen || this.process?.vmEvents === true
        ? { mapped: this.mapped.finish() }
        : {}),
      sites: f.sites,
      unknownFrees: f.unknownFrees,
      failedCalls: f.failedCalls,
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
