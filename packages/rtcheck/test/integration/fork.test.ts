// fork while other threads are inside the guard (native/fork.c): four workers loop through
// marked sections (the registry's slot locks, the table of sites) as the main thread forks;
// every child exits and writes a report of its own (HEAPHOOK_RT_REPORT with %p) that counts
// exactly its own violations, none of the parent's threads; the parent's report has its
// workers and no child.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { guardLibrary, program } from '../helpers/programs.js';

const CHILDREN = 25;
const CHILD_ALLOCATIONS = 7; // fork_storm.c's child_step
const WORKERS = 4;

const dir = mkdtempSync(join(tmpdir(), 'heaphook-rtcheck-fork-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Report {
  readonly threads: { tid: number; name: string }[];
  readonly violations: { call: string; count: number; tid: number; name: string }[];
}

/** The machine form's thread and violation lines (report.c). */
function readReport(pid: number): Report {
  const lines = readFileSync(join(dir, `report.${pid}`), 'utf8')
    .trim()
    .split('\n');
  expect(lines[0]).toBe(`heaphook-rtcheck\t1\t${pid}\treport`);
  expect(lines.at(-1)).toBe('end');
  const fields = lines.map((line) => line.split('\t'));
  const name = (hex: string) => Buffer.from(hex, 'hex').toString();
  return {
    threads: fields
      .filter((f) => f[0] === 'thread')
      .map((f) => ({ tid: Number(f[1]), name: name(f[6]!) })),
    violations: fields
      .filter((f) => f[0] === 'violation')
      .map((f) => ({ call: f[1]!, count: Number(f[2]), tid: Number(f[3]), name: name(f[6]!) })),
  };
}

describe('fork while other threads are in the guard', () => {
  it("each child's report counts its own violations only, and every child ends", () => {
    const r = spawnSync(program('rt_fork_storm'), [String(CHILDREN)], {
      encoding: 'utf8',
      env: {
        ...process.env,
        LD_PRELOAD: guardLibrary,
        HEAPHOOK_RT_REPORT: join(dir, 'report.%p'),
      },
      timeout: 60_000,
    });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.stdout).toContain(`storm: ${CHILDREN} children`);
    expect(r.status).toBe(0);
    const children = [...r.stdout.matchAll(/^child (\d+)$/gm)].map((m) => Number(m[1]));
    expect(children).toHaveLength(CHILDREN);
    for (const pid of children) {
      const report = readReport(pid);
      expect(report.threads, `child ${pid}`).toEqual([{ tid: pid, name: 'child' }]);
      expect(
        report.violations.map((v) => [v.call, v.count, v.tid, v.name]).sort(),
        `child ${pid}`,
      ).toEqual([
        ['free', CHILD_ALLOCATIONS, pid, 'child'],
        ['malloc', CHILD_ALLOCATIONS, pid, 'child'],
      ]);
    }
    const parent = readReport(r.pid!);
    expect(parent.threads.map((t) => t.name)).toEqual(Array(WORKERS).fill('worker'));
    expect(parent.violations.every((v) => v.name === 'worker' && v.count > 0)).toBe(true);
  });
});
