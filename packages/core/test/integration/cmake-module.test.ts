// cmake/heaphook.cmake from a project outside this repository, the way a user's backend uses
// it: include() the module of the installed package, add a backend and its conformance test,
// build with plain cmake, run the suite.
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { run } from '../helpers/native.js';

const coreDir = fileURLToPath(new URL('../..', import.meta.url));
// Compiling the core, a backend and the suite: seconds, longer on a loaded machine.
const BUILD_TIMEOUT_MS = 600_000;
const slow = { timeoutMs: BUILD_TIMEOUT_MS - 10_000 };
let project: string;

beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), 'heaphook-external-backend-'));
  // The example allocator, as a user would start from it.
  copyFileSync(
    join(coreDir, 'example', 'example_allocator.cpp'),
    join(project, 'my_allocator.cpp'),
  );
  // A backend-specific check linked into the suite (it runs as the group "extra").
  writeFileSync(
    join(project, 'extra_checks.c'),
    [
      '#include <stdlib.h>',
      '#include <string.h>',
      'int heaphook_conformance_extra(const char *backend) {',
      '    void *p = malloc(100);',
      '    int failures = (p == NULL) + (strcmp(backend, "mine") != 0);',
      '    free(p);',
      '    return failures;',
      '}',
      '',
    ].join('\n'),
  );
  // A function of the backend's own API, exported next to the malloc family.
  writeFileSync(
    join(project, 'my_api.c'),
    '#include "heaphook/backend.h"\nHEAPHOOK_EXPORT int mine_version(void) { return 7; }\n',
  );
  writeFileSync(
    join(project, 'CMakeLists.txt'),
    [
      'cmake_minimum_required(VERSION 3.16)',
      'project(my_backend C CXX)',
      'include(CTest)',
      `include(${JSON.stringify(join(coreDir, 'cmake', 'heaphook.cmake'))})`,
      'heaphook_add_backend(mine my_allocator.cpp my_api.c EXPORTS mine_version)',
      'heaphook_add_backend_test(mine extra_checks.c)',
      '',
    ].join('\n'),
  );
});

afterAll(() => {
  rmSync(project, { recursive: true, force: true });
});

describe('the CMake module, used from outside the repository', () => {
  it(
    'builds libheaphook_mine.so and heaphook_conformance_mine into build/Release, and they pass',
    () => {
      const build = join(project, 'build');
      const configured = run(
        'cmake',
        ['-S', project, '-B', build, '-DCMAKE_BUILD_TYPE=Release'],
        slow,
      );
      expect(configured.stderr).toBe('');
      expect(configured.status).toBe(0);
      const compiled = run('cmake', ['--build', build, '-j', '2'], slow);
      expect(compiled.status).toBe(0);
      const library = join(build, 'Release', 'libheaphook_mine.so');
      expect(existsSync(library)).toBe(true);
      const symbols = run('nm', ['-D', '--defined-only', library]).stdout;
      expect(symbols).toMatch(/ T mine_version$/m);
      expect(symbols).toMatch(/ T malloc$/m);
      expect(symbols).not.toMatch(/heaphook_backend_get|hh_/);

      const suite = run(join(build, 'Release', 'heaphook_conformance_mine'), ['mine'], {
        ...slow,
        env: { HEAPHOOK_CONFORMANCE_QUIET: '1' },
      });
      expect(suite.stdout).toMatch(/^ok +extra +1 checks$/m);
      expect(suite.stdout).toMatch(
        /^heaphook conformance: backend mine: 13 groups, \d+ checks, 0 failed$/m,
      );
      expect(suite.status).toBe(0);

      const ctest = run('ctest', ['--test-dir', build, '--output-on-failure'], slow);
      expect(ctest.stdout).toContain('100% tests passed');
      expect(ctest.status).toBe(0);
    },
    BUILD_TIMEOUT_MS,
  );
});
