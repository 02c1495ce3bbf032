/**
 * Mapped memory over a log's VM_MAPPED / VM_UNMAPPED events (VmRecord): the set of address
 * ranges the program has mapped since tracing began, as disjoint intervals, so that a range
 * mapped twice (mmap MAP_FIXED over a mapping, a re-attached segment) counts once and an unmap
 * of part of a mapping takes away just that part. Memory mapped before tracing began is not
 * known: unmapping it changes nothing.
 */
import { HeapSeries, type SeriesPoint } from './series.js';
import type { VmRecord } from '../decode/records.js';

/** Disjoint, sorted, non-adjacent half-open ranges [start, end) and their total size. */
export class RangeSet {
  private starts: number[] = [];
  private ends: number[] = [];
  /** Bytes covered. */
  bytes = 0;

  get count(): number {
    return this.starts.length;
  }

  /** Index of the first range whose end is at or past `at`. */
  private firstEndingAfter(at: number): number {
    let lo = 0;
    let hi = this.ends.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.ends[mid]! < at) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Adds [start, end); returns the bytes that were not covered before. */
  add(start: number, end: number): number {
    if (end <= start) return 0;
    const i = this.firstEndingAfter(start); // ranges before i end before start: untouched
    let j = i;
    let covered = 0;
    let newStart = start;
    let newEnd = end;
    // Ranges that overlap or touch [start, end) merge into it.
    while (j < this.starts.length && this.starts[j]! <= end) {
      covered += Math.min(this.ends[j]!, end) - Math.max(this.starts[j]!, start);
      newStart = Math.min(newStart, this.starts[j]!);
      newEnd = Math.max(newEnd, this.ends[j]!);
      j++;
    }
    this.starts.splice(i, j - i, newStart);
    this.ends.splice(i, j - i, newEnd);
    const added = end - start - covered;
    this.bytes += added;
    return added;
  }

  /** Removes [start, end); returns the bytes that were covered. */
  remove(start: number, end: number): number {
    if (end <= start) return 0;
    let i = this.firstEndingAfter(start + 1); // first range ending past start
    let removed = 0;
    while (i < this.starts.length && this.starts[i]! < end) {
      const s = this.starts[i]!;
      const e = this.ends[i]!;
      removed += Math.min(e, end) - Math.max(s, start);
      if (s < start && e > end) {
        // a hole in the middle: split
        this.ends[i] = start;
        this.starts.splice(i + 1, 0, end);
        this.ends.splice(i + 1, 0, e);
        break;
      }
      if (s < start) {
        this.ends[i] = start;
        i++;
      } else if (e > end) {
        this.starts[i] = end;
        break;
      } else {
        this.starts.splice(i, 1);
        this.ends.splice(i, 1);
      }
    }
    this.bytes -= removed;
    return removed;
  }
}

/** Where mapped memory came from: one call stack's mappings. */
export interface MappingSite {
  readonly stack: number;
  /** VM_MAPPED events of this stack. */
  mappings: number;
  /** Bytes they mapped (whole pages; a range mapped again counts again). */
  bytes: number;
}

export interface MappedMemorySummary {
  /** VM_MAPPED and VM_UNMAPPED events. */
  readonly mappedEvents: number;
  readonly unmappedEvents: number;
  /** Bytes named by them (a range mapped twice counts twice). */
  readonly mappedBytes: number;
  readonly unmappedBytes: number;
  /** Largest amount mapped at once since tracing began, and when (ns since start). */
  readonly peakBytes: number;
  readonly peakTimeNs: number;
  /** Still mapped at the end of the log. */
  readonly finalBytes: number;
  readonly series: readonly SeriesPoint[];
  /** Mapping stacks, most bytes first. */
  readonly sites: readonly MappingSite[];
}

/** Follows VM events in log order and sums them up. */
export class MappedMemory {
  private readonly ranges = new RangeSet();
  private readonly series: HeapSeries;
  private readonly sites = new Map<number, MappingSite>();
  private mappedEvents = 0;
  private unmappedEvents = 0;
  private mappedBytes = 0;
  private unmappedBytes = 0;
  private peakBytes = 0;
  private peakTime = 0;

  constructor(options: { points?: number } = {}) {
    this.series = new HeapSeries(options.points ?? 1024, 100_000);
  }

  /** Any event seen. */
  get seen(): boolean {
    return this.mappedEvents + this.unmappedEvents > 0;
  }

  add(r: VmRecord): void {
    if (r.kind === 'mapped') {
      this.mappedEvents++;
      this.mappedBytes += r.size;
      this.ranges.add(r.address, r.address + r.size);
      let site = this.sites.get(r.stack);
      if (site === undefined) {
        site = { stack: r.stack, mappings: 0, bytes: 0 };
        this.sites.set(r.stack, site);
      }
      site.mappings++;
      site.bytes += r.size;
      if (this.ranges.bytes > this.peakBytes) {
        this.peakBytes = this.ranges.bytes;
        this.peakTime = r.time;
      }
    } else {
      this.unmappedEvents++;
      this.unmappedBytes += r.size;
      this.ranges.remove(r.address, r.address + r.size);
    }
    this.series.add(r.time, this.ranges.bytes);
  }

  finish(): MappedMemorySummary {
    return {
      mappedEvents: this.mappedEvents,
      unmappedEvents: this.unmappedEvents,
      mappedBytes: this.mappedBytes,
      unmappedBytes: this.unmappedBytes,
      peakBytes: this.peakBytes,
      peakTimeNs: this.peakTime,
      finalBytes: this.ranges.bytes,
      series: this.series.points(),
      sites: [...this.sites.values()].sort((a, b) => b.bytes - a.bytes || a.stack - b.stack),
    };
  }
}
