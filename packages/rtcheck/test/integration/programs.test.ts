// Real programs: python3 and a C++ program with std::vector in a real-time section; page
// faults of a loop on fresh memory against a prefaulted TLSF pool; and the shared set of real
// programs (python3, node, threads, a shell pipeline, a C compile) unchanged under the guard.
import { rmSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { prepareProgramDir, realPrograms, runProgram } from '@heaphook/core/testing';

import { rtcheck } from '../../src/index.js';
import { guardLibrary, program } from '../helpers/programs.js';

describe('python3 switched to SCHED_FIFO', () => {
  it('its allocations in the real-time part are caught, none before or after', async () => {
    const script = [
      'import os',
      'keep = [bytearray(100000) for i in range(5)]',
      'os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))',
      'blocks = [bytearray(100000) for i in range(50)]',
      'os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))',
      'more = [bytearray(100000) for i in range(500)]',
      'print(len(blocks))',
    ].join('\n');
    const r = await rtcheck('python3', ['-c', script], { stdio: 'pipe' });
    expect(r.programStatus).toBe(0);
    expect(r.stdout).toBe('50\n');
    const allocations = r.analysis.violations.filter((v) => /alloc/.test(v.call));
    // 50 bytearrays of 100 kB: at least one malloc each, and not the 500 made after
    const total = allocations.reduce((n, v) => n + v.count, 0);
    expect(total).toBeGreaterThanOrEqual(50);
    expect(total).toBeLessThan(200);
    expect(allocations.every((v) => v.policy === 'SCHED_FIFO')).toBe(true);
    expect(r.status).toBe(1);
  });
});

describe('a C++ program growing a std::vector in a real-time section', () => {
  it('catches operator new and operator delete (not the malloc inside them)', async () => {
    const r = await rtcheck(program('rt_vector'), ['1000'], { stdio: 'pipe' });
    expect(r.programStatus).toBe(0);
    const calls = new Map<string, number>();
    for (const v of r.analysis.violations) calls.set(v.call, (calls.get(v.call) ?? 0) + v.count);
    // 1000 longs by doubling: 11 allocations, 10 moves freed, and the last block at scope end
    expect(calls.get('operator new')).toBe(11);
    expect(calls.get('operator delete')).toBe(11);
    expect(calls.has('malloc')).toBe(false);
    const fill = r.analysis.violations.find((v) => v.call === 'operator new')!;
    expect(fill.frames.some((f) => /\bfill\b/.test(f.function))).toBe(true);
  });
});

describe('page faults inside the real-time context', () => {
  const BLOCKS = 64; // of 64 KiB: 16 pages each

  it('a loop touching fresh memory takes a fault per page; a prefaulted TLSF pool almost none', async () => {
    const fresh = await rtcheck(program('rt_faults'), [String(BLOCKS)], { stdio: 'pipe' });
    const pooled = await rtcheck(program('rt_faults'), [String(BLOCKS)], {
      backend: 'tlsf',
      env: { HEAPHOOK_TLSF_PREFAULT: '1', INITIAL_MEMPOOL_SIZE: '32M' },
      stdio: 'pipe',
    });
    expect(fresh.programStatus).toBe(0);
    expect(pooled.programStatus).toBe(0);
    const faults = (r: typeof fresh): number => r.analysis.pageFaults[0]!.minor;
    expect(fresh.analysis.pageFaults).toHaveLength(1);
    expect(pooled.analysis.pageFaults).toHaveLength(1);
    expect(faults(fresh)).toBeGreaterThanOrEqual(BLOCKS * 16 * 0.9);
    expect(faults(pooled)).toBeLessThan(BLOCKS);
    // the allocations themselves are violations either way
    expect(fresh.analysis.violations.map((v) => [v.call, v.count])).toEqual([['malloc', BLOCKS]]);
    expect(pooled.analysis.violations.map((v) => [v.call, v.count])).toEqual([['malloc', BLOCKS]]);
  });
});

describe('real programs outside any real-time context', () => {
  let dir = '';
  beforeAll(() => {
    dir = prepareProgramDir('heaphook-rtcheck-programs-');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(realPrograms.map((p) => [p.name, p] as const))('%s: same output, no report', (_n, p) => {
    const expected = runProgram(p.command, p.args, { cwd: dir, timeoutMs: 115_000 });
    expect(expected.status).toBe(0);
    const r = runProgram(p.command, p.args, {
      cwd: dir,
      preload: guardLibrary,
      timeoutMs: 115_000,
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(expected.stdout);
    expect(r.stderr).toBe(expected.stderr);
  });
});
