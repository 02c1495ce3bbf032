/**
 * The report's figures from the one replay (src/decode/replay.ts): the scanner's results as
 * the report model's types.
 */
import { OPS } from '../decode/records.js';
import { newScanner, siteRows, totalsOf, type Scanner } from '../decode/replay.js';
import { LatencyHistogram, SizeHistogram } from './histogram.js';
import type { EventFigures, ReplayedEvents, SiteStats, ThreadAllocations } from './model.js';
import type { SeriesPoint } from './series.js';

/** The replay of a log's events behind a ReportBuilder. */
export class NativeEvents implements ReplayedEvents {
  readonly scanner: Scanner;

  constructor(points: number, initialWidthNs: number) {
    this.scanner = newScanner(points, initialWidthNs);
  }

  get eventCount(): number {
    return this.scanner.events();
  }

  liveBlock(ptr: number): { weight: number; stack: number; bucketStartNs?: number } | undefined {
    return this.scanner.liveBlock(ptr) ?? undefined;
  }

  figures(): EventFigures {
    const r = this.scanner.result();
    const t = r.totals;
    const scalars = totalsOf(t);
    const sizes = SizeHistogram.fromBuckets(t.sizeCounts, t.sizeBytes);
    const series: SeriesPoint[] = [];
    const sr = r.series;
    for (let i = 0; i < sr.present.length; i++) {
      if (sr.present[i] !== 0)
        series.push({ time: i * sr.width, min: sr.min[i]!, max: sr.max[i]!, last: sr.last[i]! });
    }
    const threads: ThreadAllocations[] = r.threads.map((t) => {
      const buckets: { time: number; allocations: number; bytes: number }[] = [];
      t.counts.forEach((n, i) => {
        if (n > 0) buckets.push({ time: i * sr.width, allocations: n, bytes: t.sums[i]! });
      });
      return {
        tid: t.tid,
        allocations: t.allocations,
        bytes: t.bytes,
        bucketNs: sr.width,
        series: buckets,
      };
    });
    const rows = siteRows(r.sites);
    const sites: SiteStats[] = rows.map(({ lowestLiveAddress: _, ...row }) => ({
      ...row,
      epoch: 0,
    }));
    const neverFreed = rows
      .filter((s) => s.liveBlocks > 0)
      .sort((a, b) => a.lowestLiveAddress - b.lowestLiveAddress)
      .map((s) => ({ stack: s.stack, blocks: s.liveBlocks, bytes: s.liveBytes }));
    let liveBlocks = 0;
    for (const s of rows) liveBlocks += s.liveBlocks;
    return {
      ...scalars,
      calls: t.calls,
      sizes,
      latency: r.latency.map((h) =>
        h === null ? undefined : LatencyHistogram.fromBuckets(h.counts, h),
      ),
      series,
      threads,
      sites,
      liveBlocks,
      neverFreed,
    };
  }
}
