/**
 * Where the bench writes: every command's default output folder is packages/bench/out, which
 * git ignores, and a default `compare` run writes there and leaves the committed reference
 * results (packages/bench/results) and the rest of the checkout as they were.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { skipOutsideCI } from '@heaphook/core/testing';

import { defaultOutDirs, outDir, packageDir, referenceDir } from '../../src/paths.js';
import { validateResults, type Results } from '../../src/results.js';

/** The `heaphook` CLI of @heaphook/core: the bench is its `bench` command. */
const heaphookBin = join(
  dirname(createRequire(import.meta.url).resolve('@heaphook/core/package.json')),
  'bin',
  'heaphook.js',
);

function git(...args: string[]): { status: number | null; stdout: string } {
  const r = spawnSync('git', args, { cwd: packageDir, encoding: 'utf8' });
  return { status: r.error ? null : r.status, stdout: r.stdout ?? '' };
}

const inGit = git('rev-parse', '--is-inside-work-tree').stdout.trim() === 'true';

/** path relative to the folder -> sha256 of its content, for every file below it. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.set(relative(dir, p), createHash('sha256').update(readFileSync(p)).digest('hex'));
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

describe('default output folders', () => {
  it('are packages/bench/out or folders inside it, apart from the reference results', () => {
    expect(outDir).toBe(join(packageDir, 'out'));
    for (const [command, dir] of Object.entries(defaultOutDirs)) {
      expect(relative(outDir, dir).startsWith('..'), command).toBe(false);
      expect(relative(referenceDir, dir).startsWith('..'), command).toBe(true);
    }
  });

  // Outside a git checkout (an unpacked tarball) there is nothing to ask; CI always has one.
  it.skipIf(skipOutsideCI(!inGit && 'not a git checkout'))(
    'are ignored by git and hold no committed file',
    () => {
      for (const dir of new Set(Object.values(defaultOutDirs))) {
        const probe = relative(packageDir, join(dir, 'latest.json'));
        expect(git('check-ignore', '-q', probe).status, probe).toBe(0);
        expect(git('ls-files', '--', relative(packageDir, dir)).stdout).toBe('');
      }
    },
  );
});

describe('compare with no --out (the CLI)', () => {
  // A developer's own results in out/ are put aside for the test and put back after it.
  const names = ['latest.json', 'latest.md', 'latest.svg', 'latest.png'];
  const aside = mkdtempSync(join(tmpdir(), 'bench-out-aside-'));
  beforeAll(() => {
    for (const n of names)
      if (existsSync(join(outDir, n))) renameSync(join(outDir, n), join(aside, n));
  });
  afterAll(() => {
    for (const n of names) {
      rmSync(join(outDir, n), { force: true });
      if (existsSync(join(aside, n))) renameSync(join(aside, n), join(outDir, n));
    }
    rmSync(aside, { recursive: true, force: true });
  });

  it('writes into packages/bench/out and changes no committed file', () => {
    const references = snapshot(referenceDir);
    expect(references.size).toBeGreaterThan(0);
    const status = inGit ? git('status', '--porcelain', '--', '.').stdout : '';
    const started = Date.now();
    const r = spawnSync(
      process.execPath,
      [
        heaphookBin,
        'bench',
        'compare',
        '--quick',
        '--workloads',
        'churn',
        '--allocators',
        'glibc',
        '--no-tracers',
        '--no-ucm-hooks',
        '--no-warmup',
        '--no-progress',
      ],
      { cwd: packageDir, encoding: 'utf8', timeout: 60_000 },
    );
    expect(r.status, r.stderr).toBe(0); // a failure is one `heaphook bench:` line and status 2
    for (const n of ['latest.json', 'latest.md', 'latest.svg']) {
      const p = join(outDir, n);
      expect(existsSync(p), p).toBe(true);
      expect(statSync(p).mtimeMs).toBeGreaterThanOrEqual(started - 1000);
    }
    const doc = JSON.parse(readFileSync(join(outDir, 'latest.json'), 'utf8')) as Results;
    expect(validateResults(doc)).toEqual([]);
    expect(doc.options).toMatchObject({ profile: 'quick', workloads: ['churn'] });
    expect(r.stdout).toMatch(/Written: out\/latest\.json, out\/latest\.md, out\/latest\.svg/);
    expect(snapshot(referenceDir)).toEqual(references);
    if (inGit) expect(git('status', '--porcelain', '--', '.').stdout).toBe(status);
  });
});
