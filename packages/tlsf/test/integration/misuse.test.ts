// Misuse named as glibc names it (issue 22, section 4): without the checking mode, every free,
// realloc and malloc_usable_size checks its pointer (the pool's areas, the block's head and its
// successor's) and stops the program with one line naming the call. Correct programs, blocks
// freed by other threads and pools of thousands of areas still pass. @heaphook/core's
// test/native/misuse_test.c holds the scenarios.
import { describe, expect, it } from 'vitest';

import { coreBuilt, run, stoppedRun } from '../helpers/run.js';

const misuse = (args: string[], env: Record<string, string> = {}) =>
  run(coreBuilt('heaphook_misuse_test'), args, { tlsf: true, env });

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

// The heads' top 12 bits (a per-process random key XOR the owner id) never look like zeros, text,
// small or negative numbers or a repeated byte (for owner ids that are not multiples of 16): an
// overrun made of those is named whatever key the run drew.
describe.each(Object.entries(heaps))('overruns of any common content are named (%s)', (_n, env) => {
  it.each(['00', '78', 'ab', 'ff'])('overrun with the byte 0x%s', (byte) => {
    const r = misuse(['overrun', byte], env);
    const { address, line } = stoppedRun(r);
    expect(line).toContain(`tlsf: free(${address}): heap corruption after the block at ${address}`);
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

describe('pool sizes that cannot be mapped (issue 22, section 1)', () => {
  it.each(['INITIAL_MEMPOOL_SIZE', 'ADDITIONAL_MEMPOOL_SIZE'])(
    '%s=100000T is refused before main: one line, exit 78',
    (name) => {
      const r = run('/bin/echo', ['main ran'], { tlsf: true, env: { [name]: '100000T' } });
      expect(r.status).toBe(78);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toEqual([
        `heaphook: ${name}="100000T" is not a size of at most 35184372088832 bytes ` +
          `(32TiB, the largest area TLSF manages), e.g. ${name}=100M`,
      ]);
    },
  );

  it('INITIAL_MEMPOOL_SIZE above the address-space limit (ulimit -v): exit 78', () => {
    const r = run('sh', ['-c', 'ulimit -v 1000000 && exec /bin/echo main ran'], {
      tlsf: true,
      env: { INITIAL_MEMPOOL_SIZE: '2G' },
    });
    expect(r.status).toBe(78);
    expect(r.stderr).toMatch(/INITIAL_MEMPOOL_SIZE="2G" is not a size below the address-space/);
  });

  it.each(Object.entries(heaps))(
    'a growth the system refuses is said once; malloc returns NULL and the program goes on (%s)',
    (_name, env) => {
      const r = misuse(['grow-fail'], env);
      expect(r.stdout.trim().split('\n')).toEqual(['null ENOMEM', 'null ENOMEM', 'continued']);
      expect(r.status).toBe(0);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /tlsf: the pool cannot grow: mmap of an area of 800000000 bytes failed \(errno 12\) \(ADDITIONAL_MEMPOOL_SIZE=100000000,/,
      );
    },
  );
});
