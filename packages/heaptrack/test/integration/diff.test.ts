/**
 * `heaphook report --diff BASE NEW`: two runs of python3 that differ only in the size of four
 * kept bytearrays (1,000,000 and 2,000,000 bytes): the peak and the allocated bytes grow by
 * exactly 4,000,000, nothing else changes, and the one site that grew is the bytearray's,
 * matched across the runs by its symbolised stack.
 */
import { spawnSync } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import type { ReportDiff } from '../../src/report/diff.js';
import { heaphookBin, python3, scratch } from '../helpers.js';

function heaphook(args: readonly string[]) {
  return spawnSync(process.execPath, [heaphookBin, ...args], {
    encoding: 'utf8',
    timeout: 120_000,
  });
}

function recordKeeping(bytes: number): string {
  const dir = scratch(`diff-${bytes}`);
  const r = heaphook([
    'record',
    '-q',
    '-o',
    dir,
    '--',
    python3,
    '-c',
    `keep = [bytearray(${bytes}) for _ in range(4)]`,
  ]);
  expect(r.status, r.stderr).toBe(0);
  return dir;
}

describe('report --diff', () => {
  const base = recordKeeping(1_000_000);
  const now = recordKeeping(2_000_000);

  it('gives the totals and the site that grew, exactly', () => {
    const r = heaphook(['report', now, '--diff', base, '--json']);
    expect(r.status, r.stderr).toBe(0);
    const d = JSON.parse(r.stdout) as ReportDiff;
    expect(d.delta).toMatchObject({
      peakHeapBytes: 4_000_000,
      allocatedBytes: 4_000_000,
      allocations: 0,
      leakedBytes: 0,
      neverFreedBytes: 0,
    });
    expect(d.base.argv.at(-1)).toContain('1000000');
    expect(d.new.argv.at(-1)).toContain('2000000');
    expect(d.grew).toHaveLength(1);
    expect(d.grew[0]!.delta).toEqual({
      allocations: 0,
      bytes: 4_000_000,
      peakBytes: 4_000_000,
      liveBytes: 0,
    });
    expect(d.grew[0]!.stack).toContain('PyByteArray_Resize');
    expect(d.shrank).toEqual([]);
    expect([d.added, d.removed]).toEqual([0, 0]);
  });

  it('says it as text: each total before -> after with its change, then the sites', () => {
    const r = heaphook(['report', now, '--diff', base]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^peak heap +[\d.]+ MiB -> [\d.]+ MiB: \+3\.81 MiB \([\d.]+ %\)$/m);
    expect(r.stdout).toMatch(/^allocations +(\d+) -> \1: ±0/m);
    expect(r.stdout).toMatch(
      /^sites that grew:\n {2}PyByteArray_Resize: peak \+3\.81 MiB .*\n {6}PyByteArray_Resize$/m,
    );
    expect(r.stdout).not.toContain('sites that shrank');
  });

  it('the other way round, the same site shrank', () => {
    const d = JSON.parse(heaphook(['report', base, '--diff', now, '--json']).stdout) as ReportDiff;
    expect(d.delta.peakHeapBytes).toBe(-4_000_000);
    expect(d.grew).toEqual([]);
    expect(d.shrank[0]!.delta.peakBytes).toBe(-4_000_000);
  });

  it('--diff with --all is a usage error (-o writes the differential page: html.test.ts)', () => {
    const r = heaphook(['report', now, '--diff', base, '--all']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--diff compares two logs: leave out --all/);
  });
});
