// npm packages that install anywhere, as sharp and resvg ship theirs: `npm pack` of core, tlsf,
// heaptrack, ucm-hooks and aix-plugin (TypeScript, sources, no binaries) and of their platform
// packages, <package>-linux-<arch>-gnu (the binaries, staged from the builds by
// scripts/stage-platforms.mjs), installed into an empty project whose package.json names the
// packages and, as optionalDependencies, every platform package (as the packages' own
// optionalDependencies would bring them from the registry). npm installs only the platform
// packages of the machine (or of `--cpu=arm64`), runs no install script and no compiler, and
// `heaphook path` / `libraryPath()` find the libraries in them. The from-source fallback (plain
// cmake over the shipped sources, into the package's build/) is checked too.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  AARCH64_PYTHON,
  aarch64EmulationMissing,
  arm64BuildMissing,
  isAarch64Elf,
  runAarch64,
  runProgram,
  skipOutsideCI,
} from '@heaphook/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { childEnv, repoRoot, run, type Run } from './helpers/workspace.js';

/** The packages packed, in dependency order. */
const PACKAGES = ['core', 'tlsf', 'heaptrack', 'ucm-hooks', 'aix-plugin'] as const;
type PackageName = (typeof PACKAGES)[number];

interface Manifest {
  name: string;
  version: string;
  scripts?: Record<string, string>;
  engines?: { node?: string };
  os?: string[];
  cpu?: string[];
  libc?: string[];
  files?: string[];
  optionalDependencies?: Record<string, string>;
  heaphook: { nativeFiles: string[] };
}
const manifestOf = (name: PackageName): Manifest =>
  JSON.parse(readFileSync(join(repoRoot, 'packages', name, 'package.json'), 'utf8')) as Manifest;

/** What the arm64 platform package of a package holds: its native files but the Node addons,
 * which are built for this machine's Node only (tools/scripts/build-arm64.mjs builds none). */
const arm64Files = (name: PackageName): string[] =>
  manifestOf(name).heaphook.nativeFiles.filter((file) => !file.endsWith('.node'));

// This test is written for an x86-64 machine, where arm64 is the other architecture.
const arm64Missing =
  process.arch !== 'x64'
    ? `the pack test runs on x86-64 (this is ${process.arch})`
    : PACKAGES.map((name) =>
        arm64BuildMissing(join(repoRoot, 'packages', name), arm64Files(name)),
      ).find((reason) => reason !== undefined);
const withArm64 = !skipOutsideCI(arm64Missing);
const ARCHES = withArm64 ? (['x64', 'arm64'] as const) : (['x64'] as const);

let root = '';
const tarballs = new Map<string, string>(); // package name -> tarball
let x64App = '';
let arm64App = '';
let installOutput = '';
let installSeconds = 0;

const platformName = (name: PackageName, arch: string): string =>
  `@heaphook/${name}-linux-${arch}-gnu`;
const installedIn = (app: string, name: string): string =>
  join(app, 'node_modules', ...name.split('/'));
const installed = (name: PackageName): string => installedIn(x64App, `@heaphook/${name}`);
const shipped = (name: PackageName, arch = 'x64'): string =>
  installedIn(arch === 'x64' ? x64App : arm64App, platformName(name, arch));

/** Runs a command in an installed project, with only npm's own environment. */
const inApp = (app: string, command: string, args: readonly string[]): Run =>
  run(command, args, app);

/** The installed `heaphook` command of a project (what npx runs, without npx's start-up). */
const heaphookIn = (app: string, args: readonly string[]): Run =>
  inApp(app, join(app, 'node_modules/.bin/heaphook'), args);

/** `heaphook run -b tlsf -- python3 -c 'print(sum(range(10)))'` in the x64 project. */
const runSumOnTlsf = (): Run =>
  heaphookIn(x64App, ['run', '-b', 'tlsf', '--', 'python3', '-c', 'print(sum(range(10)))']);

/** `npm pack` of folders into `dest`, one npm run; the tarballs' paths in the folders' order. */
function pack(folders: readonly string[], dest: string): string[] {
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', dest, ...folders], {
    cwd: repoRoot,
    env: childEnv(),
    encoding: 'utf8',
  });
  return out
    .trim()
    .split('\n')
    .map((line) => join(dest, line.trim()));
}

/** A fresh project depending on the packed packages, every platform package optional. */
function makeApp(dir: string): void {
  mkdirSync(dir);
  const dependencies = Object.fromEntries(
    PACKAGES.map((name) => [`@heaphook/${name}`, `file:${tarballs.get(`@heaphook/${name}`)!}`]),
  );
  const optionalDependencies = Object.fromEntries(
    [...tarballs].filter(([name]) => /-linux-/.test(name)).map(([name, t]) => [name, `file:${t}`]),
  );
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'app', private: true, dependencies, optionalDependencies }, null, 2),
  );
}

/** npm install as on a fresh machine: empty user config; registry packages from the cache when
 * it has them (the workspace's own `npm install` filled it), else from the registry. */
function npmInstall(app: string, extra: readonly string[] = []): Run {
  return inApp(app, 'npm', [
    'install',
    '--no-audit',
    '--no-fund',
    '--prefer-offline',
    `--userconfig=${join(root, 'empty-npmrc')}`,
    ...extra,
  ]);
}

const list = (tarball: string): string[] =>
  execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l !== '');

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'heaphook-pack-'));
  writeFileSync(join(root, 'empty-npmrc'), '');
  const packDir = join(root, 'tarballs');
  mkdirSync(packDir);
  const main = pack(
    PACKAGES.map((name) => join(repoRoot, 'packages', name)),
    packDir,
  );
  PACKAGES.forEach((name, i) => tarballs.set(`@heaphook/${name}`, main[i]!));

  const staged = join(root, 'platforms');
  const stage = run(
    process.execPath,
    [
      join(repoRoot, 'tools/scripts/stage-platforms.mjs'),
      '--out',
      staged,
      '--arch',
      ARCHES.join(','),
    ],
    repoRoot,
  );
  expect(stage.status, stage.stderr).toBe(0);
  const platformFolders = PACKAGES.flatMap((name) =>
    ARCHES.map((arch) => ({
      name: platformName(name, arch),
      dir: join(staged, `${name}-linux-${arch}-gnu`),
    })),
  );
  const platformTarballs = pack(
    platformFolders.map((p) => p.dir),
    packDir,
  );
  platformFolders.forEach((p, i) => tarballs.set(p.name, platformTarballs[i]!));

  x64App = join(root, 'app-x64');
  makeApp(x64App);
  const started = process.hrtime.bigint();
  const install = npmInstall(x64App);
  installSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  installOutput = (install.stdout + install.stderr).trim();
  expect(install.status, installOutput).toBe(0);

  if (withArm64) {
    arm64App = join(root, 'app-arm64');
    makeApp(arm64App);
    const arm64Install = npmInstall(arm64App, ['--cpu=arm64']);
    expect(arm64Install.status, arm64Install.stdout + arm64Install.stderr).toBe(0);
  }
}, 280_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('npm pack', () => {
  it('the packages hold dist and what a from-source build needs, and no binary', () => {
    const [core, tlsf, heaptrack, ucm, aix] = PACKAGES.map((name) =>
      list(tarballs.get(`@heaphook/${name}`)!),
    );
    expect(core).toEqual(
      expect.arrayContaining([
        'package/bin/heaphook.js',
        'package/dist/cli.js',
        'package/dist/index.js',
        'package/cmake/heaphook.cmake',
        'package/include/heaphook/heaphook.hpp',
        'package/native/interpose.c',
        'package/test/native/conformance.c',
      ]),
    );
    expect(tlsf).toEqual(
      expect.arrayContaining([
        'package/dist/index.js',
        'package/native/tlsf.c',
        'package/test/native/tlsf_unit.c',
      ]),
    );
    expect(heaptrack).toEqual(expect.arrayContaining(['package/dist/report/command.js']));
    expect(ucm).toEqual(expect.arrayContaining(['package/dist/index.js']));
    expect(aix).toEqual(expect.arrayContaining(['package/dist/index.js']));
    // No build tree (the binaries are in the platform packages), no binding.gyp (npm would run
    // node-gyp at install), no vitest files; the licence in every one.
    for (const files of [core, tlsf, heaptrack, ucm, aix]) {
      expect(files).toContain('package/LICENSE');
      expect(files!.filter((f) => /^package\/build/.test(f))).toEqual([]);
      expect(files!.filter((f) => /binding\.gyp$|CMakeFiles|\.test\.ts$/.test(f))).toEqual([]);
    }
  });

  it("each platform package holds exactly its package's native files for that architecture", () => {
    for (const name of PACKAGES) {
      for (const arch of ARCHES) {
        const files = arch === 'x64' ? manifestOf(name).heaphook.nativeFiles : arm64Files(name);
        expect(list(tarballs.get(platformName(name, arch))!).sort(), `${name} ${arch}`).toEqual(
          ['LICENSE', 'README.md', 'package.json', ...files].map((f) => `package/${f}`).sort(),
        );
      }
    }
    // The arm64 packages have no addon: N-API addons are built for this machine's Node only.
    expect(arm64Files('tlsf')).toEqual(['libheaphook_tlsf.so', 'libpreloaded_tlsf.so']);
  });

  it('no package has an install script; each says its version, Node range and platform', () => {
    for (const name of PACKAGES) {
      const manifest = JSON.parse(
        readFileSync(join(installed(name), 'package.json'), 'utf8'),
      ) as Manifest;
      expect(manifest.version, name).toMatch(/^\d+\.\d+\.\d+$/);
      expect(manifest.engines?.node, name).toBe('>=20.19');
      expect(manifest.os, name).toEqual(['linux']);
      expect(manifest.optionalDependencies, name).toEqual({
        [platformName(name, 'x64')]: manifest.version,
        [platformName(name, 'arm64')]: manifest.version,
      });
      const platforms = ARCHES.map((arch) => {
        const dir = arch === 'x64' ? shipped(name) : shipped(name, 'arm64');
        return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
      });
      for (const platform of [manifest, ...platforms]) {
        const scripts = Object.keys(platform.scripts ?? {});
        expect(
          scripts.filter((s) => /^(pre|post)?install$/.test(s)),
          platform.name,
        ).toEqual([]);
      }
      ARCHES.forEach((arch, i) => {
        expect(platforms[i]).toMatchObject({
          name: platformName(name, arch),
          version: manifest.version,
          engines: manifest.engines,
          os: ['linux'],
          cpu: [arch],
          libc: ['glibc'],
        });
      });
    }
  });
});

describe('npm install in an empty project on this x86-64 machine', () => {
  it('prints only the summary: no install script, no gyp, no compiler', () => {
    // What npm printed (see tools/README.md), e.g. "added 42 packages in 6s".
    expect(installOutput).toMatch(/^added \d+ packages in [\d.]+m?s$/m);
    expect(installOutput).not.toMatch(/install script|gyp|cmake|g\+\+|cc1|compil|prebuild/i);
    process.stdout.write(`pack test: npm install took ${installSeconds.toFixed(1)} s\n`);
  });

  it('installs the packages and the x64 platform packages, from the tarballs; no arm64 file', () => {
    expect(readdirSync(join(x64App, 'node_modules/@heaphook')).sort()).toEqual(
      PACKAGES.flatMap((name) => [name, `${name}-linux-x64-gnu`]).sort(),
    );
    const lock = JSON.parse(readFileSync(join(x64App, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { resolved?: string }>;
    };
    for (const name of PACKAGES) {
      for (const dep of [`@heaphook/${name}`, platformName(name, 'x64')]) {
        expect(lock.packages[`node_modules/${dep}`]?.resolved, dep).toMatch(/^file:.*\.tgz$/);
      }
      expect(existsSync(join(installed(name), 'build')), name).toBe(false);
    }
    const arm64 = execFileSync('find', [join(x64App, 'node_modules'), '-name', '*arm64*'], {
      encoding: 'utf8',
    });
    expect(arm64.split('\n').filter((p) => p.includes('@heaphook'))).toEqual([]);
  });

  it('LD_PRELOAD=$(npx heaphook path tlsf) python3 runs on the library of the platform package', () => {
    const r = inApp(x64App, 'npx', ['heaphook', 'path', 'tlsf']);
    const expected = join(shipped('tlsf'), 'libheaphook_tlsf.so');
    expect(r.stdout).toBe(`${expected}\n`);
    expect(existsSync(expected)).toBe(true);
    const python = runProgram('python3', ['-c', 'print(6 * 7)'], { preload: expected });
    expect(python.stderr).toBe('');
    expect(python.stdout).toBe('42\n');
    const trivial = runProgram('true', [], { preload: expected });
    expect(trivial.stderr).toBe('');
    expect(trivial.status).toBe(0);
  });

  it("require('@heaphook/tlsf').libraryPath() and the ESM import name the same library", () => {
    const cjs = inApp(x64App, process.execPath, [
      '-e',
      "console.log(require('@heaphook/tlsf').libraryPath())",
    ]);
    const esm = inApp(x64App, process.execPath, [
      '--input-type=module',
      '-e',
      "import { libraryPath } from '@heaphook/tlsf'; console.log(libraryPath());",
    ]);
    const expected = join(shipped('tlsf'), 'libheaphook_tlsf.so');
    expect(cjs.stdout).toBe(`${expected}\n`);
    expect(esm.stdout).toBe(`${expected}\n`);
  });

  it('the TlsfHeap addon loads from the platform package', () => {
    const r = inApp(x64App, process.execPath, [
      '--input-type=module',
      '-e',
      "import { TlsfHeap, addonPath } from '@heaphook/tlsf'; const h = new TlsfHeap(1 << 20); const a = h.alloc(100); console.log(`${a !== null} ${h.stats().usedBlocks} ${addonPath()}`); h.destroy();",
    ]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`true 1 ${join(shipped('tlsf'), 'tlsf_addon.node')}\n`);
  });

  it('heaphook list names every backend, each library in its platform package', () => {
    const r = heaphookIn(x64App, ['list']);
    expect(r.status).toBe(0);
    const [header, ...rows] = r.stdout.trim().split('\n');
    expect(header).toMatch(/^BACKEND\s+PACKAGE\s+LIBRARY$/);
    const names = rows
      .filter((line) => /^\S+\s+@heaphook\//.test(line))
      .map((line) => line.split(/\s+/).slice(0, 3));
    const lib = (name: PackageName, file: string): string => join(shipped(name), file);
    expect(names).toEqual([
      ['example', '@heaphook/core', lib('core', 'libheaphook_example.so')],
      ['heaptrack', '@heaphook/heaptrack', lib('heaptrack', 'libheaphook_heaptrack.so')],
      ['preloaded_heaptrack', '@heaphook/heaptrack', lib('heaptrack', 'libpreloaded_heaptrack.so')],
      ['preloaded_tlsf', '@heaphook/tlsf', lib('tlsf', 'libpreloaded_tlsf.so')],
      ['tlsf', '@heaphook/tlsf', lib('tlsf', 'libheaphook_tlsf.so')],
      ['ucm-hooks', '@heaphook/ucm-hooks', lib('ucm-hooks', 'libheaphook_ucm.so')],
      // Listed last, under "emulations": not a heap backend for Linux programs.
      ['aix-plugin', '@heaphook/aix-plugin', lib('aix-plugin', 'libheaphook_aix_emul.so')],
    ]);
  });

  it("tier4's names: heaphook path preloaded_tlsf / preloaded_heaptrack give regular files, the same bytes as heaphook's, and python3 runs on them", () => {
    for (const [pkg, name, real] of [
      ['tlsf', 'preloaded_tlsf', 'libheaphook_tlsf.so'],
      ['heaptrack', 'preloaded_heaptrack', 'libheaphook_heaptrack.so'],
    ] as const) {
      const r = heaphookIn(x64App, ['path', name]);
      const expected = join(shipped(pkg), `lib${name}.so`);
      expect(r.stdout).toBe(`${expected}\n`);
      expect(lstatSync(expected).isFile()).toBe(true); // not a link: npm pack keeps no links
      expect(readFileSync(expected).equals(readFileSync(join(shipped(pkg), real)))).toBe(true);
    }
    const python = runProgram('python3', ['-c', 'print(6 * 7)'], {
      preload: join(shipped('tlsf'), 'libpreloaded_tlsf.so'),
      env: { INITIAL_MEMPOOL_SIZE: '50000000', ADDITIONAL_MEMPOOL_SIZE: '20000000' },
    });
    expect(python.stderr).toBe('');
    expect(python.stdout).toBe('42\n');
  });

  it("heaphook run -b tlsf -- python3 -c 'print(sum(range(10)))' prints 45", () => {
    const r = runSumOnTlsf();
    expect(r.stdout).toBe('45\n');
    expect(r.status).toBe(0);
    const active = heaphookIn(x64App, [
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

  it('heaphook record (the collector of the platform package) writes a heaplog', () => {
    const dir = join(root, 'record');
    mkdirSync(dir);
    const r = run(
      join(x64App, 'node_modules/.bin/heaphook'),
      ['record', '--', 'sh', '-c', 'echo hi'],
      dir,
    );
    expect(r.stdout).toBe('hi\n');
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/heaphook record: 1 log in \..* reads .*heaplog\.\d+\.log/);
    expect(
      readdirSync(dir).filter((f) => /^heaplog\.\d+(\.\d+)?\.log$/.test(f)).length,
    ).toBeGreaterThan(0);
  });

  it("core's heaphook-inject (heaphook record -p) comes from its platform package, executable", () => {
    const r = inApp(x64App, process.execPath, [
      '--input-type=module',
      '-e',
      "import { injectorPath } from '@heaphook/core'; console.log(injectorPath());",
    ]);
    const expected = join(shipped('core'), 'heaphook-inject');
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${expected}\n`);
    expect(statSync(expected).mode & 0o111).toBe(0o111);
  });

  it('heaphook path tlsf --arch arm64 names the platform package to install', () => {
    const r = heaphookIn(x64App, ['path', 'tlsf', '--arch', 'arm64']);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /install @heaphook\/tlsf-linux-arm64-gnu for that machine \(npm install @heaphook\/tlsf --cpu=arm64\)/,
    );
  });
});

describe.skipIf(skipOutsideCI(arm64Missing))(
  'npm install --cpu=arm64 (a 64-bit Arm machine)',
  () => {
    it('installs the packages and the arm64 platform packages only, each with its files', () => {
      expect(readdirSync(join(arm64App, 'node_modules/@heaphook')).sort()).toEqual(
        PACKAGES.flatMap((name) => [name, `${name}-linux-arm64-gnu`]).sort(),
      );
      for (const name of PACKAGES) {
        const dir = shipped(name, 'arm64');
        const files = execFileSync('find', ['.', '-type', 'f'], { cwd: dir, encoding: 'utf8' })
          .split('\n')
          .filter((f) => f !== '')
          .map((f) => f.replace(/^\.\//, ''))
          .sort();
        expect(files, name).toEqual(
          ['LICENSE', 'README.md', 'package.json', ...arm64Files(name)].sort(),
        );
        for (const file of arm64Files(name).filter((f) => !f.endsWith('.a')))
          expect(isAarch64Elf(join(dir, file)), `${name} ${file}`).toBe(true);
      }
    });

    it('heaphook path tlsf --arch arm64 gives the aarch64 library of the platform package', () => {
      const r = heaphookIn(arm64App, ['path', 'tlsf', '--arch', 'arm64']);
      const expected = join(shipped('tlsf', 'arm64'), 'libheaphook_tlsf.so');
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe(`${expected}\n`);
      expect(isAarch64Elf(expected)).toBe(true);
      // This machine's library is not there: the error names its platform package.
      const host = heaphookIn(arm64App, ['path', 'tlsf']);
      expect(host.status).toBe(2);
      expect(host.stderr).toMatch(/install @heaphook\/tlsf-linux-x64-gnu/);
    });

    it.skipIf(
      skipOutsideCI(
        aarch64EmulationMissing() ??
          (!existsSync(AARCH64_PYTHON) && `${AARCH64_PYTHON} is missing`),
      ),
    )("Debian's arm64 python3 runs on it under qemu-aarch64", () => {
      const library = join(shipped('tlsf', 'arm64'), 'libheaphook_tlsf.so');
      const r = runAarch64(AARCH64_PYTHON, ['-c', 'print(sum(range(10)))'], {
        preload: library,
        env: { HEAPHOOK_TLSF_STATS: '1' },
      });
      expect(r.stdout).toBe('45\n');
      expect(r.status).toBe(0);
      // TLSF served it: its statistics at exit.
      expect(r.stderr).toMatch(/^heaphook tlsf\[\d+\] stats at exit: pool \d+ bytes/m);
    });
  },
);

describe('the from-source fallback (a platform without a platform package)', () => {
  it('plain cmake over the installed tlsf package rebuilds build/Release, which heaphook then finds', () => {
    const pkg = installed('tlsf');
    rmSync(shipped('tlsf'), { recursive: true, force: true });
    const missing = heaphookIn(x64App, ['path', 'tlsf']);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(
      /install @heaphook\/tlsf-linux-x64-gnu .*or build it from source/,
    );
    const configure = run(
      'cmake',
      ['-S', pkg, '-B', join(pkg, 'build'), '-DBUILD_TESTING=OFF'],
      x64App,
    );
    expect(configure.stderr).toBe('');
    expect(configure.status).toBe(0);
    const build = run(
      'cmake',
      ['--build', join(pkg, 'build'), '--target', 'heaphook_tlsf', 'heaphook_conformance_tlsf'],
      x64App,
    );
    expect(build.status, build.stdout + build.stderr).toBe(0);
    const library = join(pkg, 'build/Release/libheaphook_tlsf.so');
    expect(heaphookIn(x64App, ['path', 'tlsf']).stdout).toBe(`${library}\n`);
    const conformance = run(join(pkg, 'build/Release/heaphook_conformance_tlsf'), ['tlsf'], x64App);
    expect(conformance.stdout).toMatch(/backend tlsf: \d+ groups, \d+ checks, 0 failed/);
    const r = runSumOnTlsf();
    expect(r.stdout).toBe('45\n');
  });
});
