/**
 * Sanitizer tier: the ring buffer (native/track/ring.c) and the leak table (native/leaks/table.c)
 * built with sanitizers (cmake/sanitize.cmake). Their unit tests under AddressSanitizer +
 * UndefinedBehaviorSanitizer,
 * and ring_stress (4 writers reserving and committing while one reader drains, as the traced
 * threads and the drain thread do) under ThreadSanitizer. Any report fails the test.
 */
import { join } from 'node:path';

import { runSanitized, sanitizedProgramMissing, skipOutsideCI } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const release = join(import.meta.dirname, '..', '..', 'build', 'Release');
const unit = join(release, 'hh_test_ring_unit_asan');
const stress = join(release, 'hh_test_ring_stress_tsan');
const table = join(release, 'hh_test_table_unit_asan');

describe('ring buffer under sanitizers', () => {
  it.skipIf(skipOutsideCI(sanitizedProgramMissing(unit)))('unit test: no ASan/UBSan report', () => {
    const run = runSanitized(unit);
    expect(run.report).toBe('');
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout.trim().split('\n')).toHaveLength(5);
  });

  it.skipIf(skipOutsideCI(sanitizedProgramMissing(table)))(
    "the leak table's unit test: no ASan/UBSan report (every case but exhaustion, which caps the address space)",
    () => {
      const run = runSanitized(table);
      expect(run.report).toBe('');
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(run.stdout.trim().split('\n')).toHaveLength(5);
    },
  );

  it.skipIf(skipOutsideCI(sanitizedProgramMissing(stress)))(
    '4 writers and a reader: no ThreadSanitizer report, every record once and in order',
    () => {
      const run = runSanitized(stress, ['4', '20000']);
      expect(run.report).toBe('');
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(run.stdout).toBe('ring_stress: 4 writers, 80000 records\n');
    },
  );
});
