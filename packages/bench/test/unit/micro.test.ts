import Benchmark from 'benchmark';
import { describe, expect, it } from 'vitest';

import { ARMS, heapCases, loadMallocHeap, loadTlsfHeap, micro } from '../../src/micro.js';

describe('micro', () => {
  it('skips the suite with a message when the TLSF addon is not built', async () => {
    const lines: string[] = [];
    const out = await micro({
      quick: true,
      write: false,
      log: (l) => lines.push(l),
      loadTlsf: async () => ({
        skipped: 'skipped: the TLSF addon is not built; run npx nx build tlsf',
      }),
    });
    expect(out.results).toEqual([]);
    expect(out.suite).toBeUndefined();
    expect(out.skipped).toEqual([
      'tlsf: skipped: the TLSF addon is not built; run npx nx build tlsf',
    ]);
    expect(lines.join('\n')).toMatch(/tlsf: skipped: the TLSF addon is not built/);
  });

  it('runs one Benchmark.Suite of every case on TlsfHeap and on malloc through the addons', async () => {
    // The real addons: @heaphook/tlsf's TlsfHeap and this package's MallocHeap (built by the
    // package's build, which the test target depends on).
    const tlsf = await loadTlsfHeap();
    const malloc = await loadMallocHeap();
    expect('skipped' in tlsf ? tlsf.skipped : '').toBe('');
    expect('skipped' in malloc ? malloc.skipped : '').toBe('');
    const lines: string[] = [];
    const out = await micro({
      write: false,
      maxTime: 0.02, // a few samples each: the structure is checked here, not the figures
      minSamples: 3,
      log: (l) => lines.push(l),
    });
    expect(out.skipped).toEqual([]);
    const caseNames = heapCases({
      alloc: () => 0,
      free: () => {},
      realloc: () => 0,
      usableSize: () => 0,
    }).map(([n]) => n);
    expect(caseNames).toContain('alloc + free, 64 B aligned to 256');
    // the suite: each case on both arms, interleaved case by case, and nothing threw
    expect(out.suite!.name).toBe('tlsf-vs-malloc');
    expect(out.suite!.benchmarks).toEqual(
      caseNames.flatMap((c) => ARMS.map((arm) => `${arm}: ${c}`)),
    );
    expect(out.suite!.errors).toEqual([]);
    // every benchmark ran: a rate, samples, and the figures benchmark.js derives from them
    expect(out.results.map((r) => r.name)).toEqual(out.suite!.benchmarks);
    for (const r of out.results) {
      expect(r.suite).toBe('tlsf-vs-malloc');
      expect(r.samples).toBeGreaterThanOrEqual(3);
      expect(r.ops_per_s).toBeGreaterThan(0);
      expect(r.ns_per_op).toBeCloseTo(1e9 / r.ops_per_s, 6);
      expect(Number.isFinite(r.rme_percent)).toBe(true);
    }
    expect(new Set(out.results.map((r) => r.arm))).toEqual(new Set(ARMS));
    // the malloc arm really called the process's malloc through its addon
    expect(out.mallocCalls).toBeGreaterThan(1000);
    // the table: a row per case, both arms' figures and their ratio
    const rows = out.table.split('\n').slice(2);
    expect(rows).toHaveLength(caseNames.length);
    for (const [i, row] of rows.entries()) {
      expect(row).toMatch(
        new RegExp(
          `^\\| ${caseNames[i]!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} +\\| +[\\d.]+ ±\\d+% \\| +[\\d.]+ ±\\d+% \\| +[\\d.]+ \\|$`,
        ),
      );
    }
    expect(lines.join('\n')).toContain(out.table);
    expect(lines[0]).toBe(`benchmark.js ${Benchmark.version}, 0.02 s per case and arm`);
  }, 120_000);
});
