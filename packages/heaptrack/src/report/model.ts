/**
 * The report's model: the figures of the one replay (src/decode/replay.ts, native/analyze)
 * and the log's declarations (process, modules, stacks, leak checks, memory events), which
 * ReportBuilder takes in log order. The replay follows the heap the way the allocator saw it
 * (a moved realloc's new block exists from its realloc_done; frees of blocks the log never saw
 * allocated are counted and otherwise ignored) and keeps, per allocation stack ("site"), the
 * calls, bytes, live bytes and the live bytes at the moment of the peak.
 */
import {
  OPS,
  type EndRecord,
  type LeakCheckRecord,
  type LogRecord,
  type ModuleRecord,
  type Op,
  type ProcessRecord,
  type StackNodeRecord,
} from '../decode/records.js';
import type { TotalsScalars } from '../decode/replay.js';
import { LatencyHistogram, SizeHistogram } from './histogram.js';
import {
  leakVerdict,
  type LeakCheck,
  type LeakedBlock,
  type LeakSiteTotal,
  type LeakVerdict,
} from './leaks.js';
import type { SeriesPoint } from './series.js';
import { RealtimeViolations, type RealtimeViolation } from './realtime.js';
import { MappedMemory, type MappedMemorySummary } from './vmmap.js';

/** The heap series' buckets start 0.1 ms wide (the default time resolution) and widen as needed. */
export const SERIES_INITIAL_WIDTH_NS = 100_000;
/** Points of the heap-over-time series unless asked otherwise. */
export const SERIES_DEFAULT_POINTS = 1024;

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

/** One thread's allocations over time (the Perfetto export's thread tracks). */
export interface ThreadAllocations {
  /** Kernel thread id; -1 for the threads beyond the first 64 that allocated, summed. */
  readonly tid: number;
  readonly allocations: number;
  /** Bytes allocated (sampling weights in sampled logs). */
  readonly bytes: number;
  /** The width of the buckets below (the heap series'), ns. */
  readonly bucketNs: number;
  /** The buckets of the heap series in which the thread allocated (time: the bucket's start). */
  readonly series: readonly {
    readonly time: number;
    readonly allocations: number;
    readonly bytes: number;
  }[];
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
  /** Calls a real-time thread must not make, from rtcheck's guard (RT_VIOLATION), most first. */
  readonly realtimeViolations: readonly RealtimeViolation[];
  readonly sites: readonly SiteStats[];
  /** Allocations by thread, in the order the threads first allocated. */
  readonly threads: readonly ThreadAllocations[];
  readonly unknownFrees: number;
  /** A log that began with an attach (ProcessRecord.attached): frees of blocks allocated
   * before it (counted here instead of unknownFrees; not an error). */
  readonly freedBeforeAttach: number;
  readonly failedCalls: number;
  readonly dropped: number;
}

/** What the replay of the events leaves for the model. */
export interface EventFigures extends Omit<TotalsScalars, 'anomalies'> {
  /** Calls by op code (the index in OPS). */
  readonly calls: ArrayLike<number>;
  readonly sizes: SizeHistogram;
  /** By op code; undefined where no duration was recorded. */
  readonly latency: readonly (LatencyHistogram | undefined)[];
  readonly series: SeriesPoint[];
  /** Allocations by thread (not computed by the test oracle, test/oracle). */
  readonly threads?: ThreadAllocations[];
  /** Peak figures brought up to date. */
  readonly sites: SiteStats[];
  /** Blocks live at the end. */
  readonly liveBlocks: number;
  /** The blocks live at the end by allocation stack (bytes: their weights), in the order of
   * each site's lowest live address. */
  readonly neverFreed: LeakSiteTotal[];
}

/** The replay of the events, as ReportBuilder sees it. */
export interface ReplayedEvents {
  /** Events replayed so far, for progress. */
  readonly eventCount: number;
  /** The live block at `ptr` now, for LEAK records (with a timeline, the start of the bucket it
   * was allocated in). */
  liveBlock(ptr: number): { weight: number; stack: number; bucketStartNs?: number } | undefined;
  figures(): EventFigures;
}

/** Takes the log's records other than events, in log order, beside the replay of the events. */
export class ReportBuilder {
  private process: ProcessRecord | undefined;
  private end: EndRecord | undefined;
  private readonly modules: ModuleRecord[] = [];
  private readonly stacks = new Map<number, StackNodeRecord>();
  private lastTime = 0;
  private readonly mapped: MappedMemory;
  private pendingLeaks: LeakedBlock[] = [];
  private latestCheck: LeakCheck | undefined;
  private readonly realtime = new RealtimeViolations();

  constructor(
    private readonly events: ReplayedEvents,
    options: { points?: number } = {},
  ) {
    this.mapped = new MappedMemory(options);
  }

  /** Events so far, for progress. */
  get eventCount(): number {
    return this.events.eventCount;
  }

  add(r: LogRecord): void {
    switch (r.type) {
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
        const block = this.events.liveBlock(r.ptr);
        this.pendingLeaks.push({
          ptr: r.ptr,
          bytes: block?.weight ?? r.size,
          stack: block?.stack ?? 0,
          ...(block?.bucketStartNs !== undefined ? { bucketStartNs: block.bucketStartNs } : {}),
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
      case 'rt_violation':
        this.realtime.add(r);
        break;
      default:
        break;
    }
  }

  /** The blocks the latest leak check found leaked (none without one). */
  leakedBlocks(): readonly LeakedBlock[] {
    return this.latestCheck?.blocks ?? [];
  }

  finish(): ReportModel {
    const f = this.events.figures();
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
      finalLiveBlocks: f.liveBlocks,
      neverFreed: leakVerdict(f.neverFreed, undefined),
      leaks: leakVerdict(f.neverFreed, this.latestCheck),
      ...(this.latestCheck !== undefined ? { latestLeakCheck: this.latestCheck.record } : {}),
      temporaryAllocations: f.temporary,
      sizeHistogram: f.sizes,
      latency,
      series: f.series,
      ...(this.mapped.seen || this.process?.vmEvents === true
        ? { mapped: this.mapped.finish() }
        : {}),
      realtimeViolations: this.realtime.finish(),
      sites: f.sites,
      threads: f.threads ?? [],
      unknownFrees: f.unknownFrees,
      freedBeforeAttach: f.freedBeforeAttach,
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
