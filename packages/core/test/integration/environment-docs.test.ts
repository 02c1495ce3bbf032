/**
 * Every environment variable a native library of the repository reads is documented: in the
 * README of the package whose sources read it, and in docs/environment.md, the index. And the
 * index names no variable that nothing reads. Library sources are each package's native/,
 * include/ and example/ folders (tests and benchmark programs are not libraries).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../../../..', import.meta.url));
const packagesDir = join(repo, 'packages');
const LIBRARY_DIRS = ['native', 'include', 'example'];
const SOURCE = /\.(c|cc|cpp|h|hpp)$/;

/** A variable name passed as a literal to one of the core's readers or getenv. */
const ENV_CALL =
  /\b(?:heaphook_env_\w+|getenv|secure_getenv|heaphook_config_fail)\(\s*"([A-Z][A-Z0-9_]*)"(?:\s*,\s*"([A-Z][A-Z0-9_]*)")?/g;
/** heaphook's own variables, wherever their names are spelled (named constants included). */
const OWN_NAME = /"((?:HEAPHOOK|UCX)_[A-Z0-9_]+)"/g;

function sourcesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourcesUnder(path);
    return SOURCE.test(entry) ? [path] : [];
  });
}

/** Variables read by each package's library sources. */
function variablesByPackage(): Map<string, Set<string>> {
  const result = new Map<string, Set<string>>();
  for (const pkg of readdirSync(packagesDir)) {
    const names = new Set<string>();
    for (const file of LIBRARY_DIRS.flatMap((d) => sourcesUnder(join(packagesDir, pkg, d)))) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(ENV_CALL)) {
        names.add(m[1]!);
        if (m[2] !== undefined) names.add(m[2]);
      }
      for (const m of text.matchAll(OWN_NAME)) names.add(m[1]!);
    }
    if (names.size > 0) result.set(pkg, names);
  }
  return result;
}

const mentions = (text: string, name: string): boolean =>
  new RegExp(`(^|[^A-Z0-9_])${name}([^A-Z0-9_]|$)`).test(text);

const byPackage = variablesByPackage();
const index = readFileSync(join(repo, 'docs', 'environment.md'), 'utf8');

describe('environment variables are documented', () => {
  it('the scan finds the variables of the libraries (so the checks below are not vacuous)', () => {
    expect(byPackage.get('tlsf')).toContain('INITIAL_MEMPOOL_SIZE');
    expect(byPackage.get('core')).toContain('HEAPHOOK_LOG_LEVEL');
    expect(byPackage.get('ucm-hooks')).toContain('UCX_MEM_EVENTS');
    expect(byPackage.get('core')).toContain('HEAPHOOK_EXAMPLE_CHUNK_SIZE'); // a named constant
  });

  for (const [pkg, names] of byPackage) {
    it(`every variable ${pkg}'s libraries read is in packages/${pkg}/README.md and docs/environment.md`, () => {
      const readme = readFileSync(join(packagesDir, pkg, 'README.md'), 'utf8');
      const sorted = [...names].sort();
      expect(sorted.filter((name) => !mentions(readme, name))).toEqual([]);
      expect(sorted.filter((name) => !mentions(index, name))).toEqual([]);
    });
  }

  it('docs/environment.md names no variable that no library reads', () => {
    const read = new Set([...byPackage.values()].flatMap((names) => [...names]));
    const rows = index.split('\n').filter((line) => /^\| `/.test(line));
    const documented = rows.flatMap((row) =>
      [...(row.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]!),
    );
    expect(documented.length).toBeGreaterThan(20);
    expect(documented.filter((name) => !read.has(name))).toEqual([]);
  });
});
