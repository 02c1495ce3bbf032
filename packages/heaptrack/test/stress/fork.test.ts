/**
 * Fork under load (native/track/fork.c, the library's fork module and its lock order):
 * test/native/fork_stress.c forks again and again while four threads allocate from ever new
 * call stacks (new stack-trie nodes all the time) into a 64 KiB ring (often full: the hooks
 * wait for the drain thread), optionally while leak checks run. No fork may deadlock, and each
 * process's log holds exactly its own marker calls: the parent one malloc(900000 + f) per
 * fork f, each child malloc(700000 + i) for i < 100, once each, and nothing of the other's.
 * The order before the fork module (the leak locks before the stack trie's) deadlocked this
 * program within its first 100 forks in three runs of three.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { libraryPath as tlsfLibraryPath } from '@heaphook/tlsf';
import { libraryPath as ucmLibraryPath } from '@heaphook/ucm-hooks';
import { describe, expect, it } from 'vitest';

import {
  decodeLogColumns,
  OPS,
  record,
  type EndRecord,
  type ProcessRecord,
} from '../../src/index.js';
import {
  logsIn,
  processStates,
  release,
  scratch,
  tracer,
  traced,
  withinOrExplain,
} from '../helpers.js';

const stress = join(release, 'hh_test_fork_stress');
const tlsf = tlsfLibraryPath();
const ucm = ucmLibraryPath();
const MARKER = 900000;
const CHILD = 700000;
const CHILD_CALLS = 100;
const MALLOC = OPS.indexOf('malloc');

interface LogFacts {
  process: ProcessRecord | undefined;
  end: EndRecord | undefined;
  /** malloc calls by size, for the marker sizes only */
  markers: Map<number, number>;
}

async function factsOf(path: string): Promise<LogFacts> {
  const facts: LogFacts = { process: undefined, end: undefined, markers: new Map() };
  for await (const batch of decodeLogColumns(path, { reuseColumns: true })) {
    const ev = batch.events;
    for (let k = 0; k < ev.length; k++) {
      const size = ev.size[k]!;
      if (ev.op[k] === MALLOC && size >= CHILD)
        facts.markers.set(size, (facts.markers.get(size) ?? 0) + 1);
    }
    for (const r of batch.records) {
      if (r.type === 'process') facts.process = r;
      if (r.type === 'end') facts.end = r;
    }
  }
  return facts;
}

/** Every log of the run: the parent's with one marker per fork, each child's with its own. */
async function expectExactMarkers(
  paths: readonly string[],
  forks: number,
  pid: number,
): Promise<void> {
  const facts = await Promise.all(paths.map(factsOf));
  const parent = facts.filter((f) => f.process?.pid === pid && !f.process.forkChild);
  const children = facts.filter((f) => f.process?.ppid === pid && f.process.forkChild);
  expect(parent).toHaveLength(1);
  expect(children).toHaveLength(forks);
  const expectedParent = new Map<number, number>();
  for (let f = 0; f < forks; f++) expectedParent.set(MARKER + f, 1);
  expect(parent[0]!.markers).toEqual(expectedParent);
  expect(parent[0]!.end?.reason).toBe('exit');
  const expectedChild = new Map<number, number>();
  for (let i = 0; i < CHILD_CALLS; i++) expectedChild.set(CHILD + i, 1);
  for (const child of children) {
    expect(child.markers).toEqual(expectedChild);
    expect(child.end?.reason).toBe('exit');
  }
}

function runStress(
  dir: string,
  args: string[],
  env: Record<string, string> = {},
  preload: string[] = [tracer],
): { pid: number; forks: number } {
  const run = traced(dir, stress, args, { HEAPHOOK_BUFFER_SIZE: '64KiB', ...env }, preload);
  expect(run.signal, `killed by ${run.signal} (SIGTERM: hung until the timeout)`).toBeNull();
  expect(run.status, run.stderr).toBe(0);
  const out = JSON.parse(run.stdout) as { forks: number; children_ok: number };
  expect(out.children_ok).toBe(out.forks);
  return { pid: run.pid!, forks: out.forks };
}

/** The stress program under heaphook record (the collector), a 64 KiB ring. 100 s at most (it
 * takes seconds), under the test's own 120 s: a hang says where each process stood. */
function recordStress(dir: string, args: string[]): ReturnType<typeof record> {
  return withinOrExplain(
    record(stress, args, {
      outputDir: dir,
      env: { HEAPHOOK_BUFFER_SIZE: '64KiB' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
    100_000,
    () =>
      `heaphook record of ${stress} ${args.join(' ')} has not ended:\n${processStates(process.pid)}`,
  );
}

describe('fork while four threads allocate from new stacks (fork module)', () => {
  it('standalone, a 64 KiB ring, 100 forks, twice: no deadlock, exact markers in parent and children', async () => {
    for (let round = 0; round < 2; round++) {
      const dir = scratch('fork-stress');
      const { pid, forks } = runStress(dir, ['100', '4']);
      await expectExactMarkers(logsIn(dir), forks, pid);
    }
  });

  it('while leak checks run (HEAPHOOK_LEAK_SIGNAL every 50 ms): no deadlock, exact markers', async () => {
    const dir = scratch('fork-stress-check');
    const { pid, forks } = runStress(dir, ['10', '4', 'check'], { HEAPHOOK_LEAK_SIGNAL: 'USR1' });
    await expectExactMarkers(logsIn(dir), forks, pid);
  });

  it('under heaphook record (collector): exact markers in every process', async () => {
    const dir = scratch('fork-stress-record');
    const result = await recordStress(dir, ['50', '4']);
    expect(result.status, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { forks: number; children_ok: number };
    expect(out.children_ok).toBe(50);
    const facts = await Promise.all(result.logs.map((l) => factsOf(l.path)));
    const parent = facts.find((f) => f.process?.forkChild === false)!;
    await expectExactMarkers(
      result.logs.map((l) => l.path),
      50,
      parent.process!.pid,
    );
  });

  it('traced over the core-built TLSF backend: exact markers', async () => {
    const dir = scratch('fork-stress-tlsf');
    const { pid, forks } = runStress(dir, ['50', '4'], {}, [tracer, tlsf]);
    await expectExactMarkers(logsIn(dir), forks, pid);
  });

  it('under the core-built TLSF backend alone (its fork module): 100 forks, every child exits 0', () => {
    const dir = scratch('fork-stress-tlsf-alone');
    const run = spawnSync(stress, ['100', '4'], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, LD_PRELOAD: tlsf },
      timeout: 120_000,
    });
    expect(run.signal, `killed by ${run.signal} (SIGTERM: hung until the timeout)`).toBeNull();
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ forks: 100, children_ok: 100 });
  });
});

/** The VM records of a log whose size is a marker block's (MARKER bytes to 1 MiB: not a thread's
 * stack or an arena). */
async function markerMappings(path: string): Promise<{ mapped: number; unmapped: number[] }> {
  const out = { mapped: 0, unmapped: [] as number[] };
  for await (const batch of decodeLogColumns(path, { reuseColumns: true })) {
    for (const r of batch.records) {
      if (r.type !== 'vm' || r.size < MARKER || r.size >= 1 << 20) continue;
      if (r.kind === 'mapped') out.mapped++;
      else out.unmapped.push(r.stack);
    }
  }
  return out;
}

// A free holds its record (reserved before the real free, published after) while glibc
// unmaps the block: the unmap's VM record must not wait for room in the ring, nor for the stack
// trie's lock, whose holder may wait for that room. Before native/track/vm.h's held events, this
// program hung (a 64 KiB ring, 20,000 unmapping frees: four runs of four) with one thread in
// free -> munmap -> the VM handler waiting for the trie lock, and the lock's holder waiting for
// room behind the free's unpublished record.
describe('frees that unmap while four threads fill a small ring (VM events inside free)', () => {
  const calls = 20000;
  const expectEveryUnmap = async (log: string) => {
    const vm = await markerMappings(log);
    expect(vm.mapped).toBe(calls);
    expect(vm.unmapped).toHaveLength(calls);
    // recorded after the free, with the free's call stack
    expect(vm.unmapped.filter((stack) => stack === 0)).toEqual([]);
  };

  it('standalone: no deadlock, every unmap recorded', async () => {
    const dir = scratch('unmap-stress');
    const run = traced(
      dir,
      stress,
      [String(calls), '4', 'unmap'],
      { HEAPHOOK_BUFFER_SIZE: '64KiB' },
      [ucm, tracer],
    );
    expect(run.signal, `killed by ${run.signal} (SIGTERM: hung until the timeout)`).toBeNull();
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe(`{"unmaps":${calls}}\n`);
    const logs = logsIn(dir);
    expect(logs).toHaveLength(1);
    await expectEveryUnmap(logs[0]!);
  });

  it('under heaphook record (collector): no deadlock, every unmap recorded', async () => {
    const dir = scratch('unmap-stress-record');
    const result = await recordStress(dir, [String(calls), '4', 'unmap']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.logs).toHaveLength(1);
    await expectEveryUnmap(result.logs[0]!.path);
  });
});
