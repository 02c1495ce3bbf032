// The arm64 tier of the tracer (npm run build-arm64, run under qemu-aarch64): the exact-count
// workload traced standalone and decoded here (the log format is the same on both
// architectures), its stacks against libgcc's _Unwind_Backtrace and symbolised to the right
// functions, and Debian's arm64 python3 traced. On arm64 the tracer walks stacks with
// _Unwind_Backtrace (the cached CFI unwinder is x86-64 code): the comparison checks that the
// default walk and HEAPHOOK_UNWIND=libgcc give every event the same stack.

import {
  AARCH64_PYTHON,
  aarch64PythonSkip,
  arm64Tier,
  isAarch64Elf,
  runAarch64,
} from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

import { summarize } from '../../src/index.js';
import {
  expectExactCounts,
  functionsOf,
  logsIn,
  mallocStacks,
  packageDir,
  scratch,
  type Expected,
} from '../helpers.js';

const tier = arm64Tier(packageDir, ['libheaphook_heaptrack.so', 'hh_test_workload']);
const [tracer, workload] = tier.files;
const TIMEOUT_MS = 300_000;

/** Runs an arm64 program traced standalone, its log in a fresh folder; returns the folder. */
function tracedAarch64(
  name: string,
  program: string,
  args: readonly string[],
  env: Record<string, string> = {},
): { dir: string; stdout: string } {
  const dir = scratch(name);
  const r = runAarch64(program, args, {
    preload: tracer,
    env: { ...env, HEAPHOOK_LOG_DIR: dir },
    cwd: dir,
    timeoutMs: TIMEOUT_MS - 10_000,
  });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return { dir, stdout: r.stdout };
}

describe.skipIf(tier.skip)('arm64 (qemu-aarch64): the tracer', () => {
  it('is built for 64-bit Arm', () => {
    expect(isAarch64Elf(tracer)).toBe(true);
    expect(isAarch64Elf(workload)).toBe(true);
  });

  it(
    'logs exactly the calls the workload made, with stacks that name its functions',
    async () => {
      const { dir, stdout } = tracedAarch64('arm64-counts', workload, ['counts']);
      const expected = JSON.parse(stdout) as Expected;
      const logs = logsIn(dir);
      expect(logs).toHaveLength(1);
      const s = await summarize(logs[0]!);
      expectExactCounts(s, expected);
      expect(s.leakSites).toHaveLength(1);
      const names = await functionsOf(s, s.leakSites[0]!.stack);
      expect(names[0]).toBe('leak_site');
      expect(names).toContain('main');
    },
    TIMEOUT_MS,
  );

  it(
    "gives every event the stack libgcc's _Unwind_Backtrace gives it",
    async () => {
      const n = '3000';
      const fast = tracedAarch64('arm64-unwind-default', workload, ['stacks', n]);
      const slow = tracedAarch64('arm64-unwind-libgcc', workload, ['stacks', n], {
        HEAPHOOK_UNWIND: 'libgcc',
      });
      const a = await mallocStacks(logsIn(fast.dir)[0]!);
      const b = await mallocStacks(logsIn(slow.dir)[0]!);
      expect(a.length).toBeGreaterThanOrEqual(3000);
      expect(new Set(a).size).toBeGreaterThan(20);
      expect(a.some((stack) => stack.includes('hh_test_workload+'))).toBe(true);
      expect(a).toEqual(b);
    },
    TIMEOUT_MS,
  );

  it.skipIf(aarch64PythonSkip())(
    "traces Debian's arm64 python3: a whole log, no anomaly",
    async () => {
      const { dir, stdout } = tracedAarch64('arm64-python', AARCH64_PYTHON, [
        '-c',
        "import json; print(len(json.dumps([{'k': i} for i in range(20000)])))",
      ]);
      expect(stdout).toBe('268890\n');
      const logs = logsIn(dir);
      expect(logs).toHaveLength(1);
      const s = await summarize(logs[0]!);
      expect(s.calls.malloc).toBeGreaterThan(10_000);
      expect(s.end?.reason).toBe('exit');
      expect(s.end?.dropped).toBe(0);
      expect(s.anomalies).toBe(0);
      expect(s.unknownFrees).toBe(0);
      expect(s.process?.argv[0]).toBe(AARCH64_PYTHON);
    },
    TIMEOUT_MS,
  );
});
