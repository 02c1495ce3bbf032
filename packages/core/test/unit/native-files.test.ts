// nativeFile: a package's native files come from its installed platform package for the
// architecture, else from its own build folder (build/Release, or build-<arch>/Release for a
// cross build); when they are nowhere, nativeFileMissing names the platform package and the
// build command. Checked on a throw-away installed layout, and on this repository's own.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import {
  findBackend,
  libraryPath,
  LibraryNotBuiltError,
  nativeFile,
  nativeFileMissing,
  platformPackageDir,
  platformPackageName,
} from '../../src/index.js';

const foreignArch = process.arch === 'arm64' ? 'x64' : 'arm64';

/** node_modules/@acme/alloc declaring a backend under build/Release, with its platform packages
 * for both architectures in optionalDependencies; none installed yet. */
function makeProject(): { root: string; packageDir: string } {
  const root = mkdtempSync(join(tmpdir(), 'heaphook-native-files-'));
  const packageDir = join(root, 'node_modules', '@acme', 'alloc');
  mkdirSync(packageDir, { recursive: true });
  writeFileSync(
    join(packageDir, 'package.json'),
    JSON.stringify({
      name: '@acme/alloc',
      version: '1.2.3',
      optionalDependencies: {
        '@acme/alloc-linux-x64-gnu': '1.2.3',
        '@acme/alloc-linux-arm64-gnu': '1.2.3',
      },
      heaphook: { backends: { acme: 'build/Release/libheaphook_acme.so' } },
    }),
  );
  return { root, packageDir };
}

/** Installs the platform package of `arch` with the library in it; returns the library. */
function installPlatformPackage(root: string, arch: string): string {
  const dir = join(root, 'node_modules', '@acme', `alloc-linux-${arch}-gnu`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: `@acme/alloc-linux-${arch}-gnu`, version: '1.2.3' }),
  );
  writeFileSync(join(dir, 'libheaphook_acme.so'), arch);
  return join(dir, 'libheaphook_acme.so');
}

function buildInPackage(packageDir: string, folder: string): string {
  mkdirSync(join(packageDir, folder, 'Release'), { recursive: true });
  const path = join(packageDir, folder, 'Release', 'libheaphook_acme.so');
  writeFileSync(path, folder);
  return path;
}

describe('nativeFile', () => {
  let project: { root: string; packageDir: string };
  beforeEach(() => {
    project = makeProject();
  });
  afterEach(() => rmSync(project.root, { recursive: true, force: true }));

  it('names platform packages <package>-linux-<arch>-gnu', () => {
    expect(platformPackageName('@heaphook/tlsf', 'x64')).toBe('@heaphook/tlsf-linux-x64-gnu');
    expect(platformPackageName('@heaphook/tlsf', 'arm64')).toBe('@heaphook/tlsf-linux-arm64-gnu');
  });

  it("takes the build folder's file first, the installed platform package's otherwise", () => {
    const { root, packageDir } = project;
    const shipped = installPlatformPackage(root, process.arch);
    expect(platformPackageDir(packageDir, process.arch)).toBe(
      join(root, 'node_modules', '@acme', `alloc-linux-${process.arch}-gnu`),
    );
    expect(nativeFile(packageDir, 'libheaphook_acme.so')).toBe(shipped);
    expect(findBackend('acme', { from: root }).libraryPath).toBe(shipped);
    // A build in the package's own folder wins: a workspace runs what it built.
    const built = buildInPackage(packageDir, 'build');
    expect(nativeFile(packageDir, 'libheaphook_acme.so')).toBe(built);
    expect(findBackend('acme', { from: root }).libraryPath).toBe(built);
  });

  it('for another architecture: the cross build folder, else its platform package', () => {
    const { root, packageDir } = project;
    buildInPackage(packageDir, 'build');
    const shipped = installPlatformPackage(root, foreignArch);
    expect(libraryPath('acme', { from: root, arch: foreignArch })).toBe(shipped);
    const cross = buildInPackage(packageDir, `build-${foreignArch}`);
    expect(nativeFile(packageDir, 'libheaphook_acme.so', foreignArch)).toBe(cross);
    expect(libraryPath('acme', { from: root, arch: foreignArch })).toBe(cross);
    expect(libraryPath('acme', { from: root })).toBe(
      join(packageDir, 'build/Release/libheaphook_acme.so'),
    );
  });

  it('when the file is nowhere: the platform package to install and the build command', () => {
    const { root, packageDir } = project;
    expect(nativeFileMissing(packageDir, 'libheaphook_acme.so')).toBe(
      `libheaphook_acme.so for linux-${process.arch} is in neither @acme/alloc-linux-${process.arch}-gnu nor ${join(packageDir, 'build/Release')}: ` +
        `install @acme/alloc-linux-${process.arch}-gnu (npm installs it with @acme/alloc on linux-${process.arch} with glibc unless optional dependencies are omitted), ` +
        'or build it from source: npx nx build alloc',
    );
    expect(nativeFileMissing(packageDir, 'libheaphook_acme.so', foreignArch)).toMatch(
      new RegExp(
        `install @acme/alloc-linux-${foreignArch}-gnu for that machine \\(npm install @acme/alloc --cpu=${foreignArch}\\), or build it from source: npx nx run alloc:build-${foreignArch}$`,
      ),
    );
    expect(() => libraryPath('acme', { from: root })).toThrow(LibraryNotBuiltError);
    expect(() => libraryPath('acme', { from: root })).toThrow(
      `the preload library of backend "acme": ${nativeFileMissing(packageDir, 'libheaphook_acme.so')}`,
    );
    const acme = findBackend('acme', { from: root });
    expect(acme.built).toBe(false);
    expect(acme.missing).toBe(nativeFileMissing(packageDir, 'libheaphook_acme.so'));
    installPlatformPackage(root, process.arch);
    expect(nativeFileMissing(packageDir, 'libheaphook_acme.so')).toBeUndefined();
    // Installed, but without that file (as the arm64 packages are without the Node addons).
    expect(nativeFileMissing(packageDir, 'acme_addon.node')).toBe(
      `acme_addon.node is not shipped for linux-${process.arch} (@acme/alloc-linux-${process.arch}-gnu has no such file) and not in ${join(packageDir, 'build/Release')}: build it from source: npx nx build alloc`,
    );
  });

  it('a package without platform packages: only the build command', () => {
    const dir = mkdtempSync(join(tmpdir(), 'heaphook-native-files-plain-'));
    try {
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: '@acme/plain' }));
      expect(nativeFileMissing(dir, 'x.so')).toBe(
        `x.so for linux-${process.arch} is missing at ${join(dir, 'build/Release/x.so')}: build it with "npx nx build plain"`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('in this repository (no platform package installed)', () => {
  const coreDir = fileURLToPath(new URL('../..', import.meta.url));
  it("a workspace package's files come from its build/Release", () => {
    expect(platformPackageDir(coreDir, process.arch)).toBeUndefined();
    expect(nativeFile(coreDir, 'libheaphook_example.so')).toBe(
      join(coreDir, 'build/Release/libheaphook_example.so'),
    );
    expect(nativeFile(coreDir, 'libheaphook_example.so', 'arm64')).toBe(
      join(
        coreDir,
        process.arch === 'arm64' ? 'build' : 'build-arm64',
        'Release/libheaphook_example.so',
      ),
    );
  });
});
