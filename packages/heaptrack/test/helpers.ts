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
export { heaphookBin } from '@heaphook/core/testing';

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

/**
 * What every process under root (root included) is doing, thread by thread: its command line,
 * then per thread its name, state, wait channel, system call number and the top of its kernel
 * stack, and the user-space stacks of our own programs (gdb, where installed). For the message
 * of a wait that took too long, so that a hang seen once in a loaded CI run says where each
 * process stood. `group`: the processes of process group root instead, which keeps those whose
 * parent has exited (a detached heaphook record's collector and command).
 */
export function processStates(root: number, select: 'tree' | 'group' = 'tree'): string {
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid=,pgid='], { encoding: 'utf8' }).stdout ?? '';
  const children = new Map<number, number[]>();
  const group: number[] = [];
  for (const line of ps.split('\n')) {
    const [pid, ppid, pgid] = line.trim().split(/\s+/).map(Number);
    if (pid === undefined || ppid === undefined || Number.isNaN(pid)) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
    if (pgid === root) group.push(pid);
  }
  const tree: number[] = [];
  for (const queue = [root]; queue.length > 0;) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  const chosen = select === 'group' ? group : tree;
  if (chosen.length === 0) return `no process ${select === 'group' ? 'in group ' : ''}${root}\n`;
  const script = chosen
    .map(
      (pid) =>
        `if [ -d /proc/${pid} ]; then ` +
        `echo "process ${pid}: $(tr '\\0' ' ' < /proc/${pid}/cmdline 2>/dev/null)"; ` +
        `for t in /proc/${pid}/task/*; do ` +
        `echo "  thread \${t##*/} $(cat $t/comm 2>/dev/null) $(grep State $t/status 2>/dev/null) ` +
        `wchan=$(cat $t/wchan 2>/dev/null) syscall=$(cut -d' ' -f1 $t/syscall 2>/dev/null) ` +
        `kernel: $(head -n 3 $t/stack 2>/dev/null | sed 's/^\\[<[0-9a-f]*>\\] //' | tr '\\n' ' ')"; done; ` +
        // the user-space stacks of our own programs (not node's): where a hang waits
        `case "$(cat /proc/${pid}/comm)" in node) ;; *) command -v gdb >/dev/null && ` +
        `timeout 20 gdb -p ${pid} -batch -nx -ex 'thread apply all bt 12' 2>/dev/null | grep -E '^(Thread|#)' ;; esac; fi`,
    )
    .join('; ');
  return spawnSync('sh', ['-c', script], { encoding: 'utf8' }).stdout ?? '';
}

/**
 * The promise's value, or a failure with explain()'s text when it takes longer than ms: every
 * wait of these tests is on a condition with such a watchdog, never a bare sleep (the suite runs
 * on loaded 2-core machines), and a watchdog that fires says why (processStates).
 */
export async function withinOrExplain<T>(
  promise: Promise<T>,
  ms: number,
  explain: () => string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(explain())), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
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
