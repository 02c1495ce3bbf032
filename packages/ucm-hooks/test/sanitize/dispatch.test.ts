/**
 * Sanitizer tier: the handler chain's readers and writers (native/ucm.c, "Readers and
 * writers": two tables, per-thread sequence slots, grace periods) under ThreadSanitizer.
 * test/native/ucm_dispatch_stress.c, linked with ucm.c (cmake/sanitize.cmake), has 3 threads
 * map and unmap through the hooks while 2 writers set and unset handlers of priorities -1, 0
 * and 1; each handler's argument is plain memory its writer reuses once unset returns. Any
 * report, or a handler called after its unset returned, fails the test.
 */
import { join } from 'node:path';

import { runSanitized, sanitizedProgramMissing, skipOutsideCI } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const program = join(
  import.meta.dirname,
  '..',
  '..',
  'build',
  'Release',
  'ucm_dispatch_stress_tsan',
);

describe('handler dispatch under ThreadSanitizer', () => {
  it.skipIf(skipOutsideCI(sanitizedProgramMissing(program)))(
    'handlers set and unset while threads fire events: no race, no call after unset',
    () => {
      const run = runSanitized(program, ['3', '300']);
      expect(run.report).toBe('');
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(run.stdout).toMatch(
        /^ucm_dispatch_stress: \d+ hook calls, [1-9]\d* handler calls, 600 registrations\n$/,
      );
    },
  );
});
