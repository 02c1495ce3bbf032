// The conformance suite (test/native/conformance.c) against the backends built here, against
// glibc (to check the suite itself), and with wrong expectations (to check that it bites).
import { describe, expect, it } from 'vitest';

import { backendLibrary, built, CONFORMANCE_GROUPS as GROUPS, run } from '../helpers/native.js';

// The suite's malloc_stats call writes a report on stderr; keep the output short.
const quiet = { HEAPHOOK_CONFORMANCE_QUIET: '1' };

// A whole-suite run takes seconds, but longer on a loaded 2-core machine: the suite's own
// alarms (120 s per group) are the deadlock guard, these only stop a runaway.
const SUITE_TIMEOUT_MS = 600_000;
const suiteRun = { timeoutMs: SUITE_TIMEOUT_MS - 10_000 };

function expectAllGroupsPass(stdout: string, backend: string): void {
  for (const group of GROUPS) {
    expect(stdout).toMatch(new RegExp(`^ok +${group} +\\d+ checks$`, 'm'));
  }
  expect(stdout).not.toContain('FAIL');
  expect(stdout).toMatch(
    new RegExp(
      `^heaphook conformance: backend ${backend}: ${GROUPS.length} groups, \\d+ checks, 0 failed$`,
      'm',
    ),
  );
}

describe('conformance suite', () => {
  for (const backend of ['example', 'passthrough']) {
    it(
      `passes for the ${backend} backend (heaphook_conformance_${backend}, linked)`,
      () => {
        const result = run(built(`heaphook_conformance_${backend}`), [backend], {
          ...suiteRun,
          env: quiet,
        });
        expect(result.stderr).toBe('');
        expectAllGroupsPass(result.stdout, backend);
        expect(result.status).toBe(0);
      },
      SUITE_TIMEOUT_MS,
    );
  }

  it(
    'passes for the example backend through LD_PRELOAD (the generic suite program), the expected name from HEAPHOOK_EXPECTED_BACKEND',
    () => {
      // No argument: the expected name comes from the environment (the linked runs above give
      // it as argv[1]), as test_library() and the CMake module run it.
      const result = run(built('heaphook_conformance'), [], {
        ...suiteRun,
        preload: backendLibrary('example'),
        env: { ...quiet, HEAPHOOK_EXPECTED_BACKEND: 'example' },
      });
      expectAllGroupsPass(result.stdout, 'example');
      expect(result.status).toBe(0);
    },
    SUITE_TIMEOUT_MS,
  );

  it(
    'agrees with glibc itself when no heaphook library is loaded',
    () => {
      const result = run(built('heaphook_conformance'), ['glibc'], { ...suiteRun, env: quiet });
      expectAllGroupsPass(result.stdout, 'glibc');
      expect(result.status).toBe(0);
    },
    SUITE_TIMEOUT_MS,
  );

  it(
    'fails when another backend than the expected one serves malloc',
    () => {
      const result = run(built('heaphook_conformance_example'), ['tlsf', 'backend', 'sizes'], {
        env: quiet,
      });
      expect(result.stdout).toContain('active backend is "example", expected "tlsf"');
      expect(result.stdout).toMatch(/^FAIL backend +1 of \d+ checks failed$/m);
      expect(result.stdout).toMatch(/^ok +sizes +\d+ checks$/m);
      expect(result.stdout).toMatch(/backend tlsf: 2 groups, \d+ checks, 1 failed/);
      expect(result.status).toBe(1);
    },
    SUITE_TIMEOUT_MS,
  );

  it(
    'fails when no heaphook library serves malloc',
    () => {
      const result = run(built('heaphook_conformance'), ['example', 'backend'], {
        ...suiteRun,
        env: quiet,
      });
      expect(result.stdout).toContain('heaphook_active_backend not found');
      expect(result.stdout).toMatch(/backend example: 1 groups, \d+ checks, 1 failed/);
      expect(result.status).toBe(1);
    },
    SUITE_TIMEOUT_MS,
  );
});
