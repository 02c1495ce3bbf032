import { describe, expect, it } from 'vitest';

import { micro, tlsfCases, type TlsfHeapLike } from '../src/micro.js';

describe('micro', () => {
  it('skips the TLSF suite with a message when the addon is not built', async () => {
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
    expect(out.skipped).toEqual([
      'tlsf: skipped: the TLSF addon is not built; run npx nx build tlsf',
    ]);
    expect(lines.join('\n')).toMatch(/tlsf: skipped: the TLSF addon is not built/);
  });

  it('drives TlsfHeap through alloc(size, align) and free(offset)', () => {
    // A stand-in heap that checks the calls are paired and aligned as asked.
    const live = new Set<number>();
    let next = 0;
    class FakeHeap implements TlsfHeapLike {
      constructor(readonly size: number) {}
      alloc(size: number, align = 1): number {
        next = Math.ceil((next + 16) / align) * align;
        const o = next;
        next += size;
        live.add(o);
        return o;
      }
      free(offset: number): void {
        if (!live.delete(offset)) throw new Error(`free of ${offset} not allocated`);
      }
    }
    const cases = tlsfCases(FakeHeap);
    expect(cases.map(([name]) => name)).toContain('alloc + free, 64 B aligned to 256');
    for (const [, fn] of cases) for (let i = 0; i < 100; i++) fn();
    // everything but the churn table (at most 4096 blocks) and the probe block was freed
    expect(live.size).toBeLessThanOrEqual(4097);
  });
});
