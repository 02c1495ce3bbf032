// Unit tier: the debug build's lock-order check (heaphook/lockrank.h, native/lockrank.c), on
// the GOT patcher's real lock and a lock of the attach rank (test/native/lockrank_test.c, built
// with HEAPHOOK_DEBUG), and its absence from a release build.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { backendLibrary, built, run } from '../helpers/native.js';

describe('lock ranks in a debug build', () => {
  it('lets a thread take the locks in the fork modules order, and release them in any order', () => {
    const result = run(built('heaphook_lockrank_test'), ['in-order']);
    expect(result.stdout).toBe('in order: ok\n');
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('stops a thread that takes a lock out of order, naming both locks and their ranks', () => {
    const result = run(built('heaphook_lockrank_test'), ['out-of-order']);
    expect(result.stdout).not.toContain('not caught');
    expect(result.stderr).toMatch(
      /^heaphook\[\d+\] fatal: lock order: taking the attach lock \(lockrank_test\.c\) \(rank 100\) while holding the GOT patcher's lock \(reloc_patch\.c\) \(rank 200\); a lock may only be taken after those of lower rank \(the fork module's order\)\n$/,
    );
    expect(result.signal).toBe('SIGABRT');
  });
});

describe('lock ranks in a release build', () => {
  const cache = readFileSync(
    fileURLToPath(new URL('../../build/CMakeCache.txt', import.meta.url)),
    'utf8',
  );
  const debug = /^HEAPHOOK_DEBUG:BOOL=ON$/m.test(cache);

  it('leave no code in the library: no check function, nothing calls one', () => {
    const symbols = execFileSync('nm', [backendLibrary('example')], { encoding: 'utf8' });
    // A debug build (cmake -DHEAPHOOK_DEBUG=ON) has them; the default build must not.
    expect(symbols.includes('heaphook_lock_rank_acquire')).toBe(debug);
  });
});
