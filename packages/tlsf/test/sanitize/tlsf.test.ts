/**
 * Sanitizer tier (cmake/sanitize.cmake):
 * - the TLSF core (native/tlsf.c, tlsf_grow.c) under AddressSanitizer + UndefinedBehaviorSanitizer,
 *   through its unit test. The pools are mmap'd, so ASan checks the code around them (the tests'
 *   own buffers, the control structure's neighbours) while UBSan checks the allocator's
 *   arithmetic: shifts, bitmap and array indices, alignment;
 * - the backend's thread heaps (native/backend_*.c) under ThreadSanitizer, through
 *   tlsf_threads_stress: producer/consumer pairs (remote frees, other heaps' blocks in a thread's
 *   cache), short-lived threads (heaps released at exit and adopted), and malloc_trim taking
 *   released heaps, all at once.
 * Any report fails the test.
 */
import { join } from 'node:path';

import { runSanitized, sanitizedProgramMissing, skipOutsideCI } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const release = join(import.meta.dirname, '..', '..', 'build', 'Release');
const program = join(release, 'tlsf_unit_asan');
const threadsStress = join(release, 'tlsf_threads_stress_tsan');

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

describe('thread heaps under ThreadSanitizer', () => {
  it.skipIf(skipOutsideCI(sanitizedProgramMissing(threadsStress)))(
    'remote frees, heaps released and adopted, and malloc_trim beside them: no report',
    () => {
      const run = runSanitized(threadsStress);
      expect(run.report).toBe('');
      expect(run.stderr).toBe('');
      // Every block checked before its free; the pool holds only the heaps' own blocks after.
      expect(run.stdout).toMatch(/^ok \d+ blocks, \d+ trims, \d+ blocks in use at the end$/m);
      expect(run.status).toBe(0);
    },
  );
});
