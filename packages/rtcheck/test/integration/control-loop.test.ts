// A C control loop allocating exactly N times from control_step, beside a SCHED_OTHER worker
// that allocates freely: the real-time context is found from the scheduling policy (three
// ways of setting it) or from marks (heaphook/rt.h, RTSan's names), over glibc and TLSF.
import { describe, expect, it } from 'vitest';

import { rtcheck, type Violation } from '../../src/index.js';
import { program } from '../helpers/programs.js';

const STEPS = 250;

function onlyControlStep(violations: readonly Violation[]): Violation {
  expect(violations.map((v) => [v.call, v.thread])).toEqual([['malloc', 'control']]);
  const v = violations[0]!;
  expect(v.count).toBe(STEPS);
  expect(v.frames[0]?.function).toBe('control_step');
  expect(v.frames[0]?.file).toMatch(/control_loop\.c$/);
  expect(v.frames[0]?.line).toBeGreaterThan(0);
  return v;
}

describe('a loop switched to SCHED_FIFO', () => {
  it.each([
    ['fifo', 'pthread_setschedparam on itself'],
    ['attr', 'created with SCHED_FIFO attributes'],
    ['sched', 'sched_setscheduler(0, SCHED_FIFO)'],
    ['by-main', 'pthread_setschedparam from the main thread'],
    ['setattr', 'syscall(SYS_sched_setattr)'],
  ])('%s (%s): exactly N mallocs, control_step in the stack, the worker never', async (mode) => {
    const r = await rtcheck(program('rt_control_loop'), [mode, String(STEPS)], { stdio: 'pipe' });
    expect(r.programStatus).toBe(0);
    expect(r.stdout).toBe(`control loop: ${STEPS} steps\n`);
    const v = onlyControlStep(r.analysis.violations);
    expect(v.policy).toBe('SCHED_FIFO');
    expect(v.priority).toBe(10);
    expect(r.analysis.pageFaults.map((f) => f.thread)).toEqual(['control']);
    expect(r.status).toBe(1);
  });

  it('counts the same over the TLSF backend', async () => {
    const r = await rtcheck(program('rt_control_loop'), ['fifo', String(STEPS)], {
      backend: 'tlsf',
      stdio: 'pipe',
    });
    expect(r.programStatus).toBe(0);
    onlyControlStep(r.analysis.violations);
  });

  it('--mark-only ignores the policy', async () => {
    const r = await rtcheck(program('rt_control_loop'), ['fifo', String(STEPS)], {
      markOnly: true,
      stdio: 'pipe',
    });
    expect(r.analysis.violations).toEqual([]);
    expect(r.status).toBe(0);
  });
});

describe('a loop marked in the code', () => {
  it.each([
    ['mark', 'heaphook_rt_enter/exit'],
    ['rtsan', '__rtsan_realtime_enter/exit'],
  ])('%s (%s): exactly N mallocs from control_step', async (mode) => {
    const r = await rtcheck(program('rt_control_loop'), [mode, String(STEPS)], { stdio: 'pipe' });
    expect(r.programStatus).toBe(0);
    expect(onlyControlStep(r.analysis.violations).policy).toBe('SCHED_OTHER');
    expect(r.status).toBe(1);
  });

  it('the same binary runs without heaphook (the marks are weak)', async () => {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(program('rt_control_loop'), ['mark', '10'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('control loop: 10 steps\n');
  });
});

describe('no real-time context', () => {
  it('reports nothing and exits 0', async () => {
    const r = await rtcheck(program('rt_control_loop'), ['none', String(STEPS)], {
      stdio: 'pipe',
    });
    expect(r.analysis.violations).toEqual([]);
    expect(r.analysis.pageFaults).toEqual([]);
    expect(r.status).toBe(0);
  });
});

describe('which threads and when', () => {
  it('--threads: only threads whose name matches count', async () => {
    const others = await rtcheck(program('rt_control_loop'), ['fifo', String(STEPS)], {
      threads: '^work',
      stdio: 'pipe',
    });
    expect(others.analysis.violations).toEqual([]);
    expect(others.analysis.pageFaults).toEqual([]);
    expect(others.status).toBe(0);
    const control = await rtcheck(program('rt_control_loop'), ['fifo', String(STEPS)], {
      threads: '^(control|rt_)',
      stdio: 'pipe',
    });
    onlyControlStep(control.analysis.violations);
  });

  it('--after TIME: the steps of the warm-up do not count', async () => {
    const r = await rtcheck(program('rt_control_loop'), ['warmup-sleep', String(STEPS)], {
      after: '200ms',
      stdio: 'pipe',
    });
    expect(r.programStatus).toBe(0);
    onlyControlStep(r.analysis.violations); // STEPS, not 2 * STEPS
  });

  it('--after SIGUSR2: nothing counts until the program receives it', async () => {
    const r = await rtcheck(program('rt_control_loop'), ['warmup-signal', String(STEPS)], {
      after: 'SIGUSR2',
      stdio: 'pipe',
    });
    expect(r.programStatus).toBe(0);
    onlyControlStep(r.analysis.violations);
  });

  it('--after with something else is one clear error', async () => {
    await expect(
      rtcheck(program('rt_control_loop'), ['none', '1'], { after: '2x', stdio: 'pipe' }),
    ).rejects.toThrow(/--after 2x: give a warm-up time \(500ms, 2s, 1m\) or a signal/);
  });
});
