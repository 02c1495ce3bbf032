// Unit tier: the bootstrap arena and the next-allocator lookup (heaphook/bootstrap.h,
// native/bootstrap.c) on their own, through test/native/bootstrap_test.c linked with
// heaphook::bootstrap (no interposition): alignment, zero fill, ownership, the range a leak
// checker scans, exhaustion as NULL and ENOMEM, RTLD_NEXT from a program, forward_to.
import { describe, expect, it } from 'vitest';

import { built, run } from '../helpers/native.js';

describe('the bootstrap arena and the next allocator (test/native/bootstrap_test.c)', () => {
  it('keep the contract written at their declarations', () => {
    const result = run(built('heaphook_bootstrap_test'), []);
    expect(result.stdout).not.toContain('FAIL');
    expect(result.stdout).toMatch(/^bootstrap_test: \d+ checks, 0 failed$/m);
    expect(result.status).toBe(0);
  });
});
