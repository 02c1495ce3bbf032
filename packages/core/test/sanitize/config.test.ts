/**
 * Sanitizer tier: the config parsers and the logger's formatter (native/config.c, log.c, os.c)
 * under AddressSanitizer + UndefinedBehaviorSanitizer, through test/native/config_test.c's
 * table of cases (cmake/sanitize-tests.cmake). Any report fails the test.
 */
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { runSanitized, sanitizedProgramMissing, skipOutsideCI } from '../../src/testing.js';

const program = join(
  import.meta.dirname,
  '..',
  '..',
  'build',
  'Release',
  'heaphook_config_test_asan',
);

describe('config parsers under ASan + UBSan', () => {
  it.skipIf(skipOutsideCI(sanitizedProgramMissing(program)))(
    'every case passes with no report',
    () => {
      const run = runSanitized(program);
      expect(run.report).toBe('');
      expect(run.stdout).not.toContain('FAIL');
      expect(run.stdout).toMatch(/^config_test: \d+ cases, 0 failed$/m);
      expect(run.status).toBe(0);
    },
  );

  it.skipIf(skipOutsideCI(sanitizedProgramMissing(program)))(
    'the environment path (a bad size stops with status 78) has no report either',
    () => {
      const good = runSanitized(program, ['env', 'HEAPHOOK_TEST_SIZE'], {
        HEAPHOOK_TEST_SIZE: '64MiB',
      });
      expect(good.report).toBe('');
      expect(good.status).toBe(0);
      const bad = runSanitized(program, ['env', 'HEAPHOOK_TEST_SIZE'], {
        HEAPHOOK_TEST_SIZE: '12\n34 parsecs',
      });
      expect(bad.report).toBe('');
      expect(bad.status).toBe(78);
    },
  );
});
