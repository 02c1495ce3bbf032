// Real programs under libheaphook_tlsf.so (the shared set of @heaphook/core/testing: python3,
// node, threads, a forking shell pipeline, a C compile) must print exactly what they print on
// glibc's malloc: with the default pool, with a pool so small that it grows during the run,
// and in checking mode.
import { rmSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { prepareProgramDir, realPrograms } from '@heaphook/core/testing';

import { loggedAdditions, run, type RunResult } from '../helpers/run.js';

let dir = '';
beforeAll(() => {
  dir = prepareProgramDir('heaphook-tlsf-');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const modes: Record<string, Record<string, string>> = {
  'default pool': {},
  'small pool that grows': {
    INITIAL_MEMPOOL_SIZE: '1M',
    ADDITIONAL_MEMPOOL_SIZE: '1M',
    HEAPHOOK_LOG_LEVEL: 'info',
  },
  'checking mode': { HEAPHOOK_TLSF_CHECK: '1' },
};

const baseline = new Map<string, RunResult>();

describe.each(realPrograms.map((p) => [p.name, p] as const))('%s', (name, program) => {
  const runIt = (env?: Record<string, string>, tlsf = true) =>
    run(program.command, [...program.args], { tlsf, env, cwd: dir, timeoutMs: 115_000 });

  beforeAll(() => {
    baseline.set(name, runIt({}, false));
    expect(baseline.get(name)!.status).toBe(0);
  });

  it.each(Object.entries(modes))('%s: same output as glibc', (mode, env) => {
    const expected = baseline.get(name)!;
    const r = runIt(env);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(expected.stdout);
    if (mode === 'small pool that grows') {
      // The pool really grew during the run, and nothing but growth lines was logged.
      expect(loggedAdditions(r.stderr).length).toBeGreaterThan(0);
      const other = r.stderr.split('\n').filter((l) => l !== '' && !l.includes('pool grew by'));
      expect(other).toEqual(expected.stderr.split('\n').filter((l) => l !== ''));
    } else {
      expect(r.stderr).toBe(expected.stderr);
    }
  });
});
