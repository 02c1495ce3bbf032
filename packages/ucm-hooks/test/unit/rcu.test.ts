// The grace periods of the handler chain's readers and writers (docs/readers-and-writers.md),
// one property at a time: test/native/ucm_rcu_unit.c links native/ucm.c itself and calls the
// hooks by their heaphook_ucm_* names (nothing is patched). Without the grace period
// (ucm_synchronize returning at once) the first and third properties fail.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const program = fileURLToPath(new URL('../../build/Release/ucm_rcu_unit', import.meta.url));

describe('readers and writers: grace periods', () => {
  it('writers wait for readers inside handlers, and only for them', () => {
    if (!existsSync(program)) throw new Error(`${program} is missing: run nx build ucm-hooks`);
    const result = spawnSync(program, [], { encoding: 'utf8', timeout: 60_000 });
    const output = result.stdout + result.stderr;
    for (const property of [
      'unset waits until the reader inside the removed handler leaves it',
      'the removed handler is never called after unset returned',
      'set waits for a reader inside a handler of the old table',
      'a thread that exited inside a handler does not hold the writer up',
      'calls without a handler of their events never enter',
    ]) {
      expect(result.stdout, output).toContain(`ok: ${property}\n`);
    }
    expect(result.stdout, output).toContain('ucm_rcu_unit: 0 failed');
    expect(result.status, output).toBe(0);
  });
});
