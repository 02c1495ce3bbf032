// Misuse named as glibc names it (issue 22, section 4): without the checking mode, every free,
// realloc and malloc_usable_size checks its pointer (the pool's areas, the block's head and its
// successor's) and stops the program with one line naming the call. Correct programs, blocks
// freed by other threads and pools of thousands of areas still pass. tlsf_misuse.c holds the
// scenarios.
import { describe, expect, it } from 'vitest';

import { built, run, stoppedRun } from './helpers/run.js';

const misuse = (args: string[], env: Record<string, string> = {}) =>
  run(built('tlsf_misuse'), args, { tlsf: true, env });

const heaps: Record<string, Record<string, string>> = {
  'thread heaps': {},
  'no thread cache': { HEAPHOOK_TLSF_CACHE: '0' },
  'one shared heap': { HEAPHOOK_TLSF_THREAD_HEAPS: '0' },
};

describe.each(Object.entries(heaps))('bad pointers are stopped (%s)', (_name, env) => {
  it.each([
    ['stack', 'free', /invalid pointer \(not a block of this heap\)/],
    ['global', 'free', /invalid pointer \(not a block of this heap\)/],
    ['interior', 'free', /invalid pointer \(inside the heap, not the start of a block/],
    ['double', 'free', /double free/],
    ['double-large', 'free', /double free/],
    ['realloc-stack', 'realloc', /invalid pointer \(not a block of this heap\)/],
    ['usable-interior', 'malloc_usable_size', /invalid pointer \(inside the heap/],
  ] as const)('%s: %s(p) named and aborted', (kind, call, message) => {
    const { address, line } = stoppedRun(misuse([kind], env));
    expect(line).toContain(`tlsf: ${call}(${address}): `);
    expect(line).toMatch(message);
  });

  it('overrun of a neighbour: named at the free of the block that ran over', () => {
    const r = misuse(['overrun'], env);
    const { address, line } = stoppedRun(r);
    const next = /^b (0x[0-9a-f]+)$/m.exec(r.stdout)![1]!;
    expect(line).toContain(
      `tlsf: free(${address}): heap corruption after the block at ${address}: ` +
        `the next block's header (at ${next}) is damaged`,
    );
  });
});

describe('correct programs still pass', () => {
  const variants: Record<string, Record<string, string>> = {
    ...heaps,
    // ~12,000 areas: the area list leaves .bss and grows (binary search, lock-free readers).
    'thousands of areas': { INITIAL_MEMPOOL_SIZE: '64K', ADDITIONAL_MEMPOOL_SIZE: '4096' },
  };
  it.each(Object.entries(variants))('blocks freed and resized by other threads (%s)', (_n, env) => {
    const r = misuse(['cross-thread'], env);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('ok');
    expect(r.status).toBe(0);
  });

  it('the checking mode still names errors its own way', () => {
    const r = misuse(['interior'], { HEAPHOOK_TLSF_CHECK: '1' });
    expect(stoppedRun(r).line).toMatch(/free of an interior pointer/);
  });
});
