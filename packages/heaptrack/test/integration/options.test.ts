/** The tracer's options: stacks off, depth, timing, sampling, lossy mode, bad values. */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import { findBackend } from '@heaphook/core';
import { libraryPath as tlsfLibraryPath } from '@heaphook/tlsf';
import { describe, expect, it } from 'vitest';

import { decodeLog, framesOf, record, summarize, Symbolizer } from '../../src/index.js';
import { logsIn, python3, scratch, tracer, traced, workload } from '../helpers.js';

async function counts(dir: string, env: Record<string, string>) {
  const run = traced(dir, workload, ['counts'], env);
  expect(run.status, run.stderr).toBe(0);
  const logs = logsIn(dir);
  expect(logs).toHaveLength(1);
  return { expected: JSON.parse(run.stdout) as Record<string, number>, log: logs[0]! };
}

describe('options', () => {
  it('HEAPHOOK_STACKS=0 records every call without stacks', async () => {
    const dir = scratch('nostacks');
    const { expected, log } = await counts(dir, { HEAPHOOK_STACKS: '0' });
    const s = await summarize(log);
    expect(s.process?.stacks).toBe(false);
    expect(s.stacks.size).toBe(0);
    expect(s.calls.malloc).toBe(expected.malloc);
    expect(s.calls.free).toBe(expected.free);
    expect(s.peakBytes).toBe(expected.peakBytes);
  });

  it('HEAPHOOK_STACK_DEPTH bounds the stacks', async () => {
    const dir = scratch('depth');
    const { log } = await counts(dir, { HEAPHOOK_STACK_DEPTH: '2' });
    const s = await summarize(log);
    expect(s.process?.stackDepth).toBe(2);
    const depths = [...s.stacks.keys()].map((id) => framesOf(s.stacks, id).length);
    expect(Math.max(...depths)).toBe(2);
  });

  it('HEAPHOOK_FREE_STACKS=1 records where blocks are freed', async () => {
    const dir = scratch('freestacks');
    const { expected, log } = await counts(dir, { HEAPHOOK_FREE_STACKS: '1' });
    const s = await summarize(log);
    expect(s.process?.freeStacks).toBe(true);
    expect(s.calls.free).toBe(expected.free);
    const freeStacks = new Set<number>();
    for await (const r of decodeLog(log)) {
      if (r.type === 'event' && r.op === 'free') {
        expect(r.stack).not.toBe(0);
        freeStacks.add(r.stack);
      }
    }
    const symbolizer = new Symbolizer(s.modules);
    const names = new Set<string>();
    for (const id of freeStacks) {
      const pcs = framesOf(s.stacks, id);
      const frames = await symbolizer.symbolize(pcs.slice(0, 1));
      for (const f of frames.get(pcs[0]!) ?? []) names.add(f.function);
    }
    expect(names).toContain('site_free');
  });

  it('HEAPHOOK_TIMING=1 records the duration of every call', async () => {
    const dir = scratch('timing');
    const { log } = await counts(dir, { HEAPHOOK_TIMING: '1' });
    let events = 0;
    let withDuration = 0;
    let total = 0;
    for await (const r of decodeLog(log)) {
      if (r.type !== 'event' || r.op === 'realloc_done') continue;
      events++;
      if (r.duration !== undefined) withDuration++;
      total += r.duration ?? 0;
    }
    expect(withDuration).toBe(events);
    expect(total).toBeGreaterThan(0);
  });

  it('event times are ns since start, within the run, in both clocks', async () => {
    for (const clock of ['tsc', 'monotonic']) {
      const dir = scratch(`clock-${clock}`);
      const { log } = await counts(dir, {
        HEAPHOOK_CLOCK: clock,
        HEAPHOOK_TIME_RESOLUTION: '1',
        HEAPHOOK_TIMING: '1',
      });
      let first = -1;
      let last = 0;
      let maxDuration = 0;
      let endTime = 0;
      for await (const r of decodeLog(log)) {
        if (r.type === 'event') {
          if (first < 0) first = r.time;
          last = Math.max(last, r.time);
          maxDuration = Math.max(maxDuration, r.duration ?? 0);
        } else if (r.type === 'end') endTime = r.time;
      }
      expect(first).toBeGreaterThanOrEqual(0);
      expect(last).toBeGreaterThan(first);
      expect(last).toBeLessThanOrEqual(endTime);
      expect(endTime).toBeLessThan(10e9); // the run takes well under 10 s
      expect(maxDuration).toBeGreaterThan(1000); // the 10 MB malloc and its page faults
      expect(maxDuration).toBeLessThan(1e9);
    }
  });

  it('HEAPHOOK_SAMPLE_BYTES samples by bytes; weights estimate the totals; frees do not distort', async () => {
    const dir = scratch('sampling');
    const run = traced(dir, workload, ['churn', '400000'], { HEAPHOOK_SAMPLE_BYTES: '4096' });
    expect(run.status, run.stderr).toBe(0);
    const s = await summarize(logsIn(dir)[0]!);
    expect(s.process?.sampling).toBe(true);
    expect(s.process?.sampleBytes).toBe(4096);
    // churn: 400000 mallocs of 16..527 bytes, mean 271.5 -> ~108.6 MB in all
    const exact = Array.from({ length: 400000 }, (_, i) => (i % 512) + 16).reduce((a, b) => a + b);
    expect(s.calls.malloc).toBeLessThan(400000 / 5); // far fewer records than calls
    expect(Math.abs(s.allocatedBytes - exact) / exact).toBeLessThan(0.05);
    // every block is freed at the end: the frees of unsampled blocks are ignored
    const mallocLeaks = s.leaks.filter((b) => b.op === 'malloc');
    expect(mallocLeaks).toEqual([]);
    // only the frees of sampled blocks are recorded
    expect(s.unknownFrees).toBe(0);
    expect(s.calls.free).toBeLessThanOrEqual(s.calls.malloc + s.calls.calloc + s.calls.realloc);
  });

  it('HEAPHOOK_ON_FULL=drop drops and counts instead of waiting', async () => {
    const dir = scratch('drop');
    const result = await record(workload, ['threads', '2', '300000'], {
      outputDir: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { HEAPHOOK_ON_FULL: 'drop', HEAPHOOK_BUFFER_SIZE: '64KiB', HEAPHOOK_STACKS: '0' },
    });
    expect(result.status, result.stderr).toBe(0);
    const s = await summarize(result.logs[0]!.path);
    expect(s.process?.dropWhenFull).toBe(true);
    expect(s.end?.dropped).toBeGreaterThan(0);
    // every call is either in the log or counted as dropped
    const recorded = s.calls.malloc + s.calls.free;
    expect(recorded).toBeLessThan(1_200_000);
    expect(recorded + s.end!.dropped).toBeGreaterThanOrEqual(1_200_000);
  });

  it('a bad value stops the program before main, naming the variable', () => {
    const dir = scratch('badconfig');
    const run = traced(dir, workload, ['counts'], { HEAPHOOK_STACK_DEPTH: 'deep' });
    expect(run.status).toBe(78);
    expect(run.stderr).toMatch(/HEAPHOOK_STACK_DEPTH/);
    expect(run.stdout).toBe('');
  });

  it('a ring buffer below 64KiB is refused, saying K is 1000 and KiB 1024', () => {
    const dir = scratch('smallbuffer');
    const run = traced(dir, workload, ['counts'], { HEAPHOOK_BUFFER_SIZE: '64K' });
    expect(run.status).toBe(78);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/HEAPHOOK_BUFFER_SIZE="64K".*K is 1000, KiB 1024.*e\.g\./);
    expect(run.stdout).toBe('');
  });
});

describe('tracing that cannot start', () => {
  // Before: no log, no line, exit 0; under `record` the collector died of SIGFPE closing the
  // log of a process that never sent its PROCESS record.
  const line =
    /heaptrack: cannot map a 2 GiB ring \(HEAPHOOK_BUFFER_SIZE=1\.5G\): Cannot allocate memory; not tracing\. Try HEAPHOOK_BUFFER_SIZE=8MiB/;
  const shell = (dir: string) =>
    `ulimit -v 4000000; cd ${dir}; HEAPHOOK_LOG_DIR=${dir} LD_PRELOAD=${tracer} exec ${workload} counts`;

  it('a ring that cannot be mapped (RLIMIT_AS) says so once and the program runs untouched', () => {
    const dir = scratch('nomap');
    const env: NodeJS.ProcessEnv = { ...process.env, HEAPHOOK_BUFFER_SIZE: '1.5G' };
    delete env.HEAPHOOK_COLLECTOR;
    const run = spawnSync('/bin/sh', ['-c', shell(dir)], { encoding: 'utf8', env });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).malloc).toBe(1008);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(line);
    expect(logsIn(dir)).toEqual([]);
  });

  it('the same under heaphook record: the line, the status, the collector unharmed', async () => {
    const dir = scratch('nomap-record');
    const result = await record('/bin/sh', ['-c', `ulimit -v 4000000; exec ${workload} counts`], {
      outputDir: dir,
      env: { HEAPHOOK_BUFFER_SIZE: '1.5G' },
      stdio: ['ignore', 'pipe', 'pipe'],
      quiet: true,
      vm: false,
    });
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).malloc).toBe(1008);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(line);
    // the shell traced itself until its exec; the program's log is empty and complete
    for (const log of result.logs) expect((await summarize(log.path)).end).toBeDefined();
  });
});

const backends = {
  example: findBackend('example').libraryPath,
  tlsf: tlsfLibraryPath(),
};

describe('stacking on another backend', () => {
  for (const [name, library] of Object.entries(backends)) {
    it.skipIf(!existsSync(library))(
      `LD_PRELOAD="heaptrack ${name}" traces the ${name} backend exactly`,
      async () => {
        const dir = scratch(`stacked-${name}`);
        const run = traced(dir, workload, ['counts'], {}, [tracer, library]);
        expect(run.status, run.stderr).toBe(0);
        const expected = JSON.parse(run.stdout) as Record<string, number>;
        const s = await summarize(logsIn(dir)[0]!);
        expect(s.calls.malloc).toBe(expected.malloc);
        expect(s.calls.realloc).toBe(expected.realloc);
        expect(s.calls.free).toBe(expected.free);
        expect(s.peakBytes).toBe(expected.peakBytes);
        expect(s.liveBytes).toBe(expected.leakedBytes);
        expect(s.anomalies).toBe(0);
        // and a real program runs on the traced backend
        const py = traced(dir, python3, ['-c', 'print(sum(range(1000)))'], {}, [tracer, library]);
        expect(py.status, py.stderr).toBe(0);
        expect(py.stdout).toBe('499500\n');
      },
    );
  }
});
