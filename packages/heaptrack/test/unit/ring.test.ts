/**
 * Unit tier: the ring buffer's reader, case by case (test/native/ring_unit.c, linked with
 * native/track/ring.c alone): reservation order, a record not yet published holds back the ones after it, a crashed
 * writer's unpublished record is skipped, and the prefetcher runs ahead of the reader by at
 * most HH_RING_LOOKAHEAD records without ever being shown an unpublished record, and the copy a
 * fork child reads instead of the shared ring keeps its records when the parent reuses the space.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { release } from '../helpers.js';

describe('ring buffer reader (unit)', () => {
  it('passes every case of ring_unit', () => {
    const run = spawnSync(join(release, 'hh_test_ring_unit'), { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout.trim().split('\n')).toEqual([
      'ok order-and-lookahead',
      'ok unpublished-holds-back',
      'ok crashed-skips-unpublished',
      'ok wraparound',
      'ok fork-copy',
    ]);
  });
});
