import { describe, expect, it } from 'vitest';

import { bestAllocators, checkChecksums, median, stat, summarize } from '../../src/stats.js';
import { failedRun, fakeRun } from '../helpers.js';

describe('median and stat', () => {
  it('takes the middle value, or the mean of the two middle ones', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
    expect(() => median([])).toThrow();
  });

  it('reports median, min, max and count', () => {
    expect(stat([5, 1, 9, 3, 7])).toEqual({ median: 5, min: 1, max: 9, n: 5 });
  });
});

describe('summarize', () => {
  const keys = [
    { workload: 'churn', allocator: 'glibc', baseline: 'glibc' },
    { workload: 'churn', allocator: 'fast', baseline: 'glibc' },
    { workload: 'churn', allocator: 'broken', baseline: 'glibc' },
    { workload: 'churn', allocator: 'absent', baseline: 'glibc', status: 'skipped' as const },
  ];

  it('gives medians with min and max, and ratios to the baseline measured in the same run', () => {
    const runs = [
      fakeRun('churn', 'glibc', 0, 1.0, { ops_per_s: 100 }),
      fakeRun('churn', 'glibc', 1, 3.0, { ops_per_s: 50 }),
      fakeRun('churn', 'glibc', 2, 2.0, { ops_per_s: 80 }),
      fakeRun('churn', 'fast', 0, 0.5, { ops_per_s: 200 }),
      fakeRun('churn', 'fast', 1, 1.5, { ops_per_s: 100 }),
      fakeRun('churn', 'fast', 2, 1.0, { ops_per_s: 160 }),
    ];
    const cells = summarize(runs, keys);
    const glibc = cells.find((c) => c.allocator === 'glibc')!;
    const fast = cells.find((c) => c.allocator === 'fast')!;
    expect(glibc.metrics.wall_s).toEqual({ median: 2, min: 1, max: 3, n: 3 });
    expect(glibc.ratios.wall_s).toBe(1);
    expect(fast.status).toBe('ok');
    expect(fast.metrics.wall_s).toEqual({ median: 1, min: 0.5, max: 1.5, n: 3 });
    expect(fast.ratios.wall_s).toBe(0.5);
    expect(fast.ratios['reported.ops_per_s']).toBe(2);
    expect(cells.find((c) => c.allocator === 'absent')!.status).toBe('skipped');
  });

  it('marks a cell failed when any of its runs failed, keeps the error, and gives it no ratios', () => {
    const runs = [
      fakeRun('churn', 'glibc', 0, 1.0),
      fakeRun('churn', 'broken', 0, 1.0),
      failedRun('churn', 'broken', 1, 'exit code 2: verification failed: churn: block corrupted'),
    ];
    const broken = summarize(runs, keys).find((c) => c.allocator === 'broken')!;
    expect(broken.status).toBe('failed');
    expect(broken.failed_runs).toBe(1);
    expect(broken.runs).toBe(2);
    expect(broken.error).toMatch(/verification failed/);
    expect(broken.ratios).toEqual({});
  });

  it('gives no ratios when the baseline itself failed', () => {
    const runs = [
      failedRun('churn', 'glibc', 0, 'killed by SIGSEGV'),
      fakeRun('churn', 'fast', 0, 1.0),
    ];
    const cells = summarize(runs, keys);
    expect(cells.find((c) => c.allocator === 'glibc')!.status).toBe('failed');
    expect(cells.find((c) => c.allocator === 'fast')!.ratios).toEqual({});
  });
});

describe('checkChecksums', () => {
  it('fails a run whose checksum differs from the one glibc computed', () => {
    const runs = [
      fakeRun('churn', 'glibc', 0, 1, { checksum: 'aaaa' }),
      fakeRun('churn', 'good', 0, 1, { checksum: 'aaaa' }),
      fakeRun('churn', 'wrong', 0, 1, { checksum: 'bbbb' }),
      fakeRun('other', 'wrong', 0, 1, { checksum: 'cccc' }),
    ];
    const out = checkChecksums(runs);
    expect(out.map((r) => r.status)).toEqual(['ok', 'ok', 'failed', 'ok']);
    expect(out[2]!.error).toMatch(/wrong result: checksum bbbb, glibc computed aaaa/);
  });

  it('takes the most common checksum when glibc has no passing run', () => {
    const runs = [
      failedRun('w', 'glibc', 0, 'crash'),
      fakeRun('w', 'a', 0, 1, { checksum: 'x' }),
      fakeRun('w', 'b', 0, 1, { checksum: 'x' }),
      fakeRun('w', 'c', 0, 1, { checksum: 'y' }),
    ];
    expect(checkChecksums(runs).map((r) => r.status)).toEqual(['failed', 'ok', 'ok', 'failed']);
  });
});

describe('bestAllocators', () => {
  const cells = summarize(
    [
      fakeRun('w', 'glibc', 0, 2),
      fakeRun('w', 'a', 0, 1),
      fakeRun('w', 'b', 0, 1),
      failedRun('w', 'c', 0, 'x'),
    ],
    ['glibc', 'a', 'b', 'c'].map((allocator) => ({ workload: 'w', allocator, baseline: 'glibc' })),
  );

  it('names the lowest median among passing cells, every one of them on a tie', () => {
    expect(bestAllocators(cells, 'w', 'wall_s')).toEqual(['a', 'b']);
  });

  it('names none when every cell has the same value', () => {
    expect(bestAllocators(cells, 'w', 'minflt')).toEqual([]);
  });
});
