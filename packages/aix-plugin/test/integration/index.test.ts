// The TypeScript entry and the heaphook CLI's view of the package.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { archivePath, env, libraryPath, MEMBER, packageDir, parseReport } from '../../src/index.js';

describe('@heaphook/aix-plugin', () => {
  it('libraryPath() and archivePath() name built files', () => {
    expect(libraryPath()).toBe(join(packageDir, 'build', 'Release', 'libheaphook_aix_emul.so'));
    expect(archivePath()).toBe(join(packageDir, 'build', 'Release', 'libheaphook_aix_tlsf.a'));
    expect(existsSync(libraryPath())).toBe(true);
    expect(existsSync(archivePath())).toBe(true);
    expect(MEMBER).toBe('mem64.o');
  });

  it('env() gives MALLOCTYPE with a bare archive name and LIBPATH with its folder', () => {
    expect(env()).toEqual({
      MALLOCTYPE: 'user:libheaphook_aix_tlsf.a',
      LIBPATH: join(packageDir, 'build', 'Release'),
    });
    expect(env({ archive: 'libmine.a', libPath: ['/opt/a', '/opt/b'], report: '/tmp/r' })).toEqual({
      MALLOCTYPE: 'user:libmine.a',
      LIBPATH: '/opt/a:/opt/b',
      HEAPHOOK_AIX_EMUL_REPORT: '/tmp/r',
    });
    expect(() => env({ archive: '/x/mem64.o' })).toThrow(/named <name>\.a/);
  });

  it('parseReport() reads the exit report lines', () => {
    expect(parseReport('noise\naix-emul pid=7 backend=aix:x malloc=3 init=1\n')).toEqual([
      { pid: 7, backend: 'aix:x', malloc: 3, init: 1 },
    ]);
  });

  it('`heaphook path aix-plugin` prints the emulation library', () => {
    const require = createRequire(import.meta.url);
    const core = dirname(require.resolve('@heaphook/core/package.json'));
    const r = spawnSync(
      process.execPath,
      [join(core, 'bin', 'heaphook.js'), 'path', 'aix-plugin'],
      {
        encoding: 'utf8',
        cwd: packageDir,
      },
    );
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe(libraryPath());
  });
});
