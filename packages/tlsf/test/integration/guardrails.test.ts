// Real-time guardrails of libheaphook_tlsf.so: HEAPHOOK_TLSF_ON_GROW (a growth of the pool
// after start-up named with its stack, or stopping the program) and HEAPHOOK_TLSF_STATS (the
// pool, the peak of bytes in use, the growths and the largest request, at exit and live), and
// HEAPHOOK_TLSF_COMPAT=tier4. The program is test/native/tlsf_guard.c, built with -rdynamic so
// that its functions are named in a stack.
import { describe, expect, it } from 'vitest';

import { built, loggedAdditions, run } from '../helpers/run.js';

const guard = () => built('tlsf_guard');
/** A pool of 1 MB that grows by 1 MB, 2 MB, 4 MB ... */
const small = { INITIAL_MEMPOOL_SIZE: '1M', ADDITIONAL_MEMPOOL_SIZE: '1M' };
const growLine =
  /tlsf: the pool grew after start-up by (\d+) bytes \((\d+) area\(s\)\) to (\d+) bytes \(growth (\d+), HEAPHOOK_TLSF_ON_GROW=(\w+)\); stack: (.*)$/m;

describe('HEAPHOOK_TLSF_ON_GROW', () => {
  it('warn: one line with the bytes added, the pool total and the stack; the program goes on', () => {
    const r = run(guard(), ['grow', '3000000'], {
      tlsf: true,
      env: { ...small, HEAPHOOK_TLSF_ON_GROW: 'warn', HEAPHOOK_LOG_LEVEL: 'info' },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('continued ok\n');
    const lines = r.stderr.split('\n').filter((l) => l.includes('grew after start-up'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^heaphook\[\d+\] warn: /);
    const m = growLine.exec(lines[0]!)!;
    expect(m, lines[0]).not.toBeNull();
    // 3 MB does not fit in 1 MB nor 2 MB: 1 + 2 + 4 MB added, as the info lines say.
    const additions = loggedAdditions(r.stderr);
    expect(additions).toEqual([1_000_000, 2_000_000, 4_000_000]);
    expect(Number(m[1])).toBe(7_000_000);
    expect(Number(m[2])).toBe(3);
    expect(Number(m[3])).toBe(8_000_000);
    expect(Number(m[4])).toBe(3);
    expect(m[5]).toBe('warn');
    // The first frame outside the library is the program's function, named with its module.
    expect(m[6]).toMatch(/^grow_the_pool\+0x[0-9a-f]+ \(tlsf_guard\+0x[0-9a-f]+\) main\+0x/);
  });

  it('abort: the same line at fatal level, then SIGABRT', () => {
    const r = run(guard(), ['grow', '3000000'], {
      tlsf: true,
      env: { ...small, HEAPHOOK_TLSF_ON_GROW: 'abort' },
    });
    expect(r.signal).toBe('SIGABRT');
    expect(r.stdout).toBe('');
    const fatal = r.stderr.split('\n').filter((l) => l.includes(' fatal: '));
    expect(fatal).toHaveLength(1);
    const m = growLine.exec(fatal[0]!)!;
    expect(m, fatal[0]).not.toBeNull();
    expect(m[5]).toBe('abort');
    expect(m[6]).toMatch(/^grow_the_pool\+0x/);
  });

  it.each([['ignore'], ['(unset)']])('%s: nothing is said, the pool grows', (value) => {
    const env: Record<string, string> = { ...small };
    if (value !== '(unset)') env.HEAPHOOK_TLSF_ON_GROW = value;
    const r = run(guard(), ['grow', '3000000'], { tlsf: true, env });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('continued ok\n');
    expect(r.stderr).toBe('');
  });

  it('no growth (a pool large enough): nothing is said, even with abort', () => {
    const r = run(guard(), ['grow', '3000000'], {
      tlsf: true,
      env: { INITIAL_MEMPOOL_SIZE: '16M', HEAPHOOK_TLSF_ON_GROW: 'abort' },
    });
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
  });

  it('python3 under warn: every growth is named, the output is unchanged', () => {
    const r = run('python3', ['-c', 'x = bytearray(5000000); print(len(x))'], {
      tlsf: true,
      env: { ...small, HEAPHOOK_TLSF_ON_GROW: 'warn' },
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('5000000\n');
    expect(r.stderr).toMatch(growLine);
    expect(r.stderr).toMatch(/libpython3[^ ]*\+0x/);
  });
});

describe('HEAPHOOK_TLSF_STATS=1', () => {
  const stats = () =>
    run(guard(), ['sizes'], {
      tlsf: true,
      env: { ...small, HEAPHOOK_TLSF_STATS: '1', HEAPHOOK_LOG_LEVEL: 'info' },
    });

  it('prints one block at exit whose figures match what the program did', () => {
    const r = stats();
    expect(r.status, r.stderr).toBe(0);
    const said = Object.fromEntries(
      r.stdout
        .split('\n')
        .filter((l) => /^\w+ \d+$/.test(l))
        .map((l) => [l.split(' ')[0], Number(l.split(' ')[1])]),
    );
    const block =
      /heaphook tlsf\[\d+\] stats at exit: pool (\d+) bytes in (\d+) area\(s\), grew (\d+) time\(s\)\n {2}peak in use: +(\d+) bytes\n {2}largest request: +(\d+) bytes\n {2}in use at exit: +(\d+) bytes\n/.exec(
        r.stderr,
      );
    expect(block, r.stderr).not.toBeNull();
    const [, pool, areas, growths, peak, largest] = block!.map(Number);
    // The pool: what mallinfo2 said (nothing grew after), and 1 MB plus the additions logged.
    const additions = loggedAdditions(r.stderr);
    expect(growths).toBe(additions.length);
    expect(growths).toBeGreaterThan(0);
    expect(areas).toBe(1 + additions.length);
    expect(pool).toBe(1_000_000 + additions.reduce((a, b) => a + b, 0));
    expect(pool).toBe(said.arena);
    // The peak is the program's own (its blocks' usable sizes), plus what libc held then
    // (nothing here: stdout's buffer is allocated after the peak).
    expect(peak).toBeGreaterThanOrEqual(said.peak!);
    expect(peak).toBeLessThan(said.peak! + 16384);
    expect(peak).toBe(said.usmblks); // mallinfo2's usmblks: the same peak, live
    expect(largest).toBe(1_500_000);
    // malloc_stats says it too.
    expect(r.stderr).toContain(
      `counted:      peak in use ${peak} bytes, largest request 1500000 bytes`,
    );
  });

  it('without it: no block at exit, usmblks 0', () => {
    const r = run(guard(), ['sizes'], { tlsf: true, env: small });
    expect(r.status).toBe(0);
    expect(r.stderr).not.toContain('stats at exit');
    expect(r.stderr).not.toContain('counted:');
    expect(r.stdout).toContain('usmblks 0\n');
  });
});

describe('bad values stop the program before main (exit 78)', () => {
  it.each([
    ['HEAPHOOK_TLSF_ON_GROW', 'sometimes', /expected one of ignore, warn or abort/],
    ['HEAPHOOK_TLSF_STATS', 'maybe', /HEAPHOOK_TLSF_STATS/],
    ['HEAPHOOK_TLSF_COMPAT', 'tier5', /expected one of none or tier4/],
  ])('%s=%s', (name, value, message) => {
    const r = run('true', [], { tlsf: true, env: { [name]: value } });
    expect(r.status).toBe(78);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('HEAPHOOK_TLSF_COMPAT=tier4', () => {
  const ready = (env: Record<string, string>) =>
    run('true', [], { tlsf: true, env: { HEAPHOOK_LOG_LEVEL: 'debug', ...env } }).stderr;

  it('one heap under one lock, no pages given back; explicit variables still win', () => {
    expect(ready({ HEAPHOOK_TLSF_COMPAT: 'tier4' })).toMatch(/thread_heaps=0 compat=tier4 /);
    expect(ready({})).toMatch(/thread_heaps=1 compat=none /);
    expect(ready({ HEAPHOOK_TLSF_COMPAT: 'tier4', HEAPHOOK_TLSF_THREAD_HEAPS: '1' })).toMatch(
      /thread_heaps=1 compat=tier4 /,
    );
  });

  it('every growth is said at warn level (tier4 printed each one on stderr)', () => {
    const r = run(guard(), ['grow', '3000000'], {
      tlsf: true,
      env: { ...small, HEAPHOOK_TLSF_COMPAT: 'tier4' },
    });
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/^heaphook\[\d+\] warn: tlsf: pool grew by 1000000 bytes/m);
    expect(loggedAdditions(r.stderr)).toEqual([1_000_000, 2_000_000, 4_000_000]);
  });

  it('the first pool is touched at start-up (tier4 cleared it with memset)', () => {
    const rss = (env: Record<string, string>) => {
      const r = run('python3', ['-c', "print(open('/proc/self/status').read())"], {
        tlsf: true,
        env: { INITIAL_MEMPOOL_SIZE: '64M', ...env },
      });
      expect(r.status).toBe(0);
      return Number(/VmRSS:\s+(\d+) kB/.exec(r.stdout)![1]) * 1024;
    };
    expect(rss({ HEAPHOOK_TLSF_COMPAT: 'tier4' })).toBeGreaterThan(64_000_000);
    expect(rss({})).toBeLessThan(40_000_000);
  });
});
