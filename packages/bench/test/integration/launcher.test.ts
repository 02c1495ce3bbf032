import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { listBackends } from '@heaphook/core';
import { describe, expect, it } from 'vitest';

import { discoverAllocators } from '../../src/allocators.js';
import { classifyRun, lastJsonLine, runOne } from '../../src/launcher.js';
import { selectWorkloads } from '../../src/workloads.js';
import type { LauncherReport } from '../../src/types.js';

const report = (over: Partial<LauncherReport> = {}): LauncherReport => ({
  exit_code: 0,
  signal: 0,
  timed_out: false,
  exec_errno: 0,
  wall_ns: 1e8,
  utime_us: 90000,
  stime_us: 10000,
  maxrss_kb: 4096,
  minflt: 900,
  majflt: 0,
  nvcsw: 1,
  nivcsw: 2,
  ...over,
});

const good = '{"workload":"churn","ok":true,"ops":10,"checksum":"00ff"}\n';

describe('classifyRun', () => {
  it('passes a run that exited 0 and printed ok=true', () => {
    expect(classifyRun(report(), good, '', 60)).toEqual({
      status: 'ok',
      reported: { workload: 'churn', ok: true, ops: 10, checksum: '00ff' },
    });
  });

  it("fails a wrong result, quoting the workload's verification line", () => {
    const c = classifyRun(
      report({ exit_code: 2 }),
      '',
      'some noise\nverification failed: churn: block 0x1 corrupted\n',
      60,
    );
    expect(c.status).toBe('failed');
    expect(c.error).toBe('exit code 2: verification failed: churn: block 0x1 corrupted');
  });

  it('fails a crash with the signal name', () => {
    expect(classifyRun(report({ exit_code: -1, signal: 11 }), '', '', 60).error).toBe(
      'killed by SIGSEGV',
    );
    expect(
      classifyRun(report({ exit_code: -1, signal: 6 }), '', 'free(): invalid pointer\n', 60).error,
    ).toBe('killed by SIGABRT: free(): invalid pointer');
  });

  it('counts a timeout as its own status', () => {
    expect(
      classifyRun(report({ timed_out: true, signal: 9, exit_code: -1 }), '', '', 30),
    ).toMatchObject({ status: 'timeout', error: 'timed out after 30 s' });
  });

  it('fails a run that printed no result, or ok=false', () => {
    expect(classifyRun(report(), 'hello\n', '', 60)).toMatchObject({
      status: 'failed',
      error: 'no result line (JSON) on stdout',
    });
    expect(classifyRun(report(), '{"ok":false}\n', '', 60).status).toBe('failed');
  });

  it('fails when the program could not start or the launcher said nothing', () => {
    expect(
      classifyRun(
        report({ exec_errno: 2, exit_code: 127 }),
        '',
        'hh-run: cannot run /nope: No such file or directory\n',
        60,
      ).error,
    ).toMatch(/cannot run \/nope/);
    expect(classifyRun(null, '', '', 60).status).toBe('failed');
  });
});

describe('lastJsonLine', () => {
  it("finds the result among a wrapper's output (KDE heaptrack prints around it)", () => {
    const out =
      'heaptrack output will be written to "/tmp/x/heaptrack.zst"\nstarting application, this might take some time...\n' +
      good +
      'Heaptrack finished! Now run the following to investigate the data:\n\n  heaptrack --analyze "/tmp/x/heaptrack.zst"\n';
    expect(lastJsonLine(out)).toMatchObject({ workload: 'churn', ok: true });
    expect(lastJsonLine('{not json}\n')).toBeNull();
    expect(lastJsonLine('[1,2]\n')).toBeNull();
  });
});

describe('a traced run', () => {
  it("counts the calls in heaphook's log: the workload's own operations plus its start-up", async () => {
    const tracer = discoverAllocators({ backends: listBackends() }).tracers.find(
      (t) => t.name === 'heaphook-heaptrack',
    )!;
    expect(tracer.status, tracer.reason).toBe('ready');
    const [churn] = selectWorkloads({
      profile: 'quick',
      threads: [1],
      only: ['churn'],
      sizeOverride: 20_000,
    });
    const scratchRoot = mkdtempSync(join(tmpdir(), 'bench-trace-calls-'));
    try {
      const run = await runOne(0, 0, churn!, tracer, {
        timeoutS: 60,
        scratchRoot,
        countTraceCalls: true,
      });
      expect(run.status, run.error).toBe('ok');
      const ops = run.reported!.ops as number;
      expect(ops).toBeGreaterThan(0);
      // churn makes exactly `ops` malloc and free calls; the C runtime adds a handful (stdio).
      expect(run.trace_calls).toBeGreaterThanOrEqual(ops);
      expect(run.trace_calls).toBeLessThan(ops + 100);
      expect(run.trace_bytes).toBeGreaterThan(0);
    } finally {
      rmSync(scratchRoot, { recursive: true, force: true });
    }
  });
});

describe("the workloads' quick knobs (--slots, --probe-ms)", () => {
  const glibc = discoverAllocators({ backends: [] }).allocators.find((a) => a.name === 'glibc')!;
  const run = async (name: string, args: string[]) => {
    const [w] = selectWorkloads({ profile: 'default', threads: [1], only: [name] });
    const scratchRoot = mkdtempSync(join(tmpdir(), 'bench-knobs-'));
    try {
      return await runOne(0, 0, { ...w!, args }, glibc, { timeoutS: 60, scratchRoot });
    } finally {
      rmSync(scratchRoot, { recursive: true, force: true });
    }
  };

  it('latency_b2b: --slots sets the table (and so the heap), --probe-ms the stall probe', async () => {
    const small = await run('latency_b2b-t1', [
      '--size=1000',
      '--threads=1',
      '--slots=100',
      '--probe-ms=600',
    ]);
    expect(small.status, small.error).toBe('ok');
    expect(small.reported).toMatchObject({ ops: 1000, threads: 1 });
    // the probe is a busy loop of 600 ms of CLOCK_MONOTONIC (the default: 250 ms)
    expect(small.wall_s).toBeGreaterThanOrEqual(0.6);
    // 100 slots: about 50 live blocks of 7.3 KiB on average
    expect(small.peak_rss_bytes).toBeLessThan(16 << 20);
    const full = await run('latency_b2b-t1', ['--size=1000', '--threads=1', '--probe-ms=1']);
    expect(full.status, full.error).toBe('ok');
    // the default 20000 slots: about 10000 live blocks, ~73 MiB
    expect(full.peak_rss_bytes).toBeGreaterThan(48 << 20);
  });

  it('latency: --probe-ms sets the stall probe; a program without the knob ignores it', async () => {
    const lat = await run('latency-t1', ['--size=100', '--threads=1', '--probe-ms=600']);
    expect(lat.status, lat.error).toBe('ok');
    expect(lat.wall_s).toBeGreaterThanOrEqual(0.6);
    expect(lat.reported?.stalls_1us_per_s).toEqual(expect.any(Number));
    const churn = await run('churn', ['--size=1000', '--slots=5', '--probe-ms=5']);
    expect(churn.status, churn.error).toBe('ok');
    const bad = await run('churn', ['--size=1000', '--slots=0']);
    expect(bad.exit_code).toBe(64);
  });
});
