/**
 * Unit tier: the leak checker's live-block table (native/leaks/table.c) and the probing rule it
 * shares with the report's pass (native/probe.h), case by case (test/native/table_unit.c, which
 * includes table.c alone): the rule against its definition on every case of a small table;
 * insert, find, copy and remove; a million random inserts and removes leave every probe run
 * unbroken, no stale slot and no growth (backward-shift deletion, no tombstones); a shard grows
 * as it fills and loses nothing; the drain thread's event records change the table as the
 * hooks would; with the address space capped, a full shard counts what it cannot hold as lost
 * and keeps the rest.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { release } from '../helpers.js';

describe('live-block table (unit)', () => {
  it('passes every case of table_unit', () => {
    const run = spawnSync(join(release, 'hh_test_table_unit'), { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout.trim().split('\n')).toEqual([
      'ok probe-rule',
      'ok insert-find-remove',
      'ok no-tombstones',
      'ok grow',
      'ok apply',
      'ok exhaustion',
    ]);
  });
});
