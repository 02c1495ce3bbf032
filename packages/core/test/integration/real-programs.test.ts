// Real programs under the example backend (the shared set of @heaphook/core/testing: python3,
// node, threads, a forking shell pipeline, a C compile) must behave exactly as they do on
// glibc's malloc, with nothing extra on stderr.
import { rmSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { prepareProgramDir, realPrograms } from '../../src/testing.js';
import { backendLibrary, run, type RunResult } from '../helpers/native.js';

let library: string;
let workDir: string;

beforeAll(() => {
  library = backendLibrary('example');
  workDir = prepareProgramDir();
});

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

/** Runs the command with and without the backend; both must succeed with the same output. */
function compareWithGlibc(command: string, args: string[], cwd?: string): RunResult {
  const reference = run(command, args, { cwd });
  expect(reference.stderr).toBe('');
  expect(reference.status).toBe(0);
  const preloaded = run(command, args, { cwd, preload: library });
  expect(preloaded.stderr).toBe(reference.stderr);
  expect(preloaded.stdout).toBe(reference.stdout);
  expect(preloaded.signal).toBeNull();
  expect(preloaded.status).toBe(0);
  expect(preloaded.stdout.length).toBeGreaterThan(0);
  return preloaded;
}

describe('real programs under the example backend', () => {
  it('the backend really serves them (heaphook_active_backend through ctypes, and the init log)', () => {
    const probe = run(
      'python3',
      [
        '-c',
        'import ctypes; f = ctypes.CDLL(None).heaphook_active_backend; f.restype = ctypes.c_char_p; print(f().decode())',
      ],
      { preload: library },
    );
    expect(probe.stdout).toBe('example\n');
    expect(probe.status).toBe(0);

    const logged = run(process.execPath, ['-e', 'console.log("hi")'], {
      preload: library,
      env: { HEAPHOOK_LOG_LEVEL: 'debug' },
    });
    expect(logged.stdout).toBe('hi\n');
    expect(logged.stderr).toMatch(
      /^heaphook\[\d+\] debug: backend example ready \(heaphook 0\.1\.0;/m,
    );
  });

  it.each(realPrograms.map((p) => [p.name, p] as const))(
    '%s: same output as on glibc',
    (_name, program) => {
      compareWithGlibc(program.command, [...program.args], workDir);
    },
  );

  it('a program compiled under the backend runs under it too', () => {
    const compiled = run('cc', ['-O2', '-o', 'work', 'work.c'], { cwd: workDir, preload: library });
    expect(compiled.stderr).toBe('');
    expect(compiled.status).toBe(0);
    const result = compareWithGlibc(join(workDir, 'work'), [], workDir);
    expect(result.stdout).toMatch(/^100000 \d+\n$/);
  });

  it('the passthrough backend (a C backend whose init allocates) uses the bootstrap arena', () => {
    const result = run('python3', ['-c', 'print(sorted({3: 1, 1: 2}))'], {
      preload: backendLibrary('passthrough'),
      env: { HEAPHOOK_LOG_LEVEL: 'debug' },
    });
    expect(result.stdout).toBe('[1, 3]\n');
    expect(result.status).toBe(0);
    const ready =
      /backend passthrough ready \(heaphook [\d.]+; bootstrap arena used (\d+) of (\d+) bytes\)/.exec(
        result.stderr,
      );
    expect(ready).not.toBeNull();
    expect(Number(ready![1])).toBeGreaterThan(4000);
    // The arena block init kept was moved into the backend by realloc, contents intact.
    expect(result.stderr).toMatch(
      /passthrough: arena block 0x[0-9a-f]+ moved into the backend at 0x[0-9a-f]+/,
    );
  });

  it('an exhausted bootstrap arena stops the program with one fatal line, not a crash', () => {
    const result = run('/bin/echo', ['main ran'], {
      preload: backendLibrary('passthrough'),
      env: { HEAPHOOK_PASSTHROUGH_EARLY_BYTES: '1M' },
    });
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(
      /^heaphook\[\d+\] fatal: the bootstrap arena \(256 KiB\) cannot serve 1000000 bytes: the backend allocates too much before it is ready\n$/,
    );
    expect(result.signal).toBe('SIGABRT');
  });
});
