/**
 * Exact counts: the workload makes known calls and prints what a correct trace contains; the
 * trace, standalone and under `heaphook record`, must match it exactly, and the stacks of its
 * allocation sites must resolve to the right function names.
 */

import { describe, expect, it } from 'vitest';

import {
  framesOf,
  readBuildId,
  record,
  summarize,
  symbolFileFor,
  Symbolizer,
} from '../../src/index.js';
import {
  expectExactCounts,
  functionsOf,
  logsIn,
  mallocStacks,
  scratch,
  traced,
  workload,
  type Expected,
} from '../helpers.js';

async function check(log: string, expected: Expected): Promise<void> {
  const s = await summarize(log);
  expectExactCounts(s, expected);
  expect(s.calls.posix_memalign).toBe(10);
  expect(s.calls.valloc).toBe(5);
  expect(s.calls.pvalloc).toBe(5);
  expect(s.process?.argv).toEqual([workload, 'counts']);
  expect(s.process?.stacks).toBe(true);

  // The leaks all come from leak_site, called from the workload's counts (inlined in main).
  expect(s.leakSites).toHaveLength(1);
  const leakStack = await functionsOf(s, s.leakSites[0]!.stack);
  expect(leakStack[0]).toBe('leak_site');
  expect(leakStack).toContain('main');
  expect(leakStack.indexOf('leak_site')).toBeLessThan(leakStack.indexOf('main'));
  // The module map names the program with its build id.
  const program = s.modules.find((m) => m.path === workload);
  expect(program?.buildId).toMatch(/^[0-9a-f]{40}$/);
  expect(program?.buildId).toBe(readBuildId(workload));
  // A file whose build id is not the one recorded is not used for symbols.
  expect(symbolFileFor(program!, '/nonexistent')).toBe(workload);
  expect(symbolFileFor({ ...program!, buildId: '00'.repeat(20) }, '/nonexistent')).toBeUndefined();
}

async function allocationSites(log: string): Promise<Set<string>> {
  const s = await summarize(log);
  const sites = new Set<string>();
  for (const id of s.stacks.keys()) {
    const fns = await functionsOf(s, id);
    if (fns[0] !== undefined) sites.add(fns[0]);
  }
  return sites;
}

describe('exact counts of a known workload', () => {
  it('standalone (LD_PRELOAD): counts, peak, leaks and stacks are exact', async () => {
    const dir = scratch('counts');
    const run = traced(dir, workload, ['counts']);
    expect(run.status, run.stderr).toBe(0);
    const expected = JSON.parse(run.stdout) as Expected;
    expect(expected.realloc).toBe(300);
    const logs = logsIn(dir);
    expect(logs).toHaveLength(1);
    await check(logs[0]!, expected);
    const sites = await allocationSites(logs[0]!);
    for (const fn of ['site_malloc', 'site_calloc', 'site_realloc', 'peak_site', 'leak_site']) {
      expect(sites).toContain(fn);
    }
  });

  it('under heaphook record (collector): the same exact figures', async () => {
    const dir = scratch('counts-record');
    const result = await record(workload, ['counts'], {
      outputDir: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.logs).toHaveLength(1);
    expect(result.logs[0]!.reason).toBe('exit');
    await check(result.logs[0]!.path, JSON.parse(result.stdout) as Expected);
  });

  it('threads: every call of 4 threads is recorded, with the right thread ids', async () => {
    const dir = scratch('threads');
    const result = await record(workload, ['threads', '4', '20000'], {
      outputDir: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(result.status, result.stderr).toBe(0);
    const s = await summarize(result.logs[0]!.path);
    expect(s.calls.malloc).toBe(80_000);
    expect(s.calls.free).toBe(80_000);
    expect(s.anomalies).toBe(0);
    expect(s.unknownFrees).toBe(0);
    // What stays live is glibc's per-thread bookkeeping (calloc'd TLS vectors), no malloc.
    expect(s.leaks.filter((b) => b.op === 'malloc')).toEqual([]);
  });
});

describe('calls at the edges', () => {
  it('failures, zero sizes and overflows keep the log consistent', async () => {
    for (const codec of ['zstd', 'none']) {
      const dir = scratch(`edges-${codec}`);
      const run = traced(dir, workload, ['edges'], { HEAPHOOK_COMPRESS: codec });
      expect(run.status, run.stderr).toBe(0);
      const expected = JSON.parse(run.stdout) as { live: number; nulls: number };
      expect(expected.nulls).toBe(6);
      const s = await summarize(logsIn(dir)[0]!);
      expect(s.anomalies).toBe(0);
      expect(s.unknownFrees).toBe(0);
      expect(s.failedCalls).toBe(5); // malloc, calloc, realloc, reallocarray, posix_memalign
      expect(s.calls.reallocarray).toBe(2);
      expect(s.calls.free).toBe(3); // malloc(0)'s block, the aligned block, grown
      const workloadLeaks = s.leaks.filter((b) => b.weight === 100);
      expect(workloadLeaks.length).toBe(2); // keep and arr stay live
      expect(workloadLeaks.reduce((a, b) => a + b.weight, 0)).toBe(expected.live);
    }
  });
});

describe('ordering across threads', () => {
  it('threads trading blocks (free, realloc, malloc of addresses just released elsewhere)', async () => {
    const dir = scratch('trade');
    const result = await record(workload, ['trade', '4', '100000'], {
      outputDir: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { HEAPHOOK_STACKS: '0' },
    });
    expect(result.status, result.stderr).toBe(0);
    const s = await summarize(result.logs[0]!.path);
    expect(s.calls.malloc).toBeGreaterThan(50_000);
    expect(s.calls.realloc).toBeGreaterThan(50_000);
    // the log's order is one the allocator could have seen: no address is handed out twice,
    // no free of a block the log does not have, and nothing of the workload's is left
    expect(s.anomalies).toBe(0);
    expect(s.unknownFrees).toBe(0);
    expect(s.leaks.filter((b) => b.op === 'malloc' || b.op === 'realloc')).toEqual([]);
  });
});

describe('the cached CFI unwinder', () => {
  async function stackSet(log: string): Promise<Set<string>> {
    const s = await summarize(log);
    const symbolizer = new Symbolizer(s.modules);
    const out = new Set<string>();
    for (const id of s.stacks.keys()) {
      const node = s.stacks.get(id)!;
      // only whole stacks: nodes that are the innermost frame of some event are enough
      if ([...s.stacks.values()].some((n) => n.parent === id)) continue;
      const pcs = framesOf(s.stacks, node.id);
      const frames = await symbolizer.symbolize(pcs);
      out.add(
        pcs
          .map((pc) =>
            frames
              .get(pc)
              ?.map((f) => f.function)
              .join('/'),
          )
          .join(' < '),
      );
    }
    return out;
  }

  it('gives every event the stack libgcc gives it, over call paths that change in every way', async () => {
    // The fast unwinder reuses the outer part of a thread's previous walk when it is
    // unchanged; the workload's stacks mode varies callers, depths and outer frames at random.
    const fast = scratch('unwind-cache-fast');
    const slow = scratch('unwind-cache-libgcc');
    const n = '20000';
    expect(traced(fast, workload, ['stacks', n], { HEAPHOOK_UNWIND: 'fast' }).status).toBe(0);
    expect(traced(slow, workload, ['stacks', n], { HEAPHOOK_UNWIND: 'libgcc' }).status).toBe(0);
    const a = await mallocStacks(logsIn(fast)[0]!);
    const b = await mallocStacks(logsIn(slow)[0]!);
    expect(a.length).toBeGreaterThanOrEqual(20000);
    expect(new Set(a).size).toBeGreaterThan(20); // many distinct paths
    expect(a.length).toBe(b.length);
    const firstDifference = a.findIndex((stack, i) => stack !== b[i]);
    expect(
      firstDifference,
      `event ${firstDifference}: ${a[firstDifference]} vs ${b[firstDifference]}`,
    ).toBe(-1);
  });

  it('gives the same stacks as libgcc _Unwind_Backtrace', async () => {
    const fast = scratch('unwind-fast');
    const slow = scratch('unwind-libgcc');
    expect(traced(fast, workload, ['counts'], { HEAPHOOK_UNWIND: 'fast' }).status).toBe(0);
    expect(traced(slow, workload, ['counts'], { HEAPHOOK_UNWIND: 'libgcc' }).status).toBe(0);
    const a = await stackSet(logsIn(fast)[0]!);
    const b = await stackSet(logsIn(slow)[0]!);
    expect(a.size).toBeGreaterThan(3);
    expect([...a].sort()).toEqual([...b].sort());
  });
});
