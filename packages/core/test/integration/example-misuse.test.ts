// The example backend (the template new backends start from) names misuse and stops, as
// glibc does: a pointer it never returned, a pointer inside a block, a double free. Correct
// use, blocks freed and resized by other threads included, still passes. The scenarios are
// in test/native/misuse_test.c.
import { describe, expect, it } from 'vitest';

import { backendLibrary, built, run } from '../helpers/native.js';

const misuse = (kind: string) =>
  run(built('heaphook_misuse_test'), [kind], { preload: backendLibrary('example') });

describe('example backend: misuse is named and stopped', () => {
  it.each([
    ['stack', 'free', 'invalid pointer (not a block of this heap'],
    ['global', 'free', 'invalid pointer (not a block of this heap'],
    ['interior', 'free', 'invalid pointer (not the start of a block)'],
    ['double', 'free', 'double free'],
    ['double-large', 'free', 'double free'],
    [
      'double-huge',
      'free',
      'invalid pointer (not a block of this heap, or a large block already freed)',
    ],
    ['realloc-stack', 'realloc', 'invalid pointer (not a block of this heap'],
  ])('%s: %s(p) named, then abort', (kind, call, message) => {
    const r = misuse(kind);
    const address = r.stdout.trim().split('\n')[0]!;
    expect(address).toMatch(/^0x[0-9a-f]+$/);
    expect(r.stdout).not.toContain('not stopped');
    expect(r.signal).toBe('SIGABRT');
    const fatal = r.stderr.split('\n').filter((line) => line.includes('fatal'));
    expect(fatal).toEqual([expect.stringContaining(`example: ${call}(${address}): ${message}`)]);
  });

  it('correct use from several threads still passes', () => {
    const r = misuse('cross-thread');
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('ok');
    expect(r.status).toBe(0);
  });
});
