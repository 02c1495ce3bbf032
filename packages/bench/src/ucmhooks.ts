/**
 * Memory-event hooks: ns per hooked call. Runs native/ucm_hooks/ucm_cost.c (one source against
 * libucm's API) built against heaphook's ucm_compat.h and against UCX's libucm, interleaved:
 *
 *   heaphook-preload   LD_PRELOAD=libheaphook_ucm.so ucm_cost_heaphook
 *   heaphook-reloc     ucm_cost_heaphook              (libc linked first: GOT patching)
 *   heaphook-bistro    HEAPHOOK_MEM_MMAP_HOOK_MODE=bistro ucm_cost_heaphook (code patching)
 *   libucm             ucm_cost_libucm                (Debian libucx0; its default, bistro)
 *   libucm-reloc       UCX_MEM_MMAP_HOOK_MODE=reloc ucm_cost_libucm
 *
 *   libucm-off         UCX_MEM_EVENTS=no ucm_cost_libucm --no-hooks: libucm with nothing
 *                      installed (reference only)
 *
 * Each process registers a counting handler and runs every loop with each iteration made twice,
 * interleaved: through the hooked functions, and as raw system calls (the baseline: the same
 * kernel work, no hook). It reports per loop the raw and hooked ns per call (best of its
 * repetitions) and cost_ns_per_call, the median per-iteration difference (median over the
 * repetitions), and the hooked event counts checked against what the loop implies. Per column
 * and loop: the cost of the hook = the median over the runs of cost_ns_per_call; ratio =
 * heaphook's cost divided by libucm's, in each of libucm's two modes. (Reports without cost_ns_per_call, from the earlier
 * program, fall back to hooked minus baseline, libucm's baseline being the libucm-off run.)
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import { libraryPath } from '@heaphook/ucm-hooks';

import { nativeProgram } from './paths.js';
import { median, stat } from './stats.js';
import type { Stat } from './types.js';

export const UCM_COLUMNS = [
  'heaphook-preload',
  'heaphook-reloc',
  'heaphook-bistro',
  'libucm',
  'libucm-reloc',
  'libucm-off',
] as const;
export type UcmColumnName = (typeof UCM_COLUMNS)[number];
/** The columns whose cost is compared with libucm's. */
export const UCM_HEAPHOOK_COLUMNS = [
  'heaphook-preload',
  'heaphook-reloc',
  'heaphook-bistro',
] as const;

export interface UcmColumn {
  name: UcmColumnName;
  status: 'ready' | 'skipped';
  reason?: string;
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** One loop as the native program reports it. */
export interface UcmLoopReport {
  name: string;
  calls: number;
  /** before the handler was registered (nothing installed, except preload's wrappers) */
  base_ns_per_call: number;
  ns_per_call: number;
  /** median per-iteration (hooked - raw) difference, per call; absent in older reports */
  cost_ns_per_call?: number;
  events: Record<string, number>;
  expected: Record<string, number>;
  match: boolean;
}

export interface UcmReport {
  impl: string;
  mode: string;
  hooks: boolean;
  iters: number;
  reps: number;
  ok: boolean;
  loops: UcmLoopReport[];
}

export interface UcmRun {
  seq: number;
  column: UcmColumnName;
  rep: number;
  status: 'ok' | 'failed';
  error?: string;
  /** The install mode the program reported (none, preload, reloc, libucm). */
  mode?: string;
  reported: UcmReport | null;
}

export interface UcmLoopSummary {
  name: string;
  /** Hooked calls per repetition of the loop. */
  calls: number;
  columns: Partial<
    Record<
      UcmColumnName,
      {
        /** ns per call with the handler, over the runs (each run: best of its repetitions). */
        ns_per_call: Stat;
        /** ns per call of the same loop made as raw system calls, interleaved (the baseline). */
        base_ns_per_call: Stat;
        /** median over the runs of cost_ns_per_call (else of ns_per_call - base_ns_per_call):
         * the cost of the hook. */
        cost_ns: number;
        /** events counted in the last passing run, and what the loop implies */
        events: Record<string, number>;
        expected: Record<string, number>;
        /** every run of this column counted exactly the expected events */
        match: boolean;
      }
    >
  >;
  /** cost_ns of each heaphook column divided by libucm's (its default, bistro mode; absent
   * without libucm). */
  ratios: Partial<Record<UcmColumnName, number>>;
  /** The same divided by libucm's in reloc mode (absent in older results). */
  ratios_reloc?: Partial<Record<UcmColumnName, number>>;
  /** heaphook and libucm counted the same events, per heaphook column. */
  same_counts: Partial<Record<UcmColumnName, boolean>>;
}

/** The `ucm_hooks` section of latest.json. */
export interface UcmHooksSection {
  status: 'ok' | 'failed' | 'skipped';
  reason?: string;
  runs: number;
  iters: number;
  reps: number;
  library: string | null;
  columns: UcmColumn[];
  loops: UcmLoopSummary[];
  raw: UcmRun[];
}

export function ucmLibraryPath(): string {
  return libraryPath();
}

/** The columns and what is missing. Paths injectable for tests. */
export function ucmColumns(
  paths: { heaphook?: string; libucm?: string; library?: string } = {},
  iters = 4000,
  reps = 11,
): UcmColumn[] {
  const hh = paths.heaphook ?? nativeProgram('ucm_cost_heaphook');
  const ucm = paths.libucm ?? nativeProgram('ucm_cost_libucm');
  const lib = paths.library ?? ucmLibraryPath();
  const args = [`--iters=${iters}`, `--reps=${reps}`];
  const hhMissing = !existsSync(hh)
    ? 'not built: run npx nx build ucm-hooks, then npx nx build bench'
    : !existsSync(lib)
      ? 'not built: run npx nx build ucm-hooks'
      : undefined;
  const col = (
    name: UcmColumnName,
    command: string,
    extra: string[],
    env: Record<string, string>,
    reason: string | undefined,
  ): UcmColumn => ({
    name,
    status: reason ? 'skipped' : 'ready',
    ...(reason ? { reason } : {}),
    command,
    args: [...args, ...extra],
    env,
  });
  return [
    col('heaphook-preload', hh, [], { LD_PRELOAD: lib }, hhMissing),
    col('heaphook-reloc', hh, [], {}, hhMissing),
    col('heaphook-bistro', hh, [], { HEAPHOOK_MEM_MMAP_HOOK_MODE: 'bistro' }, hhMissing),
    col('libucm', ucm, [], {}, existsSync(ucm) ? undefined : 'install libucx-dev'),
    col(
      'libucm-reloc',
      ucm,
      [],
      { UCX_MEM_MMAP_HOOK_MODE: 'reloc' },
      existsSync(ucm) ? undefined : 'install libucx-dev',
    ),
    col(
      'libucm-off',
      ucm,
      ['--no-hooks'],
      { UCX_MEM_EVENTS: 'no' },
      existsSync(ucm) ? undefined : 'install libucx-dev',
    ),
  ];
}

/** Parses the program's JSON line (the last line of stdout that starts with '{'). */
export function parseUcmOutput(stdout: string): UcmReport {
  const line = stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('{'))
    .pop();
  if (!line) throw new Error('no JSON line in the output');
  const doc = JSON.parse(line) as UcmReport;
  if (typeof doc.impl !== 'string' || !Array.isArray(doc.loops))
    throw new Error('not a ucm_cost report');
  for (const l of doc.loops) {
    if (
      typeof l.name !== 'string' ||
      typeof l.ns_per_call !== 'number' ||
      typeof l.base_ns_per_call !== 'number' ||
      (l.cost_ns_per_call !== undefined && typeof l.cost_ns_per_call !== 'number') ||
      !l.events
    )
      throw new Error(`bad loop entry: ${JSON.stringify(l)}`);
  }
  return doc;
}

/** The expected install mode of each column (a mismatch means the column measured the wrong thing). */
const EXPECTED_MODE: Record<UcmColumnName, string> = {
  'heaphook-preload': 'preload',
  'heaphook-reloc': 'reloc',
  'heaphook-bistro': 'bistro',
  libucm: 'libucm',
  'libucm-reloc': 'libucm',
  'libucm-off': 'none',
};

export function runUcmColumn(c: UcmColumn, seq: number, rep: number, timeoutS: number): UcmRun {
  const env: NodeJS.ProcessEnv = { ...process.env, ...c.env };
  if (!c.env.LD_PRELOAD) delete env.LD_PRELOAD;
  const r = spawnSync(c.command, c.args, { env, encoding: 'utf8', timeout: timeoutS * 1000 });
  const base = { seq, column: c.name, rep };
  let reported: UcmReport | null = null;
  try {
    reported = parseUcmOutput(r.stdout ?? '');
  } catch {
    /* reported below */
  }
  const tail = (r.stderr ?? '').trim().split('\n').slice(-3).join(' | ');
  let error: string | undefined;
  if (r.error) error = r.error.message;
  else if (r.signal) error = `killed by ${r.signal}`;
  else if (r.status !== 0) error = `exit code ${r.status}${tail ? `: ${tail}` : ''}`;
  else if (!reported) error = 'no result line';
  else if (reported.mode !== EXPECTED_MODE[c.name])
    error = `installed in mode ${reported.mode}, expected ${EXPECTED_MODE[c.name]}`;
  return {
    ...base,
    status: error ? 'failed' : 'ok',
    ...(error ? { error } : {}),
    ...(reported ? { mode: reported.mode } : {}),
    reported,
  };
}

/** Medians, costs over the baseline, ratios to libucm, count checks. */
export function summarizeUcm(
  columns: readonly UcmColumn[],
  raw: readonly UcmRun[],
): UcmLoopSummary[] {
  const names: string[] = [];
  for (const r of raw)
    for (const l of r.reported?.loops ?? []) if (!names.includes(l.name)) names.push(l.name);
  const out: UcmLoopSummary[] = [];
  for (const name of names) {
    const s: UcmLoopSummary = {
      name,
      calls: 0,
      columns: {},
      ratios: {},
      ratios_reloc: {},
      same_counts: {},
    };
    for (const c of columns) {
      if (c.status !== 'ready') continue;
      const runs = raw.filter((r) => r.column === c.name && r.reported);
      const loops = runs
        .map((r) => r.reported!.loops.find((l) => l.name === name))
        .filter((l): l is UcmLoopReport => l !== undefined);
      const ok = runs.filter((r) => r.status === 'ok' || r.error?.startsWith('exit code 2'));
      if (loops.length === 0 || ok.length === 0) continue;
      const last = loops[loops.length - 1]!;
      s.calls = last.calls;
      // (hooked, baseline, cost) per run. The in-process interleaved cost when reported; else
      // hooked - baseline, libucm's baseline being the libucm-off run of the same rep.
      const triples: Array<[number, number, number]> = [];
      for (const r of runs) {
        const l = r.reported!.loops.find((x) => x.name === name);
        if (!l) continue;
        if (typeof l.cost_ns_per_call === 'number') {
          triples.push([l.ns_per_call, l.base_ns_per_call, l.cost_ns_per_call]);
          continue;
        }
        let base = l.base_ns_per_call;
        if (c.name === 'libucm') {
          const off = raw
            .find((x) => x.column === 'libucm-off' && x.rep === r.rep && x.status === 'ok')
            ?.reported?.loops.find((x) => x.name === name);
          if (!off) continue;
          base = off.base_ns_per_call;
        }
        triples.push([l.ns_per_call, base, l.ns_per_call - base]);
      }
      if (triples.length === 0) continue;
      s.columns[c.name] = {
        ns_per_call: stat(triples.map((x) => x[0])),
        base_ns_per_call: stat(triples.map((x) => x[1])),
        cost_ns: Math.round(median(triples.map((x) => x[2])) * 100) / 100,
        events: last.events,
        expected: last.expected,
        match: loops.every((l) => l.match),
      };
    }
    const ucm = s.columns.libucm;
    const ucmReloc = s.columns['libucm-reloc'];
    const ratio = (cost: number, of: number) => Math.round((Math.max(cost, 0) / of) * 1000) / 1000;
    for (const c of UCM_HEAPHOOK_COLUMNS) {
      const col = s.columns[c];
      if (!col) continue;
      if (ucmReloc && ucmReloc.cost_ns > 0)
        s.ratios_reloc![c] = ratio(col.cost_ns, ucmReloc.cost_ns);
      if (!ucm) continue;
      if (ucm.cost_ns > 0) s.ratios[c] = ratio(col.cost_ns, ucm.cost_ns);
      s.same_counts[c] =
        JSON.stringify(col.events) === JSON.stringify(ucm.events) &&
        (!ucmReloc || JSON.stringify(col.events) === JSON.stringify(ucmReloc.events));
    }
    out.push(s);
  }
  return out;
}

export interface UcmHooksOptions {
  runs: number;
  iters: number;
  reps: number;
  timeoutS: number;
  /** Injected for tests. */
  columns?: UcmColumn[];
  onProgress?: (task: string) => void;
}

/** Runs the columns interleaved (preload, reloc, libucm, preload, ...) `runs` times. */
export function runUcmHooks(o: UcmHooksOptions): UcmHooksSection {
  const columns = o.columns ?? ucmColumns({}, o.iters, o.reps);
  const ready = columns.filter((c) => c.status === 'ready');
  const library = existsSync(ucmLibraryPath()) ? ucmLibraryPath() : null;
  const section = (extra: Partial<UcmHooksSection>): UcmHooksSection => ({
    status: 'ok',
    runs: o.runs,
    iters: o.iters,
    reps: o.reps,
    library,
    columns,
    loops: [],
    raw: [],
    ...extra,
  });
  const hh = columns.find((c) => c.name === 'heaphook-reloc');
  if (!hh || hh.status !== 'ready')
    return section({ status: 'skipped', reason: hh?.reason ?? 'not built', runs: 0 });
  const raw: UcmRun[] = [];
  let seq = 0;
  for (let rep = 0; rep < o.runs; rep++)
    for (const c of ready) {
      o.onProgress?.(`memory hooks: ${c.name} (run ${rep + 1})`);
      raw.push(runUcmColumn(c, seq++, rep, o.timeoutS));
    }
  const loops = summarizeUcm(columns, raw);
  const failed = raw.some((r) => r.status !== 'ok');
  const ucm = columns.find((c) => c.name === 'libucm');
  return section({
    status: failed ? 'failed' : 'ok',
    ...(failed
      ? { reason: raw.find((r) => r.status !== 'ok')!.error! }
      : ucm?.status === 'skipped'
        ? { reason: `libucm: skipped: ${ucm.reason ?? ''}` }
        : {}),
    loops,
    raw,
  });
}

/** The loop's median cost over the baseline, for tables. */
export function ucmCostText(ns: number | undefined): string {
  if (ns === undefined) return '–';
  return `${ns < 0 ? '≈0' : ns < 10 ? ns.toFixed(1) : Math.round(ns).toString()} ns`;
}
