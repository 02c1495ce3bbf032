// tier4/heaphook compatibility: allocators written in tier4's style (test/tier4/: the API use
// of tier4's my_allocator, original_allocator, tlsf.cpp over the TLSF 2.x API, and
// backtrace_allocator), built with tier4's build_library() (lib<name>.so) and test_library()
// (the allocator linked into a GoogleTest program) from cmake/heaphook_tier4.cmake.
import { existsSync, rmSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { prepareProgramDir, realPrograms, skipOutsideCI } from '../../src/testing.js';
import { built, CONFORMANCE_GROUPS, releaseDir, run } from '../helpers/native.js';

const python = realPrograms.find((program) => program.name === 'python3')!;
const quiet = { HEAPHOOK_CONFORMANCE_QUIET: '1' };
const SUITE_TIMEOUT_MS = 300_000;

let workDir: string;
let reference: { stdout: string; stderr: string };

beforeAll(() => {
  workDir = prepareProgramDir();
  const result = run(python.command, [...python.args], { cwd: workDir });
  expect(result.status).toBe(0);
  reference = result;
});

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

/** name: the build_library name; groups: the conformance groups it must pass (all when empty). */
const allocators = [
  { name: 'tier4_original_allocator', groups: [] as string[] },
  { name: 'tier4_tlsf', groups: [] },
  // Counts every call's stack: the whole suite would take minutes; these groups cover the
  // entry points, threads and fork.
  {
    name: 'tier4_backtrace',
    groups: ['backend', 'sizes', 'calloc', 'realloc', 'alignment', 'threads', 'fork'],
  },
  // Never reuses memory: the exhaustion, churn, thread and fork groups would map gigabytes.
  {
    name: 'tier4_my_allocator',
    groups: CONFORMANCE_GROUPS.filter(
      (group) => !['exhaustion', 'churn', 'threads', 'fork'].includes(group),
    ),
  },
];

describe.each(allocators)('tier4-style allocator $name (build_library)', ({ name, groups }) => {
  it('is lib<name>.so, as tier4 names build_library outputs', () => {
    expect(existsSync(`${releaseDir}lib${name}.so`)).toBe(true);
  });

  it('runs python3 preloaded with the same output as on glibc', () => {
    const result = run(python.command, [...python.args], {
      cwd: workDir,
      preload: `${releaseDir}lib${name}.so`,
    });
    expect(result.stdout).toBe(reference.stdout);
    expect(result.status).toBe(0);
    if (name === 'tier4_backtrace') {
      expect(result.stderr).toMatch(/^backtrace: \d+ stacks, \d+ bytes in \d+ calls; busiest: /m);
    } else {
      expect(result.stderr).toBe(reference.stderr);
    }
  });

  it(
    `passes the conformance suite${groups.length ? ` (${groups.join(', ')})` : ''}`,
    () => {
      const result = run(built(`heaphook_conformance_${name}`), [name, ...groups], {
        env: quiet,
        timeoutMs: SUITE_TIMEOUT_MS - 10_000,
      });
      expect(result.stdout).not.toContain('FAIL');
      expect(result.stdout).toMatch(
        new RegExp(`backend ${name}: \\d+ groups, \\d+ checks, 0 failed$`, 'm'),
      );
      expect(result.status).toBe(0);
    },
    SUITE_TIMEOUT_MS,
  );
});

// test_library() builds a GoogleTest program when googletest is installed (Debian: googletest).
const gtestBuilt = existsSync(`${releaseDir}test_tier4_tlsf`);
describe.skipIf(skipOutsideCI(!gtestBuilt))(
  'test_library (GoogleTest, the allocator linked in)',
  () => {
    it(
      'test_tier4_tlsf: the GlobalAllocator tests and the whole conformance suite pass',
      () => {
        const result = run(built('test_tier4_tlsf'), [], {
          env: quiet,
          timeoutMs: SUITE_TIMEOUT_MS - 10_000,
        });
        expect(result.stdout).toMatch(/^\[ {2}PASSED {2}\] 4 tests\.$/m);
        expect(result.stdout).toContain('backend test_tier4_tlsf: 12 groups');
        expect(result.status).toBe(0);
      },
      SUITE_TIMEOUT_MS,
    );

    it('test_tier4_original_allocator: the GlobalAllocator tests pass', () => {
      const result = run(built('test_tier4_original_allocator'), [
        '--gtest_filter=GlobalAllocator.*',
      ]);
      expect(result.stdout).toMatch(/^\[ {2}PASSED {2}\] 3 tests\.$/m);
      expect(result.status).toBe(0);
    });
  },
);
