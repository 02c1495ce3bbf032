// The guard's native modules on their own, through test/native/guard_unit.c (the library's
// sources without its hooks): RTSan's pattern matching and a suppression file's rules
// (suppress.c); the table of sites, one counted entry per call, site and thread, and what a
// full table drops (violations.c); which policies and marks make a real-time context, and a
// policy set on another thread through the registry (state.c). A suppression file that cannot
// be read stops the program before main with one line.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { allChecksPassed, unitChecks } from '@heaphook/core/testing';

import { program } from '../helpers/programs.js';

const CHECKS = 36;

const dir = mkdtempSync(join(tmpdir(), 'heaphook-rtcheck-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runUnit(env: Record<string, string> = {}) {
  const clean = { ...process.env };
  delete clean.HEAPHOOK_RT_SUPPRESSIONS;
  return spawnSync(program('rt_guard_unit'), [join(dir, 'unit.supp')], {
    encoding: 'utf8',
    env: { ...clean, ...env },
    timeout: 30_000,
  });
}

describe("the guard's modules", () => {
  it(`pass their ${CHECKS} checks, each one named`, () => {
    const r = runUnit();
    const checks = unitChecks(r.stdout);
    expect(checks.failed, r.stdout).toEqual([]);
    expect(checks.passed).toBe(CHECKS);
    expect(checks.summary).toBe(allChecksPassed(CHECKS));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('a suppression file with a line of neither kind stops the program before main', () => {
    const file = join(dir, 'bad.supp');
    writeFileSync(file, 'call:malloc\nstack:log_message\n');
    const r = runUnit({ HEAPHOOK_RT_SUPPRESSIONS: file });
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^heaphook: HEAPHOOK_RT_SUPPRESSIONS="stack:log_message" is not lines call-stack-contains:NAME or function-name-matches:NAME, e\.g\. /,
      ),
    ]);
    expect(r.status).not.toBe(0);
  });

  it('a suppression file that cannot be read stops it with the variable and an example', () => {
    const missing = join(dir, 'missing.supp');
    const r = runUnit({ HEAPHOOK_RT_SUPPRESSIONS: missing });
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `heaphook: HEAPHOOK_RT_SUPPRESSIONS="${missing}" is not a readable file, e.g. HEAPHOOK_RT_SUPPRESSIONS=rtcheck.supp\n`,
    );
    expect(r.status).not.toBe(0);
  });
});
