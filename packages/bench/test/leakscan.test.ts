/** `leakscan`: both checkers find the leaked tenth of the heap; the table has a row per size. */
import { describe, expect, it } from 'vitest';

import { formatLeakScan, leakScan } from '../src/leakscan.js';

describe('leakscan', () => {
  it('heaphook and LeakSanitizer find the same leaked blocks', async () => {
    const rows = await leakScan({ sizes: [2000, 5000], runs: 1 });
    expect(rows.map((r) => r.blocks)).toEqual([2000, 5000]);
    for (const r of rows) {
      expect(r.heaphookLeaked).toBe(r.blocks / 10);
      expect(r.heaphookStoppedNs).toBeGreaterThan(0);
      if (r.lsanLeaked !== undefined) expect(r.lsanLeaked).toBe(r.blocks / 10);
    }
    const table = formatLeakScan(rows).trim().split('\n');
    expect(table).toHaveLength(4);
    expect(table[2]).toMatch(
      /^\| 2000 \| [\d.]+ \| -?[\d.]+ \| ([\d.-]+|n\/a) \| 200 \/ (200|n\/a) \|$/,
    );
  });
});
