// tier4/heaphook's library name: libpreloaded_tlsf.so is the same library as
// libheaphook_tlsf.so (a copy made by the build after every link), declared as the backend
// `preloaded_tlsf`, and it reads tier4's variables.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { runProgram } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

import { built } from '../helpers/run.js';

const packageDir = fileURLToPath(new URL('../..', import.meta.url));
const heaphookBin = join(
  dirname(createRequire(import.meta.url).resolve('@heaphook/core/package.json')),
  'bin',
  'heaphook.js',
);

describe('libpreloaded_tlsf.so', () => {
  it('`heaphook path preloaded_tlsf` prints an existing file, the same bytes as libheaphook_tlsf.so', () => {
    const out = execFileSync(process.execPath, [heaphookBin, 'path', 'preloaded_tlsf'], {
      cwd: packageDir,
      encoding: 'utf8',
    });
    const path = out.trim();
    expect(path).toBe(built('libpreloaded_tlsf.so'));
    expect(existsSync(path)).toBe(true);
    expect(readFileSync(path).equals(readFileSync(built('libheaphook_tlsf.so')))).toBe(true);
  });

  it("python3 preloaded with it and tier4's two variables uses the pool they size", () => {
    const script =
      'import ctypes; x = [bytes(1000) for _ in range(2000)]; ctypes.CDLL(None).malloc_stats(); print(len(x))';
    const r = runProgram('python3', ['-c', script], {
      preload: built('libpreloaded_tlsf.so'),
      env: {
        INITIAL_MEMPOOL_SIZE: '50000000',
        ADDITIONAL_MEMPOOL_SIZE: '20000000',
        HEAPHOOK_LOG_LEVEL: 'debug',
      },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('2000\n');
    expect(r.stderr).toMatch(/debug: tlsf: pool of 50000000 bytes, additions of 20000000;/);
    expect(r.stderr).toMatch(/debug: backend tlsf ready/);
    const stats =
      /heaphook tlsf: pool (\d+) bytes in (\d+) area\(s\)[^\n]*\n {2}in use: +(\d+) bytes/.exec(
        r.stderr,
      );
    expect(stats, r.stderr).not.toBeNull();
    expect(Number(stats![1])).toBe(50_000_000);
    expect(Number(stats![3])).toBeGreaterThan(2_000_000); // the 2000 kB of bytes objects
    expect(r.stderr).toContain('ADDITIONAL_MEMPOOL_SIZE=20000000');
  });
});
