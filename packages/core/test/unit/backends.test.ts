import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import {
  BackendNotFoundError,
  LibraryNotBuiltError,
  findBackend,
  libraryPath,
  listBackends,
  preloadEnv,
} from '../../src/index.js';

/** A throw-away project with an installed third-party backend package. */
function makeProject(): { root: string; libPath: string } {
  const root = mkdtempSync(join(tmpdir(), 'heaphook-discovery-'));
  const pkgDir = join(root, 'node_modules', '@acme', 'fancy-alloc');
  mkdirSync(join(pkgDir, 'lib'), { recursive: true });
  writeFileSync(
    join(pkgDir, 'package.json'),
    JSON.stringify({
      name: '@acme/fancy-alloc',
      version: '1.0.0',
      heaphook: { backends: { fancy: 'lib/libheaphook_fancy.so' } },
    }),
  );
  // A package without a heaphook field must be ignored.
  mkdirSync(join(root, 'node_modules', 'left-pad'), { recursive: true });
  writeFileSync(join(root, 'node_modules', 'left-pad', 'package.json'), '{"name":"left-pad"}');
  return { root, libPath: join(pkgDir, 'lib', 'libheaphook_fancy.so') };
}

describe('backend discovery', () => {
  let project: { root: string; libPath: string };
  beforeEach(() => {
    project = makeProject();
  });
  afterEach(() => rmSync(project.root, { recursive: true, force: true }));

  it("finds backends declared by any installed package, and the core's own example", () => {
    const names = listBackends({ from: project.root }).map((b) => b.name);
    expect(names).toContain('fancy');
    expect(names).toContain('example');
    expect(names).not.toContain('left-pad');
  });

  it('reports a declared but unbuilt library, and names the command that builds it', () => {
    const fancy = findBackend('fancy', { from: project.root });
    expect(fancy.built).toBe(false);
    expect(fancy.packageName).toBe('@acme/fancy-alloc');
    expect(() => libraryPath('fancy', { from: project.root })).toThrow(LibraryNotBuiltError);
    expect(() => libraryPath('fancy', { from: project.root })).toThrow(/npx nx build fancy-alloc/);
  });

  it("marks another name of a package's backend as its alias (tier4's names), path and all", () => {
    const pkgDir = join(project.root, 'node_modules', '@acme', 'fancy-alloc');
    writeFileSync(
      join(pkgDir, 'package.json'),
      JSON.stringify({
        name: '@acme/fancy-alloc',
        heaphook: {
          backends: { fancy: 'lib/libheaphook_fancy.so', old_fancy: 'lib/libold_fancy.so' },
          aliases: { old_fancy: 'fancy' },
        },
      }),
    );
    const byName = new Map(listBackends({ from: project.root }).map((b) => [b.name, b]));
    expect(byName.get('fancy')?.aliasOf).toBeUndefined();
    expect(byName.get('old_fancy')?.aliasOf).toBe('fancy');
    expect(byName.get('old_fancy')?.libraryPath).toBe(join(pkgDir, 'lib', 'libold_fancy.so'));
  });

  it('gives the absolute library path once the library exists', () => {
    writeFileSync(project.libPath, '');
    expect(libraryPath('fancy', { from: project.root })).toBe(project.libPath);
  });

  it('names the installed backends when asked for an unknown one', () => {
    expect(() => libraryPath('nope', { from: project.root })).toThrow(BackendNotFoundError);
    expect(() => libraryPath('nope', { from: project.root })).toThrow(/installed: .*example/);
  });

  it("preloads in the order given, keeps the caller's LD_PRELOAD after ours, adds env", () => {
    writeFileSync(project.libPath, '');
    const example = libraryPath('example');
    const env = preloadEnv(['fancy', 'example'], {
      from: project.root,
      env: { INITIAL_MEMPOOL_SIZE: '64M' },
      baseEnv: { PATH: '/usr/bin', LD_PRELOAD: '/opt/other.so' },
    });
    expect(env.LD_PRELOAD).toBe(`${project.libPath}:${example}:/opt/other.so`);
    expect(env.INITIAL_MEMPOOL_SIZE).toBe('64M');
    expect(env.PATH).toBe('/usr/bin');
  });
});
