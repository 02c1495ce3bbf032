// The per-call instruction counts behind the README's worst case: scripts/worst-case-instructions.mjs
// runs tlsf_stress under callgrind with one dump per malloc-family call. This checks that the
// measurement attributes every call (one dump per call, each entry point seen) and that its
// figures are those of one sorted sample; the figures themselves are in the README.
import { unmet } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

// @ts-expect-error: a plain ESM script without type declarations
import { measure } from '../../scripts/worst-case-instructions.mjs';

interface EntryFigures {
  calls: number;
  median: number;
  p99: number;
  p99_9: number;
  max: number;
}

describe.skipIf(unmet('valgrind'))('worst-case instructions per call', () => {
  it('counts every call of a stress run, one callgrind dump each', () => {
    const r = measure({
      calls: 300,
      env: { HEAPHOOK_TLSF_PREFAULT: '1', INITIAL_MEMPOOL_SIZE: '16M' },
    }) as {
      calls_made: number;
      per_entry: Record<string, EntryFigures>;
    };
    const counted = Object.values(r.per_entry).reduce((n, e) => n + e.calls, 0);
    // the stress's own calls, plus the few the C library makes (thread creation, stdio)
    expect(r.calls_made).toBeGreaterThan(1000);
    expect(counted).toBeGreaterThanOrEqual(r.calls_made);
    expect(counted).toBeLessThan(r.calls_made + 200);
    for (const name of ['malloc', 'free', 'realloc', 'posix_memalign']) {
      const e = r.per_entry[name]!;
      expect(e.calls).toBeGreaterThan(0);
      expect(e.median).toBeGreaterThan(0);
      expect(e.p99).toBeGreaterThanOrEqual(e.median);
      expect(e.p99_9).toBeGreaterThanOrEqual(e.p99);
      expect(e.max).toBeGreaterThanOrEqual(e.p99_9);
    }
  }, 300_000);
});
