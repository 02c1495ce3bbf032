// The in-process TLSF heap (the addon), driven by random sequences from fast-check, with the
// invariants checked after every step: no two live blocks overlap, every block is aligned as
// asked and at least as large, contents survive other operations, the statistics agree with
// the blocks, and the full integrity walk passes.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';

import { TlsfHeap, type TlsfErrorCode } from '../../src/index.js';

interface Live {
  offset: number;
  size: number;
  align: number;
  fill: number;
}

type Op =
  | { kind: 'alloc'; size: number; alignLog: number }
  | { kind: 'free'; pick: number }
  | { kind: 'realloc'; pick: number; size: number };

const sizeArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 600 }) },
  { weight: 3, arbitrary: fc.integer({ min: 601, max: 20_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 20_001, max: 400_000 }) },
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('alloc' as const),
      size: sizeArb,
      alignLog: fc.oneof(
        { weight: 3, arbitrary: fc.constant(0) },
        { weight: 1, arbitrary: fc.integer({ min: 3, max: 17 }) },
      ),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('free' as const), pick: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('realloc' as const), pick: fc.nat(), size: sizeArb }),
  },
);

const heaps: TlsfHeap[] = [];
function makeHeap(arg: ConstructorParameters<typeof TlsfHeap>[0]): TlsfHeap {
  const heap = new TlsfHeap(arg);
  heaps.push(heap);
  return heap;
}
afterEach(() => {
  for (const heap of heaps.splice(0)) heap.destroy();
});

function checkInvariants(heap: TlsfHeap, live: Live[]): void {
  const sorted = [...live].sort((a, b) => a.offset - b.offset);
  let end = -Infinity;
  for (const block of sorted) {
    const usable = heap.usableSize(block.offset);
    expect(usable).toBeGreaterThanOrEqual(block.size);
    expect(block.offset % block.align).toBe(0);
    expect(block.offset % 16).toBe(0);
    // A block's head (one word) sits in front of it: blocks and heads never overlap.
    expect(block.offset - TlsfHeap.blockOverhead).toBeGreaterThanOrEqual(end);
    end = block.offset + usable;
    expect(heap.verify(block.offset, block.fill, block.size)).toBe(true);
  }
  const stats = heap.stats();
  expect(stats.usedBlocks).toBe(live.length);
  expect(stats.used + stats.free + stats.overhead).toBe(stats.managedBytes);
  expect(stats.overhead).toBe(stats.areas * TlsfHeap.poolOverhead);
  const blocks = heap.blocks();
  const free = blocks.filter((b) => !b.used);
  expect(blocks.filter((b) => b.used)).toHaveLength(live.length);
  expect(free).toHaveLength(stats.freeBlocks);
  expect(stats.largestFree).toBe(Math.max(0, ...free.map((b) => b.size)));
  expect(heap.check()).toBe(true);
}

function runOps(heap: TlsfHeap, ops: Op[], everyStep = true): Live[] {
  const live: Live[] = [];
  let fill = 1;
  for (const op of ops) {
    if (op.kind === 'alloc') {
      const align = op.alignLog === 0 ? 16 : 2 ** op.alignLog;
      const offset = op.alignLog === 0 ? heap.alloc(op.size) : heap.alloc(op.size, align);
      if (offset !== null) {
        const block = {
          offset,
          size: Math.max(op.size, 1),
          align: Math.max(align, 16),
          fill: fill++ & 255,
        };
        heap.fill(offset, block.fill, block.size);
        live.push(block);
      }
    } else if (live.length > 0) {
      const index = op.pick % live.length;
      const block = live[index]!;
      if (op.kind === 'free') {
        heap.free(block.offset);
        live.splice(index, 1);
      } else {
        const moved = heap.realloc(block.offset, op.size);
        if (moved !== null) {
          const size = Math.max(op.size, 1);
          const kept = Math.min(size, block.size);
          expect(heap.verify(moved, block.fill, kept)).toBe(true);
          block.offset = moved;
          block.size = size;
          heap.fill(moved, block.fill, size);
        }
      }
    }
    if (everyStep) checkInvariants(heap, live);
  }
  checkInvariants(heap, live);
  return live;
}

describe('TlsfHeap (property-based)', () => {
  it('keeps its invariants over random sequences in a fixed pool', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => {
        const heap = makeHeap(1 << 20);
        const live = runOps(heap, ops);
        for (const block of live) heap.free(block.offset);
        const stats = heap.stats();
        // Everything coalesces back into one free block.
        expect(stats.usedBlocks).toBe(0);
        expect(stats.freeBlocks).toBe(1);
        expect(stats.growthCount).toBe(0);
        heap.destroy();
      }),
      { numRuns: 150 },
    );
  });

  it('grows N, 2N, 4N ... like the preload library, and keeps its invariants', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 60 }),
        fc.integer({ min: 4096, max: 200_000 }),
        (ops, additional) => {
          const heap = makeHeap({ initialPoolSize: 8192, additionalPoolSize: additional });
          runOps(heap, ops);
          const { additions, growthCount, poolSize } = heap.stats();
          expect(additions).toHaveLength(growthCount);
          expect(poolSize).toBe(8192 + additions.reduce((a, b) => a + b, 0));
          // Each growth starts at N and doubles the previous addition.
          additions.forEach((size, i) => {
            expect(size === additional || size === 2 * additions[i - 1]!).toBe(true);
          });
          heap.destroy();
        },
      ),
      { numRuns: 80 },
    );
  });

  it('a long random run, checked at the end', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 2000, maxLength: 3000 }), (ops) => {
        const heap = makeHeap({ initialPoolSize: 4 << 20, additionalPoolSize: 1 << 20 });
        runOps(heap, ops, false);
        heap.destroy();
      }),
      { numRuns: 5 },
    );
  });
});

describe('TlsfHeap', () => {
  it('one word of overhead, 16-byte alignment, exact additions', () => {
    const heap = makeHeap({ initialPoolSize: 1 << 20, additionalPoolSize: 1 << 20 });
    const a = heap.alloc(100)!;
    expect(a % 16).toBe(0);
    expect(heap.stats().used).toBeLessThanOrEqual(100 + TlsfHeap.blockOverhead + 15);
    const big = heap.alloc(7 << 20);
    expect(big).not.toBeNull();
    expect(heap.stats().additions).toEqual([1 << 20, 2 << 20, 4 << 20, 8 << 20]);
    expect(heap.stats().growthCount).toBe(4);
  });

  it('aligns to 64 KiB and beyond, and realloc keeps the alignment', () => {
    const heap = makeHeap({ initialPoolSize: 64 << 20 });
    for (let log = 4; log <= 24; log++) {
      const align = 2 ** log;
      const p = heap.alloc(100, align)!;
      expect(p % align).toBe(0);
      const spacer = heap.alloc(10)!;
      const q = heap.realloc(p, 100_000)!;
      expect(q % align).toBe(0);
      heap.free(q);
      heap.free(spacer);
    }
    heap.check();
  });

  it('realloc grows into a free successor and shrinks in place', () => {
    const heap = makeHeap(1 << 20);
    const a = heap.alloc(100)!;
    const b = heap.alloc(100)!;
    const c = heap.alloc(100)!;
    heap.free(b);
    expect(heap.realloc(a, 200)).toBe(a);
    expect(heap.realloc(a, 20)).toBe(a);
    expect(heap.realloc(c, 100_000)).toBe(c);
  });

  it('a fixed pool never grows; impossible requests return null', () => {
    const heap = makeHeap(1 << 20);
    expect(heap.alloc(2 << 20)).toBeNull();
    expect(heap.alloc(2 ** 52)).toBeNull();
    expect(heap.stats().growthCount).toBe(0);
    const grower = makeHeap({
      initialPoolSize: 1 << 20,
      additionalPoolSize: 1 << 20,
      maxPoolSize: 1 << 30,
    });
    expect(grower.alloc(2 ** 40)).toBeNull();
    expect(grower.stats().growthCount).toBe(0);
  });

  const expectCode = (fn: () => void, code: TlsfErrorCode) => {
    try {
      fn();
    } catch (error) {
      expect((error as { code?: string }).code).toBe(code);
      return;
    }
    throw new Error(`expected ${code}`);
  };

  it('names double, interior and foreign frees (overwritten heads: see the native unit test)', () => {
    const heap = makeHeap(1 << 20);
    const a = heap.alloc(64)!;
    const b = heap.alloc(64)!;
    const c = heap.alloc(64)!;
    heap.free(b);
    expectCode(() => heap.free(b), 'DOUBLE_FREE');
    expectCode(() => heap.free(a + 16), 'INTERIOR');
    expectCode(() => heap.free(900 << 20), 'FOREIGN');
    // fill() cannot run past a block: filling all of d (b's place, before c) leaves c intact.
    const d = heap.alloc(64)!;
    expect(d).toBe(b);
    heap.fill(d, 0x41);
    heap.check();
    expectCode(() => heap.realloc(a + 32, 10), 'INTERIOR');
    expect(() => heap.check()).not.toThrow();
    heap.free(c);
    heap.free(a);
    heap.free(d);
  });

  it('destroy releases the heap', () => {
    const heap = new TlsfHeap(1 << 20);
    heap.destroy();
    expect(() => heap.alloc(1)).toThrow(/destroyed/);
  });
});
