/**
 * `leakscan`: heaphook and every LeakSanitizer the machine can build (clang's, gcc's) find the
 * leaked tenth of the heap; the table has a row per size and a column per checker.
 */
import { describe, expect, it } from 'vitest';

import { formatLeakScan, leakScan, LSAN_COMPILERS } from '../../src/leakscan.js';

describe('leakscan', () => {
  it('heaphook and LeakSanitizer find the same leaked blocks', async () => {
    const rows = await leakScan({ sizes: [2000, 5000], runs: 1 });
    expect(rows.map((r) => r.blocks)).toEqual([2000, 5000]);
    for (const r of rows) {
      expect(r.heaphookLeaked).toBe(r.blocks / 10);
      expect(r.heaphookStoppedNs).toBeGreaterThan(0);
      expect(r.lsan.map((c) => c.compiler)).toEqual(LSAN_COMPILERS.map((c) => c.name));
      for (const c of r.lsan) if (c.exitNs !== undefined) expect(c.leaked).toBe(r.blocks / 10);
    }
    const table = formatLeakScan(rows).trim().split('\n');
    expect(table[0]).toBe(
      '| live blocks | heaphook: world stopped (ms) | heaphook: exit check (ms) | LeakSanitizer (clang): exit check (ms) | LeakSanitizer (gcc): exit check (ms) | leaked found (heaphook / LSan clang / LSan gcc) |',
    );
    expect(table[2]).toMatch(
      /^\| 2000 \| [\d.]+ \| -?[\d.]+ \| (-?[\d.]+|n\/a) \| (-?[\d.]+|n\/a) \| 200 \/ (200|n\/a) \/ (200|n\/a) \|$/,
    );
  });

  it('compares both LeakSanitizers on a machine set up by tools/install-system-packages.sh', async () => {
    const [row] = await leakScan({ sizes: [1000], runs: 1 });
    for (const c of row!.lsan) {
      const install = LSAN_COMPILERS.find((x) => x.name === c.compiler)!.install;
      expect(c.exitNs, `LeakSanitizer (${c.compiler}): install ${install}`).toBeDefined();
    }
  });
});
