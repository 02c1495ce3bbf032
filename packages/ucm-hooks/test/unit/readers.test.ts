// The handler chain's readers and writers on their own: test/native/ucm_readers_unit.c links
// native/rcu.c alone and calls its API directly (no hook, nothing patched): the per-event lists
// and masks a set compiles, the grace period of an unset, slot claims, the capacity, and readers
// during a fork.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const program = fileURLToPath(new URL('../../build/Release/ucm_readers_unit', import.meta.url));

describe('readers and writers (native/rcu.c alone)', () => {
  it('publishes tables, waits out readers, and holds readers during a fork', () => {
    if (!existsSync(program)) throw new Error(`${program} is missing: run nx build ucm-hooks`);
    const result = spawnSync(program, [], { encoding: 'utf8', timeout: 60_000 });
    const output = result.stdout + result.stderr;
    for (const property of [
      'set compiles per-event lists in priority order',
      'set computes the masks of all, before and after handlers',
      "a thread's first section claims a reader slot of its own",
      'unset removes the handlers and their events',
      'unset waits for the reader inside a section, and returns once it leaves',
      'the handler after UCM_MAX_HANDLERS is refused, the table stays whole',
      'the forking thread dispatches nothing between the fork handlers',
      "a reader waits during the fork and enters after the parent's handler",
    ]) {
      expect(result.stdout, output).toContain(`ok: ${property}\n`);
    }
    expect(result.stdout, output).toContain('ucm_readers_unit: 0 failed');
    expect(result.status, output).toBe(0);
  });
});
