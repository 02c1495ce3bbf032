/**
 * The driver for real: native workloads through hh-run, under glibc and a deliberately broken
 * allocator (test/native/broken_alloc.c), and the CLI on a --quick subset. Needs `nx build bench`
 * (the test target depends on it).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { compare } from '../../src/compare.js';
import { nativeDir, packageDir } from '../../src/paths.js';
import { validateResults, type Results } from '../../src/results.js';
import type { WorkloadDef } from '../../src/workloads.js';

const tmp = mkdtempSync(join(tmpdir(), 'bench-test-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const brokenLib = join(nativeDir, 'libbench_broken_alloc.so');

/** A workload that always reports a wrong result. */
const alwaysFails: WorkloadDef = {
  base: 'always-fails',
  description: 'test only: reports a verification failure',
  threaded: false,
  sizes: { quick: 1, default: 1 },
  primary: 'wall_s',
  rtPoolBytes: { quick: 1 << 20, default: 1 << 20 },
  resolve: () => ({
    command: '/bin/sh',
    args: ['-c', 'echo "verification failed: fake result" >&2; exit 2', 'sh'],
  }),
};

describe('compare: failures stay in their cell and the run goes on', () => {
  let results: Results;

  it('runs churn and a failing workload under glibc, an overlapping allocator and a crashing one', async () => {
    const out = await compare({
      profile: 'quick',
      size: 20_000,
      runs: 1,
      workloads: ['churn', 'always-fails'],
      allocators: ['broken', 'broken-crash'],
      tracers: false,
      backends: [{ name: 'broken', packageName: 'test', libraryPath: brokenLib, built: true }],
      variants: [
        {
          name: 'broken-crash',
          backend: 'broken',
          description: 'crashes',
          env: { BROKEN_ALLOC_MODE: 'crash' },
        },
      ],
      extraWorkloads: [alwaysFails],
      write: false,
      progress: false,
      warmup: false,
      ucmHooks: false,
      log: () => {},
    });
    results = out.results;
    const cell = (w: string, a: string) =>
      results.cells.find((c) => c.workload === w && c.allocator === a)!;
    expect(results.runs).toHaveLength(6);
    expect(cell('churn', 'glibc')).toMatchObject({ status: 'ok', ratios: { wall_s: 1 } });
    expect(cell('churn', 'glibc').metrics['reported.ops']!.median).toBe(40_000);
    expect(cell('churn', 'broken').status).toBe('failed');
    expect(cell('churn', 'broken').error).toMatch(/exit code 2: verification failed: churn/);
    expect(cell('churn', 'broken-crash').status).toBe('failed');
    expect(cell('churn', 'broken-crash').error).toMatch(/killed by SIGABRT/);
    expect(cell('always-fails', 'glibc')).toMatchObject({
      status: 'failed',
      error: 'exit code 2: verification failed: fake result',
    });
    expect(out.report).toMatch(/churn\s+wall time\s+\S+ (?:µs|ms|s)\s+failed\s+failed/);
    expect(out.report).toMatch(/Failures:/);
  });

  it('produces a latest.json that follows the documented schema', () => {
    const doc = JSON.parse(JSON.stringify(results)) as Results;
    expect(validateResults(doc)).toEqual([]);
  });

  it('the schema check catches what is wrong', () => {
    const doc = JSON.parse(JSON.stringify(results)) as Record<string, any>;
    delete doc.machine.cpu_model;
    doc.runs[0].status = 'maybe';
    doc.cells[0].metrics.wall_s = { median: 1, min: 2, max: 3, n: 1 };
    doc.schema = 'other/9';
    const problems = validateResults(doc);
    expect(problems).toContain('machine.cpu_model: unexpected value undefined');
    expect(problems.some((p) => p.startsWith('runs[0].status'))).toBe(true);
    expect(problems.some((p) => p.startsWith('cells[0].metrics'))).toBe(true);
    expect(problems.some((p) => p.startsWith('.schema'))).toBe(true);
  });
});

describe('compare: tlsf-rec runs fragmentation with the pool heaphook recommend gives', () => {
  it('records a trace, replays it with recommend() and runs the column with its environment', async () => {
    const logs: string[] = [];
    const out = await compare({
      profile: 'quick',
      size: 4_000,
      runs: 1,
      workloads: ['churn', 'fragmentation'],
      allocators: ['tlsf', 'tlsf-rec'],
      tracers: false,
      ucmHooks: false,
      write: false,
      progress: false,
      warmup: false,
      log: (l) => logs.push(l),
    });
    const r = out.results;
    const tlsfRec = r.allocators.find((a) => a.name === 'tlsf-rec')!;
    if (tlsfRec.status === 'skipped') {
      // heaptrack or tlsf not built in this workspace: said so, nothing run
      expect(logs.join('\n')).toMatch(/tlsf-rec: skipped: /);
      return;
    }
    expect(validateResults(r)).toEqual([]);
    expect(r.recommended_pools).toHaveLength(1);
    const rec = r.recommended_pools![0]!;
    expect(rec).toMatchObject({ workload: 'fragmentation', status: 'ok' });
    expect(rec.initial_pool_bytes).toBeGreaterThanOrEqual(rec.peak_live_bytes!);
    expect(rec.env).toMatchObject({
      INITIAL_MEMPOOL_SIZE: String(rec.initial_pool_bytes),
      ADDITIONAL_MEMPOOL_SIZE: String(rec.additional_pool_bytes),
    });
    expect(rec.env.HEAPHOOK_TLSF_PREFAULT).toBeUndefined();
    expect(tlsfRec.env_per_workload).toEqual({ fragmentation: rec.env });
    const cell = (w: string, a: string) =>
      r.cells.find((c) => c.workload === w && c.allocator === a)!;
    expect(cell('fragmentation', 'tlsf-rec').status).toBe('ok');
    expect(cell('fragmentation', 'tlsf-rec').ratios['peak_rss_bytes']).toBeGreaterThan(0);
    // the other workloads have no recommendation: no run, a skipped cell
    expect(cell('churn', 'tlsf-rec').status).toBe('skipped');
    expect(r.runs.filter((x) => x.allocator === 'tlsf-rec').map((x) => x.workload)).toEqual([
      'fragmentation',
    ]);
    expect(out.report).toMatch(/tlsf-rec: INITIAL_MEMPOOL_SIZE=\d+/);
  }, 120_000);
});

describe('heaphook-bench compare --quick (the alias of heaphook bench)', () => {
  it('prints the table and writes latest.json, latest.md and latest.svg', () => {
    const out = join(tmp, 'cli');
    const r = spawnSync(
      process.execPath,
      [
        join(packageDir, 'dist', 'cli.js'),
        'compare',
        '--quick',
        '--workloads',
        'churn,latency',
        '--allocators',
        'glibc,jemalloc',
        '--no-tracers',
        '--no-ucm-hooks',
        '--runs',
        '1',
        '--no-progress',
        '--no-warmup',
        '--out',
        out,
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(r.status, r.stderr).toBe(0); // a failure is one `heaphook bench:` line and status 2
    expect(r.stdout).toMatch(/Allocators compared: quick smoke run/);
    expect(r.stdout).toMatch(/^churn\s+wall time/m);
    // --quick runs threaded workloads with 2 threads: two real-time loops at once
    expect(r.stdout).toMatch(/Real-time latency \(latency-t2\)/);
    for (const f of ['latest.json', 'latest.md', 'latest.svg'])
      expect(existsSync(join(out, f))).toBe(true);
    const doc = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as Results;
    expect(validateResults(doc)).toEqual([]);
    expect(doc.options).toMatchObject({
      profile: 'quick',
      runs: 1,
      workloads: ['churn', 'latency'],
    });
    const jemalloc = doc.allocators.find((a) => a.name === 'jemalloc')!;
    if (jemalloc.status === 'skipped')
      expect(r.stdout).toMatch(/jemalloc: skipped: install libjemalloc2/);
    const lat = doc.cells.find((c) => c.workload === 'latency-t2' && c.allocator === 'glibc')!;
    expect(lat.status).toBe('ok');
    const run = doc.runs.find((x) => x.workload === 'latency-t2' && x.allocator === 'glibc')!;
    expect(run.reported).toMatchObject({ threads: 2 });
    const keys = ['p50_ns', 'p99_ns', 'p99_9_ns', 'p99_99_ns', 'max_ns', 'minflt'];
    for (const call of ['malloc', 'free'])
      for (const p of ['p50', 'p99', 'p99_9', 'p99_99'])
        expect(lat.metrics[`reported.${call}_${p}_ns`]).toBeDefined();
    for (const k of keys) expect(lat.metrics[`reported.${k}`]).toBeDefined();
    // what the machine did to a busy thread is measured in the same run and shown with the table
    expect(run.reported?.stalls_1us_per_s).toEqual(expect.any(Number));
    expect(run.reported?.stalls_10us_per_s).toEqual(expect.any(Number));
    if ((run.reported?.stalls_1us_per_s as number) > 0)
      expect(r.stdout).toMatch(/the machine: a busy thread stalled over 1 µs \d+ times a second/);
    expect(readFileSync(join(out, 'latest.svg'), 'utf8')).toMatch(
      /^<svg[^>]+xmlns="http:\/\/www.w3.org\/2000\/svg"/,
    );
    expect(readFileSync(join(out, 'latest.md'), 'utf8')).toMatch(
      /\| workload \| figure \(lower is better\) \| glibc \|/,
    );
  });
});

describe('compare: the back-to-back latency workload (latency_b2b)', () => {
  it('times malloc and free apart at 1 and 2 threads, with the machine stall rate, in a table', async () => {
    const out = await compare({
      profile: 'quick',
      size: 20_000,
      runs: 1,
      threads: [1, 2],
      workloads: ['latency_b2b'],
      allocators: ['glibc'],
      tracers: false,
      write: false,
      progress: false,
      warmup: false,
      ucmHooks: false,
      log: () => {},
    });
    const r = out.results;
    expect(validateResults(JSON.parse(JSON.stringify(r)) as Results)).toEqual([]);
    for (const threads of [1, 2]) {
      const name = `latency_b2b-t${threads}`;
      const cell = r.cells.find((c) => c.workload === name && c.allocator === 'glibc')!;
      expect(cell.status).toBe('ok');
      const run = r.runs.find((x) => x.workload === name && x.allocator === 'glibc')!;
      // --size operations per thread, every one timed: malloc's and free's samples together
      expect(run.reported).toMatchObject({ threads, ops: 20_000 * threads });
      for (const call of ['malloc', 'free']) {
        const pct = ['p50', 'p99', 'p99_9', 'p99_99', 'max'].map(
          (p) => cell.metrics[`reported.${call}_${p}_ns`]!.median,
        );
        // percentiles of one sorted sample: never decreasing
        for (let i = 1; i < pct.length; i++) expect(pct[i]).toBeGreaterThanOrEqual(pct[i - 1]!);
      }
      expect(run.reported?.stalls_1us_per_s).toEqual(expect.any(Number));
      expect(run.reported?.stalls_10us_per_s).toEqual(expect.any(Number));
      expect(out.report).toContain(`Back-to-back latency (${name})`);
    }
    expect(out.report).toMatch(/malloc p50 .* free p50 .* calls\/s/);
    expect(out.report).toMatch(/\d M\/s/);
  }, 120_000);
});
