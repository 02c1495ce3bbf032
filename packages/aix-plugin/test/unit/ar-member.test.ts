// The emulation's archive reader (native/ar_member.c) on its own, through
// test/native/ar_member_unit.c: the member found in System V / GNU, GNU long-name and BSD
// archives with exactly its bytes; AIX's big format, non-archives, broken headers and sizes past
// the end refused, each with its own result; the members listed for the refusal message
// without overflowing the buffer.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { allChecksPassed, unitChecks } from '@heaphook/core/testing';

import { release, requireBuilt } from '../helpers/run.js';

const CHECKS = 19;

describe('ar_find_member', () => {
  it(`passes its ${CHECKS} checks, each one named`, () => {
    requireBuilt();
    const r = spawnSync(join(release, 'aix_ar_member_unit'), { encoding: 'utf8' });
    const checks = unitChecks(r.stdout);
    expect(checks.failed, r.stdout).toEqual([]);
    expect(checks.passed).toBe(CHECKS);
    expect(checks.summary).toBe(allChecksPassed(CHECKS));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
