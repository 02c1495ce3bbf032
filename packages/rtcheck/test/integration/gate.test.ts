// The command as a CI gate: exit status, --abort, suppressions, --json, the program's output
// left alone, and the guard's own environment variables.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { rtcheck } from '../../src/index.js';
import { readSuppressions } from '../../src/suppressions.js';
import { guardLibrary, heaphook, program } from '../helpers/programs.js';

const dir = mkdtempSync(join(tmpdir(), 'heaphook-rtcheck-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('exit status', () => {
  it("is the program's when it failed, even with violations", () => {
    const r = heaphook(['rtcheck', '--', program('rt_blocking'), 'exit3']);
    expect(r.status).toBe(3);
    expect(r.stderr).toMatch(/malloc called 1 time/);
  });

  it('is 1 with violations, 0 without', () => {
    expect(heaphook(['rtcheck', '--', program('rt_control_loop'), 'fifo', '5']).status).toBe(1);
    expect(heaphook(['rtcheck', '--', program('rt_control_loop'), 'none', '5']).status).toBe(0);
  });
});

describe('output', () => {
  it("leaves the program's stdout alone and writes the JSON asked for", () => {
    const json = join(dir, 'out.json');
    const r = heaphook(['rtcheck', '--json', json, '--', program('rt_control_loop'), 'fifo', '7']);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('control loop: 7 steps\n');
    expect(r.stderr).toMatch(/malloc called 7 times in real-time thread "control"/);
    expect(r.stderr).toMatch(/control_step \(.*control_loop\.c:\d+\)/);
    const report = JSON.parse(readFileSync(json, 'utf8')) as {
      violations: {
        call: string;
        count: number;
        thread: string;
        policy: string;
        frames: { function: string; file?: string; line?: number }[];
      }[];
      exitStatus: number;
    };
    expect(report.violations).toHaveLength(1);
    const v = report.violations[0]!;
    expect([v.call, v.count, v.thread, v.policy]).toEqual(['malloc', 7, 'control', 'SCHED_FIFO']);
    expect(v.frames[0]).toMatchObject({ function: 'control_step', line: expect.any(Number) });
    expect(report.exitStatus).toBe(1);
  });
});

describe('bad arguments', () => {
  it('a --json path that cannot be written stops before the program runs', () => {
    const r = heaphook([
      'rtcheck',
      '--json',
      join(dir, 'no-such-folder', 'out.json'),
      '--',
      program('rt_control_loop'),
      'none',
      '1',
    ]);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe(''); // the program never ran
    expect(r.stderr).toMatch(
      /--json .*out\.json: .*no such file or directory.*; name a file in a folder you can write/,
    );
  });

  it('an unknown backend is named with the installed ones', () => {
    const r = heaphook(['rtcheck', '-b', 'nosuch', '--', program('rt_control_loop'), 'none', '1']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/no heaphook backend named "nosuch" \(installed: .*rtcheck.*tlsf/);
  });
});

describe('--abort', () => {
  it('stops at the first violation with its stack', async () => {
    const r = await rtcheck(program('rt_control_loop'), ['fifo', '100'], {
      abort: true,
      stdio: 'pipe',
    });
    expect(r.programStatus).toBe(134); // SIGABRT
    expect(r.status).toBe(134);
    expect(r.stdout).toBe(''); // it never got to its last line
    expect(r.analysis.aborted).toBe(true);
    expect(r.analysis.violations.map((v) => [v.call, v.count])).toEqual([['malloc', 1]]);
    expect(r.analysis.violations[0]!.frames[0]!.function).toBe('control_step');
  });

  it('passes over a suppressed call and stops at the next', async () => {
    const supp = file('abort.supp', 'function-name-matches:malloc\n');
    const r = await rtcheck(program('rt_blocking'), ['suppressed'], {
      abort: true,
      suppressionsFile: supp,
      suppressions: readSuppressions(supp),
      stdio: 'pipe',
    });
    expect(r.programStatus).toBe(134);
    expect(r.analysis.violations.map((v) => v.call)).toEqual(['free']);
  });
});

describe('suppressions', () => {
  it("RTSan's call-stack-contains: a function anywhere in the stack", async () => {
    const supp = file('stack.supp', '# RTSan format\ncall-stack-contains:log_message\n');
    const r = await rtcheck(program('rt_blocking'), ['suppressed'], {
      suppressions: readSuppressions(supp),
      stdio: 'pipe',
    });
    expect(r.analysis.violations).toEqual([]);
    expect(r.analysis.suppressed.map((v) => v.call).sort()).toEqual(['free', 'malloc']);
    expect(r.status).toBe(0);
  });

  it("RTSan's function-name-matches: the intercepted call, with wildcards and anchors", async () => {
    const supp = file('name.supp', 'function-name-matches:^mal*c$\n');
    const r = await rtcheck(program('rt_blocking'), ['suppressed'], {
      suppressions: readSuppressions(supp),
      stdio: 'pipe',
    });
    expect(r.analysis.violations.map((v) => v.call)).toEqual(['free']);
    expect(r.status).toBe(1);
  });

  it("heaphook's file: and thread: kinds, through the CLI", () => {
    const supp = file('heaphook.supp', 'file:control_loop.c\n');
    const r = heaphook([
      'rtcheck',
      '--suppressions',
      supp,
      '--',
      program('rt_control_loop'),
      'fifo',
      '5',
    ]);
    expect(r.stderr).toMatch(/no violation in a real-time context; 5 suppressed/);
    expect(r.status).toBe(0);
    const byThread = file('thread.supp', 'thread:^control$\n');
    expect(
      heaphook([
        'rtcheck',
        '--suppressions',
        byThread,
        '--',
        program('rt_control_loop'),
        'fifo',
        '5',
      ]).status,
    ).toBe(0);
  });

  it('a line that is no suppression is one clear error', () => {
    const bad = file('bad.supp', 'interceptor_via_fun:malloc\n');
    const r = heaphook([
      'rtcheck',
      '--suppressions',
      bad,
      '--',
      program('rt_control_loop'),
      'none',
      '1',
    ]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      /bad\.supp:1: "interceptor_via_fun:malloc" is not a suppression; write call-stack-contains:NAME/,
    );
  });
});

describe('the guard without the command (a launch file)', () => {
  it('HEAPHOOK_RT_GUARD=report prints the violations on stderr at exit', () => {
    const r = spawnSync(program('rt_control_loop'), ['fifo', '3'], {
      encoding: 'utf8',
      env: { ...process.env, LD_PRELOAD: guardLibrary, HEAPHOOK_RT_GUARD: 'report' },
    });
    expect(r.status).toBe(0); // the program's own status: only the command is a gate
    expect(r.stdout).toBe('control loop: 3 steps\n');
    expect(r.stderr).toMatch(
      /heaphook rtcheck: malloc called 3 times in real-time thread \d+ "control" \(SCHED_FIFO 10\)/,
    );
  });

  it('HEAPHOOK_RT_GUARD=abort stops the program', () => {
    const r = spawnSync(program('rt_control_loop'), ['fifo', '3'], {
      encoding: 'utf8',
      env: { ...process.env, LD_PRELOAD: guardLibrary, HEAPHOOK_RT_GUARD: 'abort' },
    });
    expect(r.signal).toBe('SIGABRT');
    expect(r.stderr).toMatch(/malloc called 1 time .*\n[^]*stopping \(HEAPHOOK_RT_GUARD=abort\)/);
  });

  it.each([
    [
      'HEAPHOOK_RT_THREADS',
      '(',
      /HEAPHOOK_RT_THREADS="\(" is not a POSIX extended regular expression/,
    ],
    ['HEAPHOOK_RT_AFTER', '2x', /HEAPHOOK_RT_AFTER="2x" is not a warm-up time/],
    ['HEAPHOOK_RT_MARK_ONLY', 'maybe', /HEAPHOOK_RT_MARK_ONLY="maybe"/],
  ])('a bad %s stops the program before main with one line', (name, value, message) => {
    const r = spawnSync(program('rt_control_loop'), ['none', '1'], {
      encoding: 'utf8',
      env: { ...process.env, LD_PRELOAD: guardLibrary, [name]: value },
    });
    expect(r.status).toBe(78);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('a program the guard never ran in is said so, not passed as clean', () => {
    const r = heaphook([
      'rtcheck',
      '--threads',
      '(',
      '--',
      program('rt_control_loop'),
      'none',
      '1',
    ]);
    expect(r.status).toBe(78);
    expect(r.stderr).toMatch(/no process wrote a report: the guard did not run/);
  });

  it('a bad HEAPHOOK_RT_GUARD stops the program before main, naming the variable', () => {
    const r = spawnSync(program('rt_control_loop'), ['none', '1'], {
      encoding: 'utf8',
      env: { ...process.env, LD_PRELOAD: guardLibrary, HEAPHOOK_RT_GUARD: 'loud' },
    });
    expect(r.status).toBe(78);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/HEAPHOOK_RT_GUARD/);
  });
});
