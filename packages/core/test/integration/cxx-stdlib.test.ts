// heaphook_add_backend(<name> CXX_STDLIB ...): a C++ backend that uses the standard library
// (test/native/stdlib_backend.cpp: std::unordered_map and std::mutex in its constructor and in
// every do_alloc, a global std::unordered_map<std::string, ...> built by a static constructor,
// an exception thrown and caught in its constructor). libstdc++ allocates through the hooked
// malloc while it starts, before the backend may be initialised: the bootstrap arena serves
// those calls, fork handlers still hold the backend's lock across fork, and real programs run.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { prepareProgramDir, realPrograms } from '../../src/testing.js';
import { backendLibrary, built, run } from '../helpers/native.js';

let library: string;
let workDir: string;

beforeAll(() => {
  library = backendLibrary('stdlib');
  workDir = prepareProgramDir();
});

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

describe('a CXX_STDLIB backend (std::unordered_map, std::mutex)', () => {
  it('links libstdc++ and still exports only the malloc family and heaphook_*', () => {
    const dynamic = execFileSync('readelf', ['-d', '-W', library], { encoding: 'utf8' });
    expect(dynamic).toMatch(/NEEDED.*\[libstdc\+\+\.so\.6\]/);
    const symbols = execFileSync('nm', ['-D', '--defined-only', library], { encoding: 'utf8' });
    const names = symbols
      .split('\n')
      .filter((line) => / [TWiV] /.test(line))
      .map((line) => line.split(' ').pop()!.replace(/@.*/, ''));
    expect(names).toContain('malloc');
    expect(
      names.filter(
        (name) =>
          !/^(heaphook_|malloc|free|calloc|realloc|posix_memalign|memalign|aligned_alloc|valloc|pvalloc|mallinfo|mallopt|reallocarray)/.test(
            name,
          ),
      ),
    ).toEqual([]);
  });

  it('passes the conformance suite (linked), fork group included', () => {
    const result = run(built('heaphook_conformance_stdlib'), ['stdlib'], {
      env: { HEAPHOOK_CONFORMANCE_QUIET: '1' },
    });
    expect(result.stdout).not.toContain('FAIL');
    expect(result.stdout).toMatch(/^ok +fork +\d+ checks$/m);
    expect(result.stdout).toMatch(/backend stdlib: 12 groups, \d+ checks, 0 failed$/m);
    expect(result.status).toBe(0);
  }, 300_000);

  it('is initialised after the library constructors, libstdc++ start-up served by the arena', () => {
    const result = run('python3', ['-c', 'print("hi")'], {
      preload: library,
      env: { HEAPHOOK_LOG_LEVEL: 'debug' },
    });
    expect(result.stdout).toBe('hi\n');
    expect(result.status).toBe(0);
    const ready = /backend stdlib ready \(heaphook [^;]+; bootstrap arena used (\d+) of/.exec(
      result.stderr,
    );
    expect(ready).not.toBeNull();
    // libstdc++'s emergency exception pool (~70 KiB) at least.
    expect(Number(ready![1])).toBeGreaterThan(32 * 1024);
  });

  const programs = realPrograms.filter(
    (program) => program.name === 'python3' || program.name.startsWith('shell pipeline'),
  );
  it.each(programs.map((p) => [p.name, p] as const))('%s: same output as on glibc', (_name, p) => {
    const reference = run(p.command, [...p.args], { cwd: workDir });
    expect(reference.status).toBe(0);
    const preloaded = run(p.command, [...p.args], { cwd: workDir, preload: library });
    expect(preloaded.stderr).toBe(reference.stderr);
    expect(preloaded.stdout).toBe(reference.stdout);
    expect(preloaded.signal).toBeNull();
    expect(preloaded.status).toBe(0);
  });
});
