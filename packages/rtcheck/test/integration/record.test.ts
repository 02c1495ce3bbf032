// The guard with heaptrack's tracer: `heaphook record -b rtcheck` traces the program through
// the guard (heaptrack first, the guard under it), and the guard's violations are reported on
// stderr at exit beside the log. Also the order of start-up that once hung: the tracer's
// first malloc, made while the guard resolves its functions, calls the guard's syscall().
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { libraryPath } from '@heaphook/core';

import { guardLibrary, heaphook, program } from '../helpers/programs.js';

const dir = mkdtempSync(join(tmpdir(), 'heaphook-rtcheck-record-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('with heaptrack', () => {
  it('record -b rtcheck: the log is written and the violations are reported', () => {
    const r = heaphook([
      'record',
      '-b',
      'rtcheck',
      '-o',
      dir,
      '--',
      program('rt_control_loop'),
      'fifo',
      '10',
    ]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/control loop: 10 steps/);
    expect(r.stderr).toMatch(
      /heaphook rtcheck: malloc called 10 times in real-time thread \d+ "control" \(SCHED_FIFO 10\)/,
    );
    expect(readdirSync(dir).filter((f) => /^heaplog\.\d+\.log$/.test(f)).length).toBeGreaterThan(0);
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
