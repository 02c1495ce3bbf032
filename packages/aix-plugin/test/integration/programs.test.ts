// Real programs (the shared set of @heaphook/core/testing: python3, node, threads, a forking
// shell pipeline, a C compile) under the emulation with the TLSF plug-in print exactly what they
// print on glibc's malloc.
import { rmSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { prepareProgramDir, realPrograms, runProgram } from '@heaphook/core/testing';

import { requireBuilt, runEmul } from '../helpers/run.js';

let dir = '';
beforeAll(() => {
  requireBuilt();
  dir = prepareProgramDir('heaphook-aix-programs-');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.each(realPrograms.map((p) => [p.name, p] as const))('%s', (_name, program) => {
  it('same output as glibc, served by the TLSF plug-in', () => {
    const expected = runProgram(program.command, program.args, { cwd: dir, timeoutMs: 115_000 });
    expect(expected.status).toBe(0);
    const r = runEmul(program.command, program.args, { cwd: dir, timeoutMs: 115_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(expected.stdout);
    expect(r.stderr).toBe(expected.stderr);
    // Every process of the run was served by the plug-in: each one's calls reached it. (How
    // many depends on the environment: under LANG=C.UTF-8 a shell pipeline's tools make ~200
    // calls each to load the locale, with no LANG at all 3 to 13.)
    expect(r.reports.length).toBeGreaterThan(0);
    expect(r.reports.every((x) => x.backend === 'aix:libheaphook_aix_tlsf')).toBe(true);
    expect(r.reports.filter((x) => Number(x.malloc) === 0)).toEqual([]);
  });
});
