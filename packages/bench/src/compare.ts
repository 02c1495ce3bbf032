/**
 * `compare`: discovers the allocators, expands the workloads, runs the interleaved schedule with
 * a progress bar, checks checksums across allocators, summarises, prints the tables and writes
 * latest.json, latest.md, latest.svg (and latest.png when @resvg/resvg-js loads) into
 * packages/bench/out (ignored by git) or the folder given as outDir.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';

import { listBackends } from '@heaphook/core';
import cliProgress from 'cli-progress';

import {
  discoverAllocators,
  filterByName,
  type BackendLike,
  type VariantDef,
} from './allocators.js';
import { renderPng, renderSvg } from './chart.js';
import { runOne } from './launcher.js';
import { recommendPool, type PoolRecommendation } from './recommended.js';
import { machineInfo, versions } from './machine.js';
import { assertBuilt, defaultOutDirs, packageDir } from './paths.js';
import { markdownReport, terminalReport } from './report.js';
import { allocatorRecord, SCHEMA_ID, workloadRecord, type Results } from './results.js';
import { buildSchedule, warmUpRuns } from './schedule.js';
import { checkChecksums, summarize, type CellKey } from './stats.js';
import type { Allocator, Profile, RunRecord, Workload } from './types.js';
import { runUcmHooks, type UcmColumn } from './ucmhooks.js';
import { findPython, selectWorkloads, WORKLOADS, type WorkloadDef } from './workloads.js';

export interface CompareOptions {
  readonly profile: Profile;
  /** Repetitions per cell (default: 1 quick, 5 default). */
  readonly runs?: number;
  /** Repetitions of the tracer runs (default: 1 quick, 2 default). */
  readonly tracerRuns?: number;
  /** Thread counts for threaded workloads (default: 2 quick, 1 and 2 default). */
  readonly threads?: readonly number[];
  readonly allocators?: readonly string[];
  readonly workloads?: readonly string[];
  /** true: every available tracer; false: none; a list: those. */
  readonly tracers?: boolean | readonly string[];
  readonly variants?: readonly VariantDef[];
  readonly custom?: ReadonlyArray<{ name: string; path: string }>;
  readonly timeoutS?: number;
  readonly seed?: number;
  /** Same size for every workload (tests). */
  readonly size?: number;
  /** Where the files go (default packages/bench/out, ignored by git). */
  readonly outDir?: string;
  /** Write the result files (default true). */
  readonly write?: boolean;
  /** Draw a progress bar on stderr (default: when stderr is a terminal; otherwise a line every 10 s). */
  readonly progress?: boolean;
  /** Untimed tiny run of each workload under each allocator first (default true). */
  readonly warmup?: boolean;
  /** The command line for the record. */
  readonly command?: string;
  /** Injected for tests. */
  readonly backends?: readonly BackendLike[];
  readonly extraWorkloads?: readonly WorkloadDef[];
  readonly log?: (line: string) => void;
  /** Measure the memory-event hooks section (default true). */
  readonly ucmHooks?: boolean;
  /** Only the memory-event hooks section: no workloads, no allocators, no tracers. */
  readonly onlyUcmHooks?: boolean;
  /** Runs of the memory-event hooks section (default: 2 quick, 5 default). */
  readonly ucmRuns?: number;
  /** Injected for tests. */
  readonly ucmColumns?: UcmColumn[];
}

export interface CompareOutcome {
  results: Results;
  files: string[];
  report: string;
}

function heaphookVersions(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const dir of ['core', 'tlsf', 'heaptrack', 'bench']) {
    try {
      const pkg = JSON.parse(readFileSync(join(packageDir, '..', dir, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
      };
      out[pkg.name] = pkg.version;
    } catch {
      /* not in this workspace */
    }
  }
  return out;
}

/** The workload at a tiny size, for the warm-up pass. */
function tiny(w: Workload, def: WorkloadDef | undefined): Workload {
  const size = def?.warmupSize ?? Math.max(1, Math.floor(w.size / 20));
  return { ...w, size, args: w.args.map((a) => (a.startsWith('--size=') ? `--size=${size}` : a)) };
}

export async function compare(opts: CompareOptions): Promise<CompareOutcome> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  assertBuilt();
  const started = Date.now();
  const date = new Date(started).toISOString();
  const quick = opts.profile === 'quick';
  const runs = opts.runs ?? (quick ? 1 : 5);
  const tracerRuns = opts.tracerRuns ?? Math.min(runs, quick ? 1 : 2);
  const threads = [...(opts.threads ?? (quick ? [2] : [1, 2]))];
  const timeoutS = opts.timeoutS ?? (quick ? 60 : 300);
  const seed = opts.seed ?? 42;

  const backends: BackendLike[] = [...(opts.backends ?? listBackends({ from: packageDir }))];
  const found = discoverAllocators({
    backends,
    variants: opts.variants ?? [],
    custom: opts.custom ?? [],
  });
  const allocators = filterByName(found.allocators, opts.allocators, 'allocator', ['glibc']);
  let tracers: Allocator[] = [];
  if (opts.tracers === true || opts.tracers === undefined) tracers = found.tracers;
  else if (Array.isArray(opts.tracers))
    tracers = filterByName(found.tracers, opts.tracers as string[], 'tracer');
  // A tracer needs its baseline measured in the same session.
  tracers = tracers.map((t) =>
    t.status === 'ready' && !allocators.some((a) => a.name === t.baseline && a.status === 'ready')
      ? {
          ...t,
          status: 'skipped' as const,
          reason: `its baseline ${t.baseline} is not measured in this run`,
        }
      : t,
  );
  const onlyUcm = opts.onlyUcmHooks ?? false;
  const selected = onlyUcm
    ? []
    : selectWorkloads({
        profile: opts.profile,
        threads,
        ...(opts.workloads ? { only: opts.workloads } : {}),
        ...(opts.size !== undefined ? { sizeOverride: opts.size } : {}),
        seed,
        ...(opts.extraWorkloads ? { extra: opts.extraWorkloads } : {}),
      });
  const defs = new Map([...WORKLOADS, ...(opts.extraWorkloads ?? [])].map((d) => [d.base, d]));

  // tlsf-rec: the pool heaphook recommend gives for a trace of the workload, made first.
  const recommendations: PoolRecommendation[] = [];
  const rec = allocators.find((a) => a.name === 'tlsf-rec' && a.status === 'ready');
  const tracerLibrary = backends.find((b) => b.name === 'heaptrack')?.libraryPath;
  const workloads: Workload[] = [];
  const recScratch = rec ? mkdtempSync(join(tmpdir(), 'heaphook-bench-rec-')) : '';
  try {
    for (const w of selected) {
      if (!rec || !tracerLibrary || !w.recommendPool || w.status !== 'ready') {
        workloads.push(w);
        continue;
      }
      log(
        `tlsf-rec: recording ${w.name} under heaphook-heaptrack, replaying it with heaphook recommend ...`,
      );
      const r = await recommendPool(w, { tracerLibrary, scratchRoot: recScratch, timeoutS });
      recommendations.push(r);
      if (r.status === 'ok') {
        log(
          `  ${Object.entries(r.env)
            .map(([k, v]) => `${k}=${v}`)
            .join(
              ' ',
            )} (peak live ${r.peak_live_bytes} bytes; ${r.record_s.toFixed(1)} s + ${r.recommend_s.toFixed(1)} s)`,
        );
        workloads.push({ ...w, recommendedEnv: r.env });
      } else {
        log(`  tlsf-rec ${w.name}: skipped: ${r.error ?? ''}`);
        workloads.push(w);
      }
    }
  } finally {
    if (recScratch) rmSync(recScratch, { recursive: true, force: true });
  }
  const applies = (w: Workload, a: Allocator) => !a.appliesTo || a.appliesTo(w);

  if (onlyUcm) tracers = [];
  const schedule = buildSchedule(workloads, allocators, runs, tracers, tracerRuns).filter((s) =>
    applies(s.workload, s.allocator),
  );
  const readyA = allocators.filter((a) => a.status === 'ready');
  const readyT = tracers.filter((t) => t.status === 'ready');
  const readyW = workloads.filter((w) => w.status === 'ready');
  log(
    `heaphook bench: ${readyW.length} workloads × ${readyA.length} allocators${readyT.length ? ` + ${readyT.length} tracer(s)` : ''}, ${runs} run(s) each, interleaved: ${schedule.length} runs`,
  );
  log(
    `  allocators: ${readyA.map((a) => a.name).join(', ')}${readyT.length ? `; tracers: ${readyT.map((t) => t.name).join(', ')}` : ''}`,
  );
  for (const a of [...allocators, ...tracers])
    if (a.status === 'skipped') log(`  ${a.name}: skipped: ${a.reason}`);
  for (const w of workloads)
    if (w.status === 'skipped') log(`  workload ${w.name}: skipped: ${w.reason}`);

  const machine = machineInfo();
  const scratchRoot = mkdtempSync(join(tmpdir(), 'heaphook-bench-'));
  const runOpts = { timeoutS, scratchRoot };
  const showBar = opts.progress ?? true;
  const bar = new cliProgress.SingleBar(
    {
      format: 'bench {bar} {value}/{total} | {eta_formatted} left | {task}',
      stream: process.stderr,
      hideCursor: true,
      clearOnComplete: true,
      noTTYOutput: true,
      notTTYSchedule: 10_000,
      etaBuffer: 30,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  const warm =
    (opts.warmup ?? true)
      ? warmUpRuns(quick, readyW, [...readyA, ...readyT], schedule, applies)
      : { runs: [], parallel: 1 };
  const total = warm.runs.length + schedule.length;
  if (showBar) bar.start(total, 0, { task: 'starting' });
  const records: RunRecord[] = [];
  try {
    let done = 0;
    // untimed, before the first timed run: `warm.parallel` at a time
    let next = 0;
    const warmer = async () => {
      while (next < warm.runs.length) {
        const { workload: w, allocator: a } = warm.runs[next++]!;
        if (showBar) bar.update(done, { task: `warm-up ${w.name} × ${a.name}` });
        await runOne(-1, -1, tiny(w, defs.get(w.base)), a, runOpts);
        done++;
      }
    };
    await Promise.all(Array.from({ length: warm.parallel }, warmer));
    // heaphook's log of one run per workload gives the number of calls every tracer's trace
    // size is divided by (bytes per call): decoding it costs ~0.3 s per million calls.
    const callsCounted = new Set<string>();
    for (const s of schedule) {
      if (showBar)
        bar.update(done, { task: `${s.workload.name} × ${s.allocator.name} (run ${s.rep + 1})` });
      const countTraceCalls =
        s.allocator.name === 'heaphook-heaptrack' && !callsCounted.has(s.workload.name);
      const record = await runOne(s.seq, s.rep, s.workload, s.allocator, {
        ...runOpts,
        countTraceCalls,
      });
      if (record.trace_calls !== undefined) callsCounted.add(s.workload.name);
      records.push(record);
      done++;
    }
    if (showBar) bar.update(total, { task: 'done' });
  } finally {
    if (showBar) bar.stop();
    rmSync(scratchRoot, { recursive: true, force: true });
  }

  let ucm: ReturnType<typeof runUcmHooks> | undefined;
  if (opts.ucmHooks ?? true) {
    // the memory-event hooks section: its own interleaved runs, a few seconds with --quick
    // (2 runs of 3 × 500 iterations per column: every loop's counts checked, costs rough)
    const ucmRuns = opts.ucmRuns ?? (quick ? 2 : 5);
    log(`memory-event hooks: ${ucmRuns} interleaved run(s) per column`);
    ucm = runUcmHooks({
      runs: ucmRuns,
      iters: quick ? 500 : 4000,
      reps: quick ? 3 : 11,
      timeoutS,
      ...(opts.ucmColumns ? { columns: opts.ucmColumns } : {}),
    });
    if (ucm.status === 'skipped') log(`  memory-event hooks: skipped: ${ucm.reason ?? ''}`);
    for (const c of ucm.columns)
      if (ucm.status !== 'skipped' && c.status === 'skipped')
        log(`  memory-event hooks ${c.name}: skipped: ${c.reason ?? ''}`);
  }

  const checked = checkChecksums(records);
  const keys: CellKey[] = [];
  for (const w of readyW) {
    for (const a of allocators)
      keys.push({
        workload: w.name,
        allocator: a.name,
        baseline: a.baseline,
        status: applies(w, a) ? a.status : 'skipped',
      });
    for (const t of tracers)
      keys.push({ workload: w.name, allocator: t.name, baseline: t.baseline, status: t.status });
  }
  const cells = summarize(checked, keys);
  machine.loadavg_end = Math.round(loadavg()[0]! * 100) / 100;
  const results: Results = {
    schema: SCHEMA_ID,
    date,
    duration_s: Math.round((Date.now() - started) / 100) / 10,
    command: opts.command ?? 'compare',
    options: {
      profile: opts.profile,
      runs,
      tracer_runs: readyT.length > 0 ? tracerRuns : 0,
      threads,
      allocators: opts.allocators ? [...opts.allocators] : null,
      workloads: opts.workloads ? [...opts.workloads] : null,
      timeout_s: timeoutS,
      seed,
      size: opts.size ?? null,
    },
    machine,
    versions: versions(findPython(), heaphookVersions()),
    allocators: allocators.map((a) => allocatorRecord(a, readyW)),
    tracers: tracers.map((t) => allocatorRecord(t, readyW)),
    workloads: workloads.map(workloadRecord),
    runs: checked,
    cells,
    ...(recommendations.length > 0 ? { recommended_pools: recommendations } : {}),
    ...(ucm ? { ucm_hooks: ucm } : {}),
  };

  const files: string[] = [];
  if (opts.write ?? true) {
    const outDir = opts.outDir ?? defaultOutDirs.compare;
    mkdirSync(outDir, { recursive: true });
    const put = (name: string, data: string | Buffer) => {
      const p = join(outDir, name);
      // written beside, renamed over the old file once complete
      writeFileSync(`${p}.tmp`, data);
      renameSync(`${p}.tmp`, p);
      files.push(relative(process.cwd(), p) || p);
    };
    put('latest.json', `${JSON.stringify(results, null, 2)}\n`);
    put('latest.md', markdownReport(results));
    const svg = renderSvg(results);
    put('latest.svg', svg);
    const png = await renderPng(svg);
    if ('png' in png) put('latest.png', png.png);
    else log(png.skipped);
  }
  return { results, files, report: terminalReport(results, files) };
}
