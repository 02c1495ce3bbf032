// What a preload library exposes and needs: exactly the malloc family and heaphook/core.h,
// no libstdc++, immediate binding; and its reports reach the original stderr even after the
// program closed fd 2.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { backendLibrary, built, run } from '../helpers/native.js';

const MALLOC_FAMILY = [
  'malloc',
  'free',
  'calloc',
  'realloc',
  'reallocarray',
  'posix_memalign',
  'memalign',
  'aligned_alloc',
  'valloc',
  'pvalloc',
  'malloc_usable_size',
  'mallinfo2',
  'mallinfo',
  'malloc_stats',
  'malloc_trim',
  'mallopt',
];
const PUBLIC_API = [
  'heaphook_active_backend',
  'heaphook_version',
  'heaphook_get_stats',
  'heaphook_attach',
  'heaphook_detach',
  'heaphook_is_attached',
];

function definedDynamicSymbols(library: string): string[] {
  const result = run('nm', ['-D', '--defined-only', library]);
  expect(result.status).toBe(0);
  return result.stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length === 3)
    .map((fields) => fields[2]!)
    .sort();
}

function dynamicSection(file: string): string {
  const result = run('readelf', ['-d', file]);
  expect(result.status).toBe(0);
  return result.stdout;
}

function needed(file: string): string[] {
  return [...dynamicSection(file).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map(
    (m) => m[1]!,
  );
}

describe.each(['example', 'passthrough'])('libheaphook_%s.so', (backend) => {
  it('exports exactly the malloc family and the heaphook_* API of core.h', () => {
    const symbols = definedDynamicSymbols(backendLibrary(backend));
    expect(symbols).toEqual([...MALLOC_FAMILY, ...PUBLIC_API].sort());
  });

  it('depends on libc only: no libstdc++, no libgcc_s', () => {
    const libraries = needed(backendLibrary(backend));
    expect(libraries).toEqual(['libc.so.6']);
  });

  it('binds its symbols at load time (no lazy PLT resolution inside malloc)', () => {
    expect(dynamicSection(backendLibrary(backend))).toMatch(/\(FLAGS\)\s+BIND_NOW/);
  });
});

describe('conformance executables', () => {
  it('load their backend before libc, found next to them ($ORIGIN)', () => {
    const file = built('heaphook_conformance_example');
    expect(needed(file)[0]).toBe('libheaphook_example.so');
    expect(dynamicSection(file)).toMatch(
      /\((RUNPATH|RPATH)\)\s+Library (runpath|rpath): \[\$ORIGIN\]/,
    );
  });
});

describe('the report fd', () => {
  it('malloc_stats reaches the original stderr after the program closed fd 2', () => {
    const dir = mkdtempSync(join(tmpdir(), 'heaphook-report-'));
    try {
      const stolen = join(dir, 'took-fd-2.txt');
      const result = run(built('heaphook_report_fd_test'), [stolen], {
        preload: backendLibrary('example'),
      });
      expect(result.stdout).toBe('report_fd_test: done\n');
      expect(result.status).toBe(0);
      expect(result.stderr).toMatch(/^heaphook malloc_stats: backend example\n/);
      expect(result.stderr).toMatch(/^used blocks +=\s+\d+$/m);
      // The file that took descriptor 2 got nothing of the report.
      expect(readFileSync(stolen, 'utf8')).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a backend without statistics still gets a report', () => {
    const result = run(built('heaphook_report_fd_test'), [], {
      preload: backendLibrary('passthrough'),
    });
    expect(result.status).toBe(0);
    expect(result.stderr).toContain(
      'heaphook malloc_stats: backend passthrough\n(the backend keeps no statistics)\n',
    );
  });
});
