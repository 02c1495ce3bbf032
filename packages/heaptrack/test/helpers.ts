/** Shared helpers of the heaptrack tests: built artefacts, scratch folders, traced runs. */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, expect } from 'vitest';

import {
  decodeLog,
  framesOf,
  Symbolizer,
  type ModuleRecord,
  type StackNodeRecord,
  type Summary,
} from '../src/index.js';

export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const release = join(packageDir, 'build', 'Release');
export const tracer = join(release, 'libheaphook_heaptrack.so');
export const workload = join(release, 'hh_test_workload');

/** What `hh_test_workload counts` prints it did (one JSON line): the exact figures to expect. */
export interface Expected {
  malloc: number;
  calloc: number;
  realloc: number;
  aligned: number;
  free: number;
  leakedBlocks: number;
  leakedBytes: number;
  peakBytes: number;
}
export const forker = join(release, 'hh_test_forker');
export { heaphookBin, processStates, withinOrExplain } from '@heaphook/core/testing';

if (!existsSync(tracer) || !existsSync(workload)) {
  throw new Error(`build the package first: npx nx build heaptrack (missing ${tracer})`);
}

const scratchDirs: string[] = [];

/** A fresh folder under test/tmp, removed after the file's tests (HEAPHOOK_KEEP_TEST_LOGS=1 keeps it). */
export function scratch(name: string): string {
  const base = join(packageDir, 'test', 'tmp');
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, `${name}-`));
  scratchDirs.push(dir);
  return dir;
}

afterAll(() => {
  if (process.env.HEAPHOOK_KEEP_TEST_LOGS === '1') return;
  for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

export function logsIn(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /^heaplog\.\d+(\.\d+)?\.log$/.test(f))
    .map((f) => join(dir, f))
    .sort();
}

/** Runs a command with the tracer preloaded (standalone mode), logs into dir. */
export function traced(
  dir: string,
  command: string,
  args: readonly string[],
  env: Record<string, string> = {},
  preload: readonly string[] = [tracer],
): SpawnSyncReturns<string> {
  const base = { ...process.env };
  delete base.HEAPHOOK_COLLECTOR;
  return spawnSync(command, args, {
    cwd: dir,
    encoding: 'utf8',
    env: { ...base, ...env, LD_PRELOAD: preload.join(':'), HEAPHOOK_LOG_DIR: dir },
    timeout: 120_000,
  });
}

/** python3 from the system (pyenv shims are shell scripts that exec another python). */
export const python3 = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** Every malloc's stack in a log as module+offset frames (innermost first), in log order: a
 * stack written so can be compared between two runs of the same binaries. */
export async function mallocStacks(log: string): Promise<string[]> {
  const modules: ModuleRecord[] = [];
  const nodes = new Map<number, StackNodeRecord>();
  const out: string[] = [];
  for await (const r of decodeLog(log)) {
    if (r.type === 'module') modules.push(r);
    else if (r.type === 'stack') nodes.set(r.id, r);
    else if (r.type === 'event' && r.op === 'malloc') {
      const frames = framesOf(nodes, r.stack).map((pc) => {
        const m = modules.findLast((mod) => pc >= mod.start && pc < mod.end);
        return m === undefined ? '?' : `${basename(m.path)}+${(pc - m.base).toString(16)}`;
      });
      out.push(frames.join(' < '));
    }
  }
  return out;
}

/** Function names of a stack, innermost first, symbolised. */
export async function functionsOf(summary: Summary, stack: number): Promise<string[]> {
  const pcs = framesOf(summary.stacks, stack);
  const frames = await new Symbolizer(summary.modules).symbolize(pcs);
  return pcs.flatMap((pc) => (frames.get(pc) ?? []).map((f) => f.function));
}

/** The figures of a `hh_test_workload counts` log against what the workload printed: every call
 * counted, its leaks, its peak, a clean end (the same on every architecture). */
export function expectExactCounts(s: Summary, expected: Expected): void {
  expect(s.calls.malloc).toBe(expected.malloc);
  expect(s.calls.calloc).toBe(expected.calloc);
  expect(s.calls.realloc).toBe(expected.realloc);
  expect(
    s.calls.posix_memalign +
      s.calls.memalign +
      s.calls.aligned_alloc +
      s.calls.valloc +
      s.calls.pvalloc,
  ).toBe(expected.aligned);
  expect(s.calls.free).toBe(expected.free);
  expect(s.leaks.length).toBe(expected.leakedBlocks);
  expect(s.liveBytes).toBe(expected.leakedBytes);
  expect(s.peakBytes).toBe(expected.peakBytes);
  expect(s.unknownFrees).toBe(0);
  expect(s.anomalies).toBe(0);
  expect(s.end?.reason).toBe('exit');
  expect(s.end?.dropped).toBe(0);
}
