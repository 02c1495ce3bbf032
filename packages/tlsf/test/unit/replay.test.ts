/**
 * TlsfHeap.replay: many operations in one call, on blocks named by slots. It must do exactly
 * what the same alloc/free/realloc calls do one by one (heaphook recommend relies on it to
 * replay traces), stop at the first request the heap cannot serve, and report how far into
 * the pool its blocks reached.
 */
import { describe, expect, it } from 'vitest';

import { ReplayOp, TlsfHeap } from '../../src/index.js';

/** A small deterministic generator (xorshift32). */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

/** Random operations over `slots` slots: allocs (some aligned), frees, reallocs. */
function program(seed: number, count: number, slots: number): Float64Array {
  const next = rng(seed);
  const ops = new Float64Array(count * 4);
  const used = new Array<boolean>(slots).fill(false);
  for (let i = 0; i < count; i++) {
    const slot = Math.floor(next() * slots);
    const size = next() < 0.05 ? Math.floor(next() * 200_000) : Math.floor(next() * 2000);
    let op: number[];
    if (!used[slot]) {
      const align = next() < 0.1 ? 2 ** (5 + Math.floor(next() * 8)) : 0;
      op = [ReplayOp.ALLOC, slot, size, align];
      used[slot] = true;
    } else if (next() < 0.5) {
      op = [ReplayOp.FREE, slot, 0, 0];
      used[slot] = false;
    } else {
      const to = Math.floor(next() * slots);
      if (to !== slot && used[to]) {
        op = [ReplayOp.FREE, slot, 0, 0];
        used[slot] = false;
      } else {
        op = [ReplayOp.REALLOC, slot, size, to];
        used[slot] = false;
        used[to] = true;
      }
    }
    ops.set(op, i * 4);
  }
  return ops;
}

/** The same operations one call at a time; returns the failing index or -1, and the high water. */
function oneByOne(heap: TlsfHeap, ops: Float64Array): { failed: number; highWater: number } {
  const at = new Map<number, number>();
  let highWater = 0;
  for (let i = 0; i < ops.length / 4; i++) {
    const [op, slot, size, arg] = ops.subarray(i * 4, i * 4 + 4) as unknown as number[];
    let placed: number | null = null;
    if (op === ReplayOp.ALLOC) {
      placed = heap.alloc(size!, arg! > 16 ? arg : undefined);
      if (placed === null) return { failed: i, highWater };
      at.set(slot!, placed);
    } else if (op === ReplayOp.FREE) {
      heap.free(at.get(slot!)!);
      at.delete(slot!);
      continue;
    } else {
      placed = heap.realloc(at.get(slot!)!, size!);
      if (placed === null) return { failed: i, highWater };
      at.delete(slot!);
      at.set(arg!, placed);
    }
    highWater = Math.max(highWater, placed + Math.max(1, size!));
  }
  return { failed: -1, highWater };
}

describe('TlsfHeap.replay', () => {
  it('places every block exactly where the same calls one by one do', () => {
    for (const seed of [1, 2, 3]) {
      const ops = program(seed, 4000, 300);
      const batch = new TlsfHeap(64 << 20);
      const single = new TlsfHeap(64 << 20);
      expect(batch.replay(ops)).toBe(-1);
      const ref = oneByOne(single, ops);
      expect(ref.failed).toBe(-1);
      expect(batch.blocks()).toEqual(single.blocks());
      expect(batch.stats().highWater).toBe(ref.highWater);
      expect(batch.stats().peakUsed).toBe(single.stats().peakUsed);
      batch.check();
      batch.destroy();
      single.destroy();
    }
  });

  it('stops at the first request a pool that never grows cannot serve, as the calls fail', () => {
    const ops = program(7, 4000, 300);
    const batch = new TlsfHeap(1 << 20);
    const single = new TlsfHeap(1 << 20);
    const failed = batch.replay(ops);
    expect(failed).toBeGreaterThan(0);
    expect(failed).toBe(oneByOne(single, ops).failed);
    expect(batch.stats().growthCount).toBe(0);
    // Replayed in pieces, it stops at the same operation.
    const pieces = new TlsfHeap(1 << 20);
    let base = 0;
    let stop = -1;
    while (base < ops.length / 4 && stop < 0) {
      const n = Math.min(333, ops.length / 4 - base);
      const r = pieces.replay(ops.subarray(base * 4, (base + n) * 4), n);
      if (r >= 0) stop = base + r;
      base += n;
    }
    expect(stop).toBe(failed);
  });

  it('a growing heap grows instead of failing', () => {
    const ops = program(7, 4000, 300);
    const heap = new TlsfHeap({ initialPoolSize: 1 << 20, additionalPoolSize: 1 << 20 });
    expect(heap.replay(ops)).toBe(-1);
    expect(heap.stats().growthCount).toBeGreaterThan(0);
    heap.check();
  });

  it('rejects what is not a list of operations', () => {
    const heap = new TlsfHeap(1 << 20);
    expect(() => heap.replay(new Float32Array(4) as unknown as Float64Array, 1)).toThrow(
      /replay\(ops: Float64Array, count: number\)/,
    );
    expect(() => heap.replay(new Float64Array(4), 2)).toThrow(/count exceeds/);
    expect(() => heap.replay(Float64Array.of(9, 0, 16, 0))).toThrow(/unknown operation/);
    expect(heap.replay(Float64Array.of(ReplayOp.FREE, 5, 0, 0))).toBe(-1); // empty slot: skipped
  });
});
