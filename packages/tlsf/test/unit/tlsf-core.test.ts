// Unit tier: the TLSF core (native/tlsf.c, tlsf_grow.c) through its own unit test
// (test/native/tlsf_unit.c), with no preload library involved.
import { describe, expect, it } from 'vitest';

import { built, run } from '../helpers/run.js';

describe('TLSF core unit test', () => {
  it('passes', () => {
    const r = run(built('tlsf_unit'), []);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^\d+ passed, 0 failed$/m);
    expect(r.status).toBe(0);
  });
});
