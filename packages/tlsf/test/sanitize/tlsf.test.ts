/**
 * Sanitizer tier: the TLSF core (native/tlsf.c, tlsf_grow.c) under AddressSanitizer +
 * UndefinedBehaviorSanitizer, through its unit test (cmake/sanitize.cmake). The pools are
 * mmap'd, so ASan checks the code around them (the tests' own buffers, the control structure's
 * neighbours) while UBSan checks the allocator's arithmetic: shifts, bitmap and array indices,
 * alignment. Any report fails the test.
 */
import { join } from 'node:path';

import { runSanitized, sanitizedProgramMissing, skipOutsideCI } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const program = join(import.meta.dirname, '..', '..', 'build', 'Release', 'tlsf_unit_asan');

describe('TLSF core under ASan + UBSan', () => {
  it.skipIf(skipOutsideCI(sanitizedProgramMissing(program)))(
    'the unit test passes with no report',
    () => {
      const run = runSanitized(program);
      expect(run.report).toBe('');
      expect(run.stderr).toBe('');
      expect(run.stdout).toMatch(/^\d+ passed, 0 failed$/m);
      expect(run.status).toBe(0);
    },
  );
});
