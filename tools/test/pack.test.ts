// npm packages that install anywhere: `npm pack` of core, tlsf, heaptrack, ucm-hooks and
// aix-plugin, installed together into an empty folder with one `npm i <tarballs>`, give working
// libraries with no compiler and no install script: the prebuilt Linux x64 libraries,
// addons and collector ship inside the tarballs. The from-source fallback (plain cmake over
// the shipped sources, into the package's build/) is checked too.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { runProgram } from '@heaphook/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { childEnv, repoRoot, run } from './helpers/workspace.js';

/** The packages packed, in dependency order. */
const PACKAGES = ['core', 'tlsf', 'heaptrack', 'ucm-hooks', 'aix-plugin'] as const;

let root = '';
let tarballs: string[] = [];
let app = '';
let installOutput = '';

const installed = (name: string): string => join(app, 'node_modules', '@heaphook', name);

/** Runs a shell command in the installed project, with only npm's own environment. */
const inApp = (command: string, args: readonly string[]) => run(command, args, app);

/** `npx heaphook run -b tlsf -- python3 -c 'print(sum(range(10)))'` in the installed project. */
const runSumOnTlsf = () =>
  inApp('npx', ['heaphook', 'run', '-b', 'tlsf', '--', 'python3', '-c', 'print(sum(range(10)))']);

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'heaphook-pack-'));
  const packDir = join(root, 'tarballs');
  mkdirSync(packDir);
  tarballs = PACKAGES.map((name) => {
    const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', packDir], {
      cwd: join(repoRoot, 'packages', name),
      env: childEnv(),
      encoding: 'utf8',
    });
    return join(packDir, out.trim().split('\n').pop()!);
  });

  // A fresh, empty project; npm with an empty user config (as on a fresh machine).
  app = join(root, 'app');
  mkdirSync(app);
  writeFileSync(join(root, 'empty-npmrc'), '');
  const install = run(
    'npm',
    ['i', '--no-audit', '--no-fund', `--userconfig=${join(root, 'empty-npmrc')}`, ...tarballs],
    app,
  );
  installOutput = (install.stdout + install.stderr).trim();
  expect(install.status, installOutput).toBe(0);
}, 280_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('npm pack', () => {
  it('each tarball holds the prebuilt libraries, dist, and what a from-source build needs', () => {
    const list = (tarball: string): string[] =>
      execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' })
        .split('\n')
        .filter((l) => l !== '');
    const [core, tlsf, heaptrack, ucm, aix] = tarballs.map(list);
    expect(core).toEqual(
      expect.arrayContaining([
        'package/bin/heaphook.js',
        'package/dist/cli.js',
        'package/dist/index.js',
        'package/build/Release/libheaphook_example.so',
        'package/cmake/heaphook.cmake',
        'package/include/heaphook/heaphook.hpp',
        'package/native/interpose.c',
        'package/test/native/conformance.c',
      ]),
    );
    expect(tlsf).toEqual(
      expect.arrayContaining([
        'package/build/Release/libheaphook_tlsf.so',
        'package/build/Release/libpreloaded_tlsf.so',
        'package/build/Release/tlsf_addon.node',
        'package/dist/index.js',
        'package/native/tlsf.c',
        'package/test/native/tlsf_unit.c',
      ]),
    );
    expect(heaptrack).toEqual(
      expect.arrayContaining([
        'package/build/Release/libheaphook_heaptrack.so',
        'package/build/Release/libpreloaded_heaptrack.so',
        'package/build/Release/heaphook-heaptrack-collector',
        'package/dist/commands.js',
      ]),
    );
    expect(ucm).toEqual(expect.arrayContaining(['package/build/Release/libheaphook_ucm.so']));
    expect(aix).toEqual(expect.arrayContaining(['package/build/Release/libheaphook_aix_emul.so']));
    // No binding.gyp (npm would run node-gyp at install), no build tree, no arm64 build tree
    // (not shipped yet), no vitest files; the licence in every one.
    for (const files of [core, tlsf, heaptrack, ucm, aix]) {
      expect(files).toContain('package/LICENSE');
      expect(files!.filter((f) => f.includes('build-arm64'))).toEqual([]);
      expect(files!.filter((f) => /binding\.gyp$|CMakeFiles|\.test\.ts$/.test(f))).toEqual([]);
    }
  });

  it('no package has an install script; each says its version, Node range and platform', () => {
    for (const name of PACKAGES) {
      const manifest = JSON.parse(readFileSync(join(installed(name), 'package.json'), 'utf8')) as {
        scripts?: Record<string, string>;
        version?: string;
        engines?: { node?: string };
        os?: string[];
      };
      expect(manifest.version, name).toMatch(/^\d+\.\d+\.\d+$/);
      expect(manifest.engines?.node, name).toBe('>=20.19');
      expect(manifest.os, name).toEqual(['linux']);
      const scripts = Object.keys(manifest.scripts ?? {});
      expect(
        scripts.filter((s) => /^(pre|post)?install$/.test(s)),
        name,
      ).toEqual([]);
    }
  });
});

describe('npm i <all tarballs> in an empty folder', () => {
  it('prints only the summary: no install script, no gyp, no compiler', () => {
    // What npm printed (see tools/README.md), e.g. "added 35 packages in 6s".
    expect(installOutput).toMatch(/^added \d+ packages in [\d.]+m?s$/m);
    expect(installOutput).not.toMatch(/install script|gyp|cmake|g\+\+|cc1|compil|prebuild/i);
  });

  it('internal dependencies resolve to the tarballs: one copy of each @heaphook package', () => {
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; resolved?: string }>;
    };
    const heaphook = Object.keys(lock.packages).filter((p) => p.includes('@heaphook/'));
    expect(heaphook.sort()).toEqual(PACKAGES.map((n) => `node_modules/@heaphook/${n}`).sort());
    for (const path of heaphook) {
      expect(lock.packages[path]!.resolved, path).toMatch(/^file:.*\.tgz$/);
    }
  });

  it("require('@heaphook/tlsf').libraryPath() and the ESM import name a library that loads", () => {
    const script = [
      "const tlsf = require('@heaphook/tlsf');",
      'console.log(tlsf.libraryPath());',
    ].join('\n');
    const cjs = inApp(process.execPath, ['-e', script]);
    const esm = inApp(process.execPath, [
      '--input-type=module',
      '-e',
      "import { libraryPath } from '@heaphook/tlsf'; console.log(libraryPath());",
    ]);
    const expected = join(installed('tlsf'), 'build/Release/libheaphook_tlsf.so');
    expect(cjs.stdout).toBe(`${expected}\n`);
    expect(esm.stdout).toBe(`${expected}\n`);
    expect(existsSync(expected)).toBe(true);

    const python = runProgram('python3', ['-c', 'print(6 * 7)'], { preload: expected });
    expect(python.stderr).toBe('');
    expect(python.stdout).toBe('42\n');
    const trivial = runProgram('true', [], { preload: expected });
    expect(trivial.stderr).toBe('');
    expect(trivial.status).toBe(0);
  });

  it('the TlsfHeap addon loads from the tarball', () => {
    const r = inApp(process.execPath, [
      '--input-type=module',
      '-e',
      "import { TlsfHeap } from '@heaphook/tlsf'; const h = new TlsfHeap(1 << 20); const a = h.alloc(100); console.log(`${a !== null} ${h.stats().usedBlocks}`); h.destroy();",
    ]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('true 1\n');
  });

  it('npx heaphook list names every backend in node_modules', () => {
    const r = inApp('npx', ['heaphook', 'list']);
    expect(r.status).toBe(0);
    const [header, ...rows] = r.stdout.trim().split('\n');
    expect(header).toMatch(/^BACKEND\s+PACKAGE\s+LIBRARY$/);
    const names = rows
      .filter((line) => /^\S+\s+@heaphook\//.test(line))
      .map((line) => line.split(/\s+/).slice(0, 2));
    expect(names).toEqual([
      ['example', '@heaphook/core'],
      ['heaptrack', '@heaphook/heaptrack'],
      ['preloaded_heaptrack', '@heaphook/heaptrack'],
      ['preloaded_tlsf', '@heaphook/tlsf'],
      ['tlsf', '@heaphook/tlsf'],
      ['ucm-hooks', '@heaphook/ucm-hooks'],
      // Listed last, under "emulations": not a heap backend for Linux programs.
      ['aix-plugin', '@heaphook/aix-plugin'],
    ]);
    expect(r.stdout).toContain(join(installed('tlsf'), 'build/Release/libheaphook_tlsf.so'));
  });

  it("tier4's names: heaphook path preloaded_tlsf / preloaded_heaptrack give regular files, the same bytes as heaphook's, and python3 runs on them", () => {
    for (const [pkg, name, real] of [
      ['tlsf', 'preloaded_tlsf', 'libheaphook_tlsf.so'],
      ['heaptrack', 'preloaded_heaptrack', 'libheaphook_heaptrack.so'],
    ] as const) {
      const r = inApp('npx', ['heaphook', 'path', name]);
      const expected = join(installed(pkg), `build/Release/lib${name}.so`);
      expect(r.stdout).toBe(`${expected}\n`);
      expect(lstatSync(expected).isFile()).toBe(true); // not a link: npm pack keeps no links
      expect(
        readFileSync(expected).equals(readFileSync(join(installed(pkg), 'build/Release', real))),
      ).toBe(true);
    }
    const python = runProgram('python3', ['-c', 'print(6 * 7)'], {
      preload: join(installed('tlsf'), 'build/Release/libpreloaded_tlsf.so'),
      env: { INITIAL_MEMPOOL_SIZE: '50000000', ADDITIONAL_MEMPOOL_SIZE: '20000000' },
    });
    expect(python.stderr).toBe('');
    expect(python.stdout).toBe('42\n');
  });

  it("npx heaphook run -b tlsf -- python3 -c 'print(sum(range(10)))' prints 45", () => {
    const r = runSumOnTlsf();
    expect(r.stdout).toBe('45\n');
    expect(r.status).toBe(0);
    const active = inApp('npx', [
      'heaphook',
      'run',
      '-b',
      'tlsf',
      '--',
      'python3',
      '-c',
      'import ctypes; f = ctypes.CDLL(None).heaphook_active_backend; f.restype = ctypes.c_char_p; print(f().decode())',
    ]);
    expect(active.stdout).toBe('tlsf\n');
  });

  it('npx heaphook record (the heaptrack collector from the tarball) writes a heaplog', () => {
    const dir = join(root, 'record');
    mkdirSync(dir);
    const r = run(
      join(app, 'node_modules/.bin/heaphook'),
      ['record', '--', 'sh', '-c', 'echo hi'],
      dir,
    );
    expect(r.stdout).toBe('hi\n');
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/heaphook record: wrote .*heaplog\.\d+\.log \(\d+ events/);
    expect(
      readdirSync(dir).filter((f) => /^heaplog\.\d+(\.\d+)?\.log$/.test(f)).length,
    ).toBeGreaterThan(0);
  });
});

describe('the from-source fallback', () => {
  it('plain cmake over the installed tlsf package rebuilds build/Release, which then works', () => {
    const pkg = installed('tlsf');
    const library = join(pkg, 'build/Release/libheaphook_tlsf.so');
    rmSync(join(pkg, 'build'), { recursive: true, force: true });
    const configure = run(
      'cmake',
      ['-S', pkg, '-B', join(pkg, 'build'), '-DBUILD_TESTING=OFF'],
      app,
    );
    expect(configure.stderr).toBe('');
    expect(configure.status).toBe(0);
    const build = run(
      'cmake',
      ['--build', join(pkg, 'build'), '--target', 'heaphook_tlsf', 'heaphook_conformance_tlsf'],
      app,
    );
    expect(build.status, build.stdout + build.stderr).toBe(0);
    expect(existsSync(library)).toBe(true);
    const conformance = run(join(pkg, 'build/Release/heaphook_conformance_tlsf'), ['tlsf'], app);
    expect(conformance.stdout).toMatch(/backend tlsf: \d+ groups, \d+ checks, 0 failed/);
    const r = runSumOnTlsf();
    expect(r.stdout).toBe('45\n');
  });
});
