// `npx nx g @heaphook/tools:backend <name>`: names are checked, an existing folder is refused,
// and a generated backend builds, is found by the heaphook core, passes its own tests (the
// conformance suite and python3 under the backend) and runs a program through `heaphook run`.
// Everything happens in a throw-away workspace in a temporary folder (see helpers/workspace.ts).
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

import { HeaphookError } from '@heaphook/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { className, validateBackendName } from '../src/backend-generator.js';
import { createWorkspace, linkPackage, repoRoot, run } from './helpers/workspace.js';

const NAME = 'gen_check';

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full));
    else out.push(full);
  }
  return out;
}

describe('backend names', () => {
  it.each(['mypool', 'bump_arena', 'a1', 'x'])('accepts %s', (name) => {
    expect(validateBackendName(name)).toBe(name);
  });

  it.each([
    ['', /needs a name/],
    ['MyPool', /lowercase letters, digits and underscores/],
    ['my-pool', /lowercase letters, digits and underscores/],
    ['1pool', /starting with a letter/],
    ['tlsf', /taken by heaphook itself/],
    ['core', /taken by heaphook itself/],
    ['a'.repeat(41), /at most 40 characters/],
  ])('refuses "%s" with a HeaphookError that says what is valid', (name, message) => {
    expect(() => validateBackendName(name)).toThrow(HeaphookError);
    expect(() => validateBackendName(name)).toThrow(message);
  });

  it('derives the C++ class name', () => {
    expect(className('bump_arena')).toBe('BumpArena');
    expect(className('x')).toBe('X');
  });
});

describe('npx nx g @heaphook/tools:backend', () => {
  let root = '';
  let pkg = '';
  let generated: ReturnType<typeof run>;

  beforeAll(() => {
    root = createWorkspace();
    pkg = join(root, 'packages', NAME);
    generated = run('npx', ['nx', 'g', '@heaphook/tools:backend', NAME, '--skipInstall'], root);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('creates packages/<name> with the allocator, CMake, package.json, TS, tests and README', () => {
    expect(generated.stderr).not.toMatch(/error/i);
    expect(generated.status).toBe(0);
    const files = filesUnder(pkg)
      .map((f) => relative(pkg, f))
      .sort();
    expect(files).toEqual([
      'CMakeLists.txt',
      'README.md',
      `native/${NAME}_allocator.cpp`,
      'package.json',
      'src/index.ts',
      `test/integration/${NAME}.test.ts`,
      `test/unit/${NAME}.test.ts`,
      'tsconfig.build.json',
      'tsconfig.json',
      'vitest.config.ts',
    ]);
    for (const file of files) {
      const text = readFileSync(join(pkg, file), 'utf8');
      expect(text, file).not.toMatch(/<%|%>|__name__|__tmpl__/);
    }
    expect(generated.stdout).toContain(`npx nx build ${NAME}`);
  });

  it('adds the variable the library reads to the index docs/environment.md (and to its README)', () => {
    const row = (text: string) =>
      text.split('\n').filter((line) => line.startsWith('| `HEAPHOOK_GEN_CHECK_CHUNK_SIZE`'));
    expect(row(readFileSync(join(root, 'docs/environment.md'), 'utf8'))).toEqual([
      '| `HEAPHOOK_GEN_CHECK_CHUNK_SIZE` | `libheaphook_gen_check.so` | `1MiB` | bytes each size class of the gen_check backend maps at a time (64KiB .. 1GiB) |',
    ]);
    expect(readFileSync(join(repoRoot, 'docs/environment.md'), 'utf8')).not.toContain('GEN_CHECK');
    expect(readFileSync(join(pkg, 'README.md'), 'utf8')).toContain(
      '`HEAPHOOK_GEN_CHECK_CHUNK_SIZE`',
    );
    expect(readFileSync(join(pkg, `native/${NAME}_allocator.cpp`), 'utf8')).toContain(
      '"HEAPHOOK_GEN_CHECK_CHUNK_SIZE"',
    );
  });

  it('writes the C++ in the repository style (clang-format clean)', () => {
    const check = run(
      'clang-format',
      ['--dry-run', '--Werror', join(pkg, `native/${NAME}_allocator.cpp`)],
      root,
    );
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
  });

  it('declares the package as the repository does (npm name, nx name, heaphook backend)', () => {
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(manifest.name).toBe(`@heaphook/${NAME}`);
    expect(manifest.nx).toEqual({ name: NAME });
    expect(manifest.heaphook).toEqual({
      backends: { [NAME]: `build/Release/libheaphook_${NAME}.so` },
    });
    const core = JSON.parse(readFileSync(join(repoRoot, 'packages/core/package.json'), 'utf8')) as {
      version: string;
    };
    expect(manifest.dependencies).toEqual({ '@heaphook/core': core.version });
    // Node-API builds take their headers from the npm package node-api-headers; without this
    // cmake-js downloads Node's headers from nodejs.org, which a build here must never do.
    expect(manifest.binary).toEqual({ napi_versions: [8] });
    const cmake = readFileSync(join(pkg, 'CMakeLists.txt'), 'utf8');
    expect(cmake).toContain(`heaphook_add_backend(${NAME} native/${NAME}_allocator.cpp)`);
    expect(cmake).toContain(`heaphook_add_backend_test(${NAME})`);
    expect(readFileSync(join(pkg, `native/${NAME}_allocator.cpp`), 'utf8')).toContain(
      'class GenCheckAllocator final : public heaphook::GlobalAllocator',
    );
  });

  it('refuses a folder that exists, and an invalid name, with a clear error', () => {
    const again = run('npx', ['nx', 'g', '@heaphook/tools:backend', NAME, '--skipInstall'], root);
    expect(again.status).not.toBe(0);
    expect(again.stdout + again.stderr).toContain(
      `packages/${NAME} already exists: choose another name, or remove the folder first`,
    );
    const bad = run(
      'npx',
      ['nx', 'g', '@heaphook/tools:backend', 'My-Pool', '--skipInstall'],
      root,
    );
    expect(bad.status).not.toBe(0);
    expect(bad.stdout + bad.stderr).toContain('invalid backend name "My-Pool"');
    expect(existsSync(join(root, 'packages', 'My-Pool'))).toBe(false);
  });

  it('builds (cmake-js and tsc), and its own tests pass: conformance suite and python3', () => {
    linkPackage(root, NAME);
    const build = run('npm', ['run', 'build'], pkg);
    expect(build.stdout + build.stderr).not.toMatch(/warning:|error:/);
    expect(build.status).toBe(0);
    expect(existsSync(join(pkg, `build/Release/libheaphook_${NAME}.so`))).toBe(true);
    expect(existsSync(join(pkg, `build/Release/heaphook_conformance_${NAME}`))).toBe(true);
    expect(existsSync(join(pkg, 'dist/index.js'))).toBe(true);

    const typecheck = run('npx', ['tsc', '-p', 'tsconfig.json'], pkg);
    expect(typecheck.stdout).toBe('');
    expect(typecheck.status).toBe(0);

    const tests = run('npx', ['vitest', 'run', '--reporter=json'], pkg);
    const report = JSON.parse(tests.stdout.slice(tests.stdout.indexOf('{'))) as {
      numPassedTests: number;
      numFailedTests: number;
      numPendingTests: number;
    };
    expect(report).toMatchObject({ numPassedTests: 7, numFailedTests: 0, numPendingTests: 0 });
    expect(tests.status).toBe(0);

    // One tier at a time, as in the repository's packages: the unit tier is the TypeScript
    // entry's 2 tests, the integration tier the other 5, and the empty tiers pass.
    const tier = (name: string) => {
      const r = run('npm', ['run', `test:${name}`, '--', '--reporter=json'], pkg);
      expect(r.status, r.stderr).toBe(0);
      const json = r.stdout.slice(r.stdout.indexOf('{'));
      return JSON.parse(json.slice(0, json.lastIndexOf('}') + 1)) as { numPassedTests: number };
    };
    expect(tier('unit').numPassedTests).toBe(2);
    expect(tier('integration').numPassedTests).toBe(5);
    expect(tier('stress').numPassedTests).toBe(0);
  });

  it('heaphook list shows it and heaphook run -b <name> runs python3 on it', () => {
    const cli = join(repoRoot, 'packages/core/bin/heaphook.js');
    const list = run(process.execPath, [cli, 'list'], root);
    expect(list.status).toBe(0);
    expect(list.stdout).toContain(NAME);
    const r = run(
      process.execPath,
      [
        cli,
        'run',
        '-b',
        NAME,
        '--',
        'python3',
        '-c',
        'import ctypes; f = ctypes.CDLL(None).heaphook_active_backend; f.restype = ctypes.c_char_p; print(f().decode(), sum(range(10)))',
      ],
      root,
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${NAME} 45\n`);
    expect(r.status).toBe(0);
  });
});
