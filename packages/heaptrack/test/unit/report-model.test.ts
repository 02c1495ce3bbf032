/**
 * The report's aggregation on synthetic records, as the replay's test oracle (test/oracle,
 * which native-report.test.ts compares with the native replay on real logs) computes it: what
 * counts as leaked (never freed, or the latest leak check's verdict), temporary allocations,
 * each site's share of the peak, the bounded heap-over-time series and the latency percentiles.
 */
import { describe, expect, it } from 'vitest';

import {
  HeapSeries,
  LatencyHistogram,
  leakVerdict,
  SizeHistogram,
  topSites,
  totalsBySite,
  type EventRecord,
  type LeakCheckRecord,
  type LogRecord,
  type Op,
} from '../../src/index.js';
import { formatCount } from '../../src/report/format.js';
import { AddressMap } from '../oracle/live.js';
import { oracleModelOf } from '../oracle/report.js';

function ev(op: Op, fields: Partial<EventRecord> = {}): EventRecord {
  return {
    type: 'event',
    op,
    time: 0,
    tid: 1,
    stack: 0,
    ptr: 0,
    oldPtr: 0,
    size: 0,
    count: 1,
    align: 0,
    duration: undefined,
    weight: undefined,
    split: false,
    ...fields,
  };
}

function check(fields: Partial<LeakCheckRecord> = {}): LeakCheckRecord {
  return {
    type: 'leak_check',
    check: 1,
    time: 0,
    trigger: 'exit',
    liveBlocks: 0,
    leakedBlocks: 0,
    leakedBytes: 0,
    reachableBlocks: 0,
    reachableBytes: 0,
    durationNs: 0,
    ...fields,
  };
}

function build(records: LogRecord[]) {
  return oracleModelOf(records);
}

describe('leakVerdict', () => {
  const neverFreed = totalsBySite([
    { ptr: 0x10, bytes: 100, stack: 1 },
    { ptr: 0x20, bytes: 50, stack: 2 },
    { ptr: 0x30, bytes: 30, stack: 1 },
  ]);

  it('without a leak check, leaked = never freed and nothing is reachable at exit', () => {
    const v = leakVerdict(neverFreed, undefined);
    expect(v.source).toBe('never-freed');
    expect(v.leakedBlocks).toBe(3);
    expect(v.leakedBytes).toBe(180);
    expect(v.sites).toEqual([
      { stack: 1, blocks: 2, bytes: 130 },
      { stack: 2, blocks: 1, bytes: 50 },
    ]);
    expect(v.reachableAtExitBlocks).toBe(0);
    expect(v.reachableAtExitBytes).toBe(0);
  });

  it("with a leak check, leaked = the check's LEAK blocks, reachable from its counts", () => {
    const v = leakVerdict(neverFreed, {
      record: check({ reachableBlocks: 2, reachableBytes: 130, leakedBlocks: 1, leakedBytes: 50 }),
      blocks: [{ ptr: 0x20, bytes: 50, stack: 2 }],
    });
    expect(v.source).toBe('leak-check');
    expect(v.leakedBlocks).toBe(1);
    expect(v.leakedBytes).toBe(50);
    expect(v.sites).toEqual([{ stack: 2, blocks: 1, bytes: 50 }]);
    expect(v.reachableAtExitBlocks).toBe(2);
    expect(v.reachableAtExitBytes).toBe(130);
  });
});

describe('ReportBuilder', () => {
  it('takes leaked blocks from the latest leak check, sizes and stacks from their allocations', () => {
    const m = build([
      ev('malloc', { ptr: 0x10, size: 100, stack: 7, time: 1 }),
      ev('malloc', { ptr: 0x20, size: 200, stack: 8, time: 2 }),
      ev('malloc', { ptr: 0x30, size: 300, stack: 9, time: 3 }),
      // a first check calls two blocks leaked, a later one only 0x20
      { type: 'leak', check: 1, ptr: 0x10, size: 100 },
      { type: 'leak', check: 1, ptr: 0x20, size: 200 },
      check({
        check: 1,
        leakedBlocks: 2,
        leakedBytes: 300,
        reachableBlocks: 1,
        reachableBytes: 300,
      }),
      { type: 'leak', check: 2, ptr: 0x20, size: 200 },
      check({
        check: 2,
        leakedBlocks: 1,
        leakedBytes: 200,
        reachableBlocks: 2,
        reachableBytes: 400,
      }),
    ]);
    expect(m.leaks.source).toBe('leak-check');
    expect(m.leaks.leakedBlocks).toBe(1);
    expect(m.leaks.leakedBytes).toBe(200);
    expect(m.leaks.sites).toEqual([{ stack: 8, blocks: 1, bytes: 200 }]);
    expect(m.leaks.reachableAtExitBlocks).toBe(2);
    expect(m.leaks.reachableAtExitBytes).toBe(400);
    expect(m.neverFreed.leakedBlocks).toBe(3);
    expect(m.neverFreed.leakedBytes).toBe(600);
    expect(m.latestLeakCheck?.check).toBe(2);
  });

  it('counts an allocation as temporary when the same thread frees it in its next event', () => {
    const m = build([
      ev('malloc', { ptr: 0x10, size: 8, stack: 1, tid: 1 }),
      ev('malloc', { ptr: 0x20, size: 8, stack: 2, tid: 2 }), // another thread in between
      ev('free', { ptr: 0x10, tid: 1 }), // thread 1's next event: temporary
      ev('malloc', { ptr: 0x30, size: 8, stack: 1, tid: 1 }),
      ev('malloc', { ptr: 0x40, size: 8, stack: 1, tid: 1 }),
      ev('free', { ptr: 0x30, tid: 1 }), // not the block of the previous event: not temporary
      ev('free', { ptr: 0x20, tid: 2 }), // thread 2's next event: temporary
    ]);
    expect(m.temporaryAllocations).toBe(2);
    expect(m.sites.find((s) => s.stack === 1)?.temporary).toBe(1);
    expect(m.sites.find((s) => s.stack === 2)?.temporary).toBe(1);
  });

  it("keeps each site's live bytes at the peak, the peak's time and the peak live blocks", () => {
    const m = build([
      ev('malloc', { ptr: 0x10, size: 100, stack: 1, time: 10 }),
      ev('malloc', { ptr: 0x20, size: 500, stack: 2, time: 20 }),
      ev('malloc', { ptr: 0x30, size: 50, stack: 1, time: 30 }), // peak: 650 at 30
      ev('free', { ptr: 0x20, time: 40 }),
      ev('malloc', { ptr: 0x40, size: 300, stack: 1, time: 50 }), // site 1 grows after the peak
      ev('malloc', { ptr: 0x50, size: 1, stack: 3, time: 60 }), // 4 live blocks, 451 bytes
    ]);
    expect(m.peakHeapBytes).toBe(650);
    expect(m.peakTimeNs).toBe(30);
    expect(m.peakLiveBlocks).toBe(4);
    expect(m.peakLiveBlocksTimeNs).toBe(60);
    const site = (stack: number) => m.sites.find((s) => s.stack === stack)!;
    expect(site(1).peakBytes).toBe(150);
    expect(site(2).peakBytes).toBe(500);
    expect(site(3).peakBytes).toBe(0);
    expect(site(1).allocations).toBe(3);
    expect(site(1).bytes).toBe(450);
    expect(topSites(m.sites, 'peakBytes', 10).map((s) => s.stack)).toEqual([2, 1]);
    expect(topSites(m.sites, 'allocations', 1).map((s) => s.stack)).toEqual([1]);
    expect(m.allocations).toBe(5);
    expect(m.frees).toBe(1);
    expect(m.finalLiveBytes).toBe(451);
  });

  it('a moved realloc frees the old block at once and adds the new one at realloc_done', () => {
    const m = build([
      ev('malloc', { ptr: 0x10, size: 100, stack: 1, time: 1 }),
      ev('realloc', { ptr: 0x20, oldPtr: 0x10, size: 400, stack: 2, time: 2, split: true }),
      ev('realloc_done', { time: 3 }),
      ev('free', { ptr: 0x20, time: 4 }),
    ]);
    expect(m.reallocs).toBe(1);
    expect(m.allocations).toBe(1);
    expect(m.events).toBe(3);
    expect(m.peakHeapBytes).toBe(400);
    expect(m.peakTimeNs).toBe(3);
    expect(m.leaks.leakedBlocks).toBe(0);
    expect(m.temporaryAllocations).toBe(1); // the realloc's block, freed by the next event
  });

  it('collects durations per function when they were recorded', () => {
    const records: LogRecord[] = [];
    for (let i = 1; i <= 1000; i++) {
      records.push(ev('malloc', { ptr: i * 16, size: 8, duration: i }));
      records.push(ev('free', { ptr: i * 16, duration: 5 }));
    }
    const m = build(records);
    const p = m.latency.get('malloc')!.percentiles();
    expect(p.count).toBe(1000);
    expect(p.max).toBe(1000);
    // log-linear buckets: within 1/16 above the true value
    expect(p.p50).toBeGreaterThanOrEqual(500);
    expect(p.p50).toBeLessThanOrEqual(500 * 1.0625);
    expect(p.p99).toBeGreaterThanOrEqual(990);
    expect(p.p99).toBeLessThanOrEqual(1000);
    expect(m.latency.get('free')!.percentiles().p999).toBe(5);
    expect(m.latency.has('calloc')).toBe(false);
  });

  it('puts allocation sizes in power-of-two buckets', () => {
    const m = build([
      ev('malloc', { ptr: 0x10, size: 0 }),
      ev('malloc', { ptr: 0x20, size: 1 }),
      ev('malloc', { ptr: 0x30, size: 1023 }),
      ev('calloc', { ptr: 0x40, size: 256, count: 4 }), // 1024 bytes
    ]);
    expect(m.sizeHistogram.rows()).toEqual([
      { from: 0, to: 1, count: 1, bytes: 0 },
      { from: 1, to: 2, count: 1, bytes: 1 },
      { from: 512, to: 1024, count: 1, bytes: 1023 },
      { from: 1024, to: 2048, count: 1, bytes: 1024 },
    ]);
  });
});

describe('HeapSeries', () => {
  it('stays at its capacity over any number of values and keeps the peak', () => {
    const s = new HeapSeries(64, 1);
    let peak = 0;
    let peakTime = 0;
    for (let t = 0; t < 1_000_000; t++) {
      const v = (t * 7919) % 100_003;
      if (v > peak) {
        peak = v;
        peakTime = t;
      }
      s.add(t, v);
    }
    const points = s.points();
    expect(points.length).toBeLessThanOrEqual(64);
    expect(Math.max(...points.map((p) => p.max))).toBe(peak);
    const top = points.find((p) => p.max === peak)!;
    expect(peakTime).toBeGreaterThanOrEqual(top.time);
    expect(peakTime).toBeLessThan(top.time + s.bucketWidth);
    expect(points.at(-1)!.last).toBe((999_999 * 7919) % 100_003);
  });
});

describe('histograms', () => {
  it('every latency bucket covers its values', () => {
    for (const v of [0, 1, 15, 16, 17, 31, 32, 33, 100, 1000, 12345, 1e9]) {
      const k = LatencyHistogram.bucketOf(v);
      const lo = k === 0 ? 0 : LatencyHistogram.upperBound(k - 1) + 1;
      expect(lo).toBeLessThanOrEqual(v);
      expect(LatencyHistogram.upperBound(k)).toBeGreaterThanOrEqual(v);
      expect(LatencyHistogram.upperBound(k)).toBeLessThanOrEqual(Math.max(v, 16) * 1.0625);
    }
  });

  it('size buckets are [2^(k-1), 2^k)', () => {
    expect(SizeHistogram.bucketOf(0)).toBe(0);
    expect(SizeHistogram.bucketOf(1)).toBe(1);
    expect(SizeHistogram.bucketOf(2)).toBe(2);
    expect(SizeHistogram.bucketOf(3)).toBe(2);
    expect(SizeHistogram.bucketOf(4096)).toBe(13);
  });
});

describe('AddressMap', () => {
  it('agrees with a Map over random inserts and deletes of 48-bit addresses', () => {
    const map = new AddressMap();
    const reference = new Map<number, number>();
    const inserted: number[] = [];
    let seed = 12345;
    const random = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    const base = 0x55d1c54f0000;
    const mismatches = (): number => {
      let n = 0;
      for (const [k, v] of reference) if (map.get(k) !== v) n++;
      return n;
    };
    for (let step = 0; step < 100_000; step++) {
      if (random() % 2 === 0 && inserted.length > 0) {
        // free a block allocated earlier (often already freed: then both say no)
        const ptr = inserted[random() % inserted.length]!;
        expect(map.delete(ptr)).toBe(reference.delete(ptr));
      } else {
        // addresses packed in a small range (collisions, long runs) and spread over the space
        const ptr =
          random() % 2 === 0 ? base + (random() % 4096) * 16 : 0x7f0000000000 + random() * 16;
        map.set(ptr, step);
        reference.set(ptr, step);
        inserted.push(ptr);
      }
      if (step % 10_000 === 0) expect(mismatches()).toBe(0);
    }
    expect(mismatches()).toBe(0);
    expect(map.size).toBe(reference.size);
    expect(new Map(map.entries())).toEqual(reference);
    expect(map.get(0x1000)).toBe(-1);
    expect(map.delete(0x1000)).toBe(false);
  });
});

describe('formatCount', () => {
  it('writes numbers as toLocaleString("en-US") does, without loading Intl', () => {
    const values = [0, -0, 7, 999, 1000, 1234567, -1234567, 0.5, 1234.5678, 999.9996, -0.0004];
    values.push(2 ** 53, 1e21, Number.NaN, Number.POSITIVE_INFINITY);
    let seed = 1;
    const random = (): number => ((seed = (seed * 48271) % 2147483647) / 2147483647) * 2 - 1;
    for (let i = 0; i < 20_000; i++) values.push(Math.round(random() * 1e12), random() * 1e6);
    for (const v of values) expect(formatCount(v), String(v)).toBe(v.toLocaleString('en-US'));
  });
});
