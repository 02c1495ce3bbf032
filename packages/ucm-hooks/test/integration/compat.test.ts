// libucm source compatibility (heaphook/ucm_compat.h) and how users find the library.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { heaphookBin } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

import { includeDir, libraryPath } from '../../src/index.js';

const release = fileURLToPath(new URL('../../build/Release/', import.meta.url));
const cli = heaphookBin;

describe('libucm compatibility', () => {
  it('libucm-style code runs against heaphook while a libucm defining the same names is loaded', () => {
    const needed = spawnSync('readelf', ['-d', release + 'ucm_compat_test'], { encoding: 'utf8' });
    expect(needed.stdout).toContain('[libucm.so]');
    expect(needed.stdout).toContain('[libheaphook_ucm.so]');
    const result = spawnSync(release + 'ucm_compat_test', [], { encoding: 'utf8' });
    expect(result.stdout + result.stderr).toContain('compat: ok');
    expect(result.status).toBe(0);
  });

  it('the compiled object refers to heaphook_ucm_* names only', () => {
    const symbols = spawnSync('nm', ['-u', release + 'ucm_compat_test'], { encoding: 'utf8' });
    expect(symbols.stdout).toContain('heaphook_ucm_set_event_handler');
    expect(symbols.stdout).not.toMatch(/\bucm_set_event_handler\b/);
  });
});

describe('finding the library', () => {
  it('heaphook path ucm-hooks prints the library', () => {
    const result = spawnSync(process.execPath, [cli, 'path', 'ucm-hooks'], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe(libraryPath());
  });

  it('the include directory holds both headers', () => {
    const result = spawnSync('ls', [includeDir() + '/heaphook'], { encoding: 'utf8' });
    expect(result.stdout).toContain('ucm.h');
    expect(result.stdout).toContain('ucm_compat.h');
  });

  it('the library exports the hooked calls and the API only', () => {
    const result = spawnSync('nm', ['-D', '--defined-only', libraryPath()], { encoding: 'utf8' });
    const names = result.stdout
      .trim()
      .split('\n')
      .map((line) => line.split(' ').pop())
      .filter((name) => name && !name.startsWith('heaphook_ucm_'))
      .sort();
    expect(names).toEqual([
      'brk',
      'madvise',
      'mmap',
      'mmap64',
      'mremap',
      'munmap',
      'sbrk',
      'shmat',
      'shmdt',
    ]);
  });
});
