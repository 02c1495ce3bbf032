// The guard with heaptrack's tracer: `heaphook record -b rtcheck` traces the program through
// the guard (heaptrack first, the guard under it); the guard's violations are reported on
// stderr at exit and written into the heaplog (RT_VIOLATION records), so that `heaphook report`
// shows them: text, --json (realtimeViolations) and HTML. Also the order of start-up that once hung: the tracer's
// first malloc, made while the guard resolves its functions, calls the guard's syscall().
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { libraryPath } from '@heaphook/core';
import { heaphookBin } from '@heaphook/core/testing';

import { guardLibrary, heaphook, program } from '../helpers/programs.js';

const dir = mkdtempSync(join(tmpdir(), 'heaphook-rtcheck-record-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `heaphook record -b rtcheck -o out -- rt_control_loop MODE STEPS`: the loop traced through
 * the guard. */
function recordLoop(out: string, mode: string, steps: number) {
  return heaphook([
    'record',
    '-b',
    'rtcheck',
    '-o',
    out,
    '--',
    program('rt_control_loop'),
    mode,
    String(steps),
  ]);
}

describe('with heaptrack', () => {
  it('record -b rtcheck: the log is written and the violations are reported', () => {
    const r = recordLoop(dir, 'fifo', 10);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/control loop: 10 steps/);
    expect(r.stderr).toMatch(
      /heaphook rtcheck: malloc called 10 times in real-time thread \d+ "control" \(SCHED_FIFO 10\)/,
    );
    expect(readdirSync(dir).filter((f) => /^heaplog\.\d+\.log$/.test(f)).length).toBeGreaterThan(0);
  });

  it('record -b rtcheck, then report: the violations are in the log, counts exact', () => {
    const out = mkdtempSync(join(dir, 'loop-'));
    const steps = 37;
    const r = recordLoop(out, 'fifo', steps);
    expect(r.status).toBe(0);
    const json = reportJson(out);
    // one call site in the control thread; the SCHED_OTHER worker allocates 20,000 times unseen
    expect(json.realtimeViolations).toHaveLength(1);
    const v = json.realtimeViolations[0]!;
    expect(v).toMatchObject({
      call: 'malloc',
      count: steps,
      thread: 'control',
      policy: 'SCHED_FIFO',
      priority: 10,
    });
    expect(v.tid).toBeGreaterThan(0);
    // the stack is the tracer's, symbolised by the report: the program's frames, innermost first
    expect(v.frames[0]).toMatchObject({ function: 'control_step' });
    expect(v.frames[0]!.file).toMatch(/control_loop\.c$/);
    expect(v.frames.map((f) => f.function)).toContain('control');
    expect(v.frames.some((f) => /hh_rt_|violation/.test(f.function))).toBe(false);
    expect(json.realtimeViolations.some((x) => x.thread === 'worker')).toBe(false);

    const text = heaphook(['report', out]);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(
      new RegExp(
        `real-time violations: ${steps} calls at 1 call site\\n  malloc called ${steps} times in real-time thread "control" \\(tid \\d+\\), SCHED_FIFO 10\\n      control_step \\(`,
      ),
    );

    // dump: the site's first record (count 1, its stack), then its count at exit (handed over by
    // the tracer's exit path and by the guard's, whichever runs while the log is open)
    const dump = spawnSync(process.execPath, [heaphookBin, 'dump', out], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024, // every event of the run, then the records
      timeout: 110_000,
    });
    expect(dump.status).toBe(0);
    const dumped = dump.stdout.split('\n').filter((l) => l.startsWith('# rt_violation'));
    expect(dumped.length).toBeGreaterThanOrEqual(2);
    expect(dumped[0]).toMatch(
      / call=malloc count=1 tid=\d+ thread="control" policy=1 priority=10 stack=[1-9]/,
    );
    expect(dumped.at(-1)).toMatch(new RegExp(` call=malloc count=${steps} `));

    const html = join(out, 'html');
    expect(heaphook(['report', '-o', html, '--formats', 'html', out]).status).toBe(0);
    const page = readFileSync(join(html, 'report.html'), 'utf8');
    expect(page).toContain('<h2 id="realtime-title">Real-time violations</h2>');
    expect(page).toMatch(
      new RegExp(
        `<table id="realtime-violations">.*<td>malloc</td><td class="num">${steps}</td><td>&quot;control&quot; \\(tid \\d+\\)</td><td>SCHED_FIFO 10</td><td><details><summary>control_step `,
      ),
    );
  });

  it('two functions allocating in the loop are two call sites, each with its own stack', () => {
    // The tracer's malloc calls the guard's: the site is the program's call, not the tracer's.
    const out = mkdtempSync(join(dir, 'two-'));
    const steps = 11;
    const r = recordLoop(out, 'two-sites', steps);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(
      new RegExp(`heaphook rtcheck: ${2 * steps} violations at 2 call sites`),
    );
    expect(r.stderr).not.toMatch(/libheaphook_heaptrack\.so/);
    const violations = reportJson(out).realtimeViolations;
    expect(violations.map((v) => [v.call, v.count, v.frames[0]?.function]).sort()).toEqual([
      ['malloc', steps, 'control_log'],
      ['malloc', steps, 'control_step'],
    ]);
  });

  it('record -b rtcheck of a loop that never enters a real-time context: none in the report', () => {
    const out = mkdtempSync(join(dir, 'none-'));
    const r = recordLoop(out, 'none', 10);
    expect(r.status).toBe(0);
    expect(reportJson(out).realtimeViolations).toEqual([]);
    expect(heaphook(['report', out]).stdout).not.toMatch(/real-time violations/);
  });

  it('a marked section (heaphook_rt_enter) under record: counted the same, policy SCHED_OTHER', () => {
    const out = mkdtempSync(join(dir, 'mark-'));
    const r = recordLoop(out, 'mark', 12);
    expect(r.status).toBe(0);
    const [v, ...rest] = reportJson(out).realtimeViolations;
    expect(rest).toEqual([]);
    expect(v).toMatchObject({
      call: 'malloc',
      count: 12,
      thread: 'control',
      policy: 'SCHED_OTHER',
    });
    expect(v!.frames[0]).toMatchObject({ function: 'control_step' });
  });

  it('standalone tracer preloaded before the guard: the final count reaches the log', () => {
    // The tracer's destructor may run before the guard's: it asks the guard for its counts.
    const out = mkdtempSync(join(dir, 'standalone-'));
    const r = spawnSync(program('rt_control_loop'), ['fifo', '9'], {
      env: {
        ...process.env,
        LD_PRELOAD: `${libraryPath('heaptrack')}:${guardLibrary}`,
        HEAPHOOK_LOG_DIR: out,
      },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(0);
    const [v] = reportJson(out).realtimeViolations;
    expect(v).toMatchObject({ call: 'malloc', count: 9, thread: 'control' });
  });

  it('with stacks off (HEAPHOOK_STACKS=0) the counts are still exact, the frames empty', () => {
    const out = mkdtempSync(join(dir, 'nostacks-'));
    const r = heaphook([
      'record',
      '-b',
      'rtcheck',
      '-o',
      out,
      '-e',
      'HEAPHOOK_STACKS=0',
      '--',
      program('rt_control_loop'),
      'fifo',
      '6',
    ]);
    expect(r.status).toBe(0);
    expect(reportJson(out).realtimeViolations).toEqual([
      expect.objectContaining({ call: 'malloc', count: 6, thread: 'control', frames: [] }),
    ]);
  });

  it("a fork child's violations are in the child's log, counted to its _exit", () => {
    // python3's child switches to SCHED_FIFO, allocates 50 bytearrays and leaves by os._exit,
    // which runs no destructor: the tracer's _exit hands over the guard's counts first.
    const python = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
      encoding: 'utf8',
    }).stdout.trim();
    const script = [
      'import os',
      'pid = os.fork()',
      'if pid == 0:',
      '    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))',
      '    blocks = [bytearray(100000) for i in range(50)]',
      '    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))',
      '    print(os.getpid(), flush=True)',
      '    os._exit(0)',
      'os.waitpid(pid, 0)',
      'more = [bytearray(100000) for i in range(50)]',
    ].join('\n');
    const out = mkdtempSync(join(dir, 'fork-'));
    const r = heaphook(['record', '-b', 'rtcheck', '-o', out, '--', python, '-c', script]);
    expect(r.status).toBe(0);
    const child = r.stdout.trim();
    expect(child).toMatch(/^\d+$/);
    const logs = readdirSync(out).filter((f) => /^heaplog\.\d+\.log$/.test(f));
    expect(logs).toContain(`heaplog.${child}.log`);
    for (const log of logs) {
      const violations = reportJson(join(out, log)).realtimeViolations;
      if (log !== `heaplog.${child}.log`) {
        expect(violations, log).toEqual([]);
        continue;
      }
      const mallocs = violations.filter((v) => v.call === 'malloc');
      const total = mallocs.reduce((n, v) => n + v.count, 0);
      expect(total).toBeGreaterThanOrEqual(50); // one at least per bytearray, not the parent's
      expect(total).toBeLessThan(100);
      expect(mallocs.every((v) => v.policy === 'SCHED_FIFO' && v.frames.length > 0)).toBe(true);
    }
  });

  it('a log recorded without the guard has an empty realtimeViolations', () => {
    const out = mkdtempSync(join(dir, 'plain-'));
    const r = heaphook(['record', '-o', out, '--', program('rt_control_loop'), 'fifo', '5']);
    expect(r.status).toBe(0);
    expect(reportJson(out).realtimeViolations).toEqual([]);
  });

  it('preloaded after the tracer, a program starts and ends', () => {
    const r = spawnSync('/bin/true', [], {
      env: { ...process.env, LD_PRELOAD: `${libraryPath('heaptrack')}:${guardLibrary}` },
      cwd: dir,
      timeout: 30_000,
    });
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
  });
});

interface RealtimeViolationJson {
  call: string;
  count: number;
  thread: string;
  tid: number;
  policy: string;
  priority: number;
  frames: { function: string; file: string | null; line: number | null }[];
}

/** `heaphook report --json` of the log a record wrote in out (or of that log). */
function reportJson(out: string): { realtimeViolations: RealtimeViolationJson[] } {
  const r = spawnSync(process.execPath, [heaphookBin, 'report', '--json', out], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024, // a python3 run's report names many stacks
    timeout: 110_000,
  });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return JSON.parse(r.stdout) as { realtimeViolations: RealtimeViolationJson[] };
}
