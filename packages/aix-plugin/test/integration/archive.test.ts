// The archive layout AIX expects, and the module's exports: exactly the export list.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { packageDir } from '../../src/index.js';
import { release, requireBuilt } from '../helpers/run.js';

beforeAll(() => requireBuilt());

const expList = readFileSync(join(packageDir, 'native', 'mem.exp'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('*') && !l.startsWith('#'));

describe('libheaphook_aix_tlsf.a', () => {
  it('holds the member mem64.o (ar t)', () => {
    const r = spawnSync('ar', ['t', join(release, 'libheaphook_aix_tlsf.a')], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('mem64.o\n');
  });

  it('mem64.o is a shared module exporting exactly mem.exp, needing only libc', () => {
    const module = join(release, 'aix', 'tlsf', 'mem64.o');
    const nm = spawnSync('nm', ['-D', '--defined-only', module], { encoding: 'utf8' });
    expect(nm.status).toBe(0);
    const exported = nm.stdout
      .split('\n')
      .filter((l) => / [TDBW] /.test(l))
      .map((l) => l.split(' ').pop()!)
      .sort();
    expect(exported).toEqual([...expList].sort());
    const dyn = spawnSync('readelf', ['-d', module], { encoding: 'utf8' });
    const needed = [...dyn.stdout.matchAll(/\(NEEDED\).*\[(.*)\]/g)].map((m) => m[1]);
    expect(needed).toEqual(['libc.so.6']);
  });

  it('the export list names every required and optional entry point', () => {
    expect(expList).toEqual([
      '__malloc__',
      '__free__',
      '__realloc__',
      '__calloc__',
      '__mallopt__',
      '__mallinfo__',
      '__malloc_init__',
      '__malloc_prefork_lock__',
      '__malloc_postfork_unlock__',
      '__malloc_start__',
      '__posix_memalign__',
    ]);
  });

  it('the test archives carry the same member name', () => {
    for (const a of [
      'libaix_bump.a',
      'libaix_bump_nomemalign.a',
      'libaix_incomplete.a',
      'libaix_early.a',
    ]) {
      const r = spawnSync('ar', ['t', join(release, a)], { encoding: 'utf8' });
      expect(r.stdout).toBe('mem64.o\n');
    }
  });
});
