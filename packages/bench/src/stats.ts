/** Medians, ranges, ratios to the baseline, and the cross-allocator checksum check. */
import type { Cell, MetricKey, RunRecord, Stat } from './types.js';

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error('median of no values');
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function stat(xs: readonly number[]): Stat {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length };
}

/** Lower is better for every figure except these (throughputs reported by the workloads). */
export const HIGHER_IS_BETTER: ReadonlySet<string> = new Set(['reported.ops_per_s']);

const RUSAGE_KEYS = [
  'wall_s',
  'cpu_s',
  'user_s',
  'sys_s',
  'peak_rss_bytes',
  'minflt',
  'majflt',
] as const;

export function metricValue(run: RunRecord, key: MetricKey | string): number | null {
  if (key.startsWith('reported.')) {
    const v = run.reported?.[key.slice('reported.'.length)];
    return typeof v === 'number' && Number.isFinite(v) ? v : null;
  }
  if (key === 'trace_bytes') return run.trace_bytes ?? null;
  if (key === 'trace_calls') return run.trace_calls ?? null;
  const v = (run as unknown as Record<string, unknown>)[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * Every workload computes a checksum that depends only on its arguments, never on the
 * allocator. A run whose checksum differs from the reference (the first passing glibc run, else
 * the most common value) computed something else: it is marked failed.
 */
export function checkChecksums(runs: readonly RunRecord[], reference = 'glibc'): RunRecord[] {
  const byWorkload = new Map<string, RunRecord[]>();
  for (const r of runs) {
    const list = byWorkload.get(r.workload) ?? [];
    list.push(r);
    byWorkload.set(r.workload, list);
  }
  const refs = new Map<string, string>();
  for (const [w, list] of byWorkload) {
    const ok = list.filter((r) => r.status === 'ok' && typeof r.reported?.checksum === 'string');
    const fromRef = ok.find((r) => r.allocator === reference);
    if (fromRef) {
      refs.set(w, fromRef.reported!.checksum as string);
      continue;
    }
    const counts = new Map<string, number>();
    for (const r of ok)
      counts.set(
        r.reported!.checksum as string,
        (counts.get(r.reported!.checksum as string) ?? 0) + 1,
      );
    let best: string | undefined;
    for (const [c, n] of counts) if (best === undefined || n > counts.get(best)!) best = c;
    if (best !== undefined) refs.set(w, best);
  }
  return runs.map((r) => {
    const ref = refs.get(r.workload);
    const sum = r.reported?.checksum;
    if (r.status !== 'ok' || ref === undefined || typeof sum !== 'string' || sum === ref) return r;
    return {
      ...r,
      status: 'failed' as const,
      error: `wrong result: checksum ${sum}, ${reference} computed ${ref}`,
    };
  });
}

export interface CellKey {
  readonly workload: string;
  readonly allocator: string;
  /** The allocator whose cell the ratios are against. */
  readonly baseline: string;
  readonly status?: 'ready' | 'skipped';
}

/**
 * One cell per (workload, allocator): median/min/max of each figure over the passing runs,
 * and the ratio of each median to the baseline's median (same workload, same session).
 * A cell with any failed run is 'failed' (a crash that happens once in five runs is a crash).
 */
export function summarize(runs: readonly RunRecord[], keys: readonly CellKey[]): Cell[] {
  const cells: Cell[] = keys.map((k) => {
    const mine = runs.filter((r) => r.workload === k.workload && r.allocator === k.allocator);
    const ok = mine.filter((r) => r.status === 'ok');
    const bad = mine.filter((r) => r.status !== 'ok');
    const metrics: Record<string, Stat> = {};
    const names = new Set<string>(RUSAGE_KEYS);
    for (const r of ok) {
      for (const [key, v] of Object.entries(r.reported ?? {}))
        if (typeof v === 'number') names.add(`reported.${key}`);
      if (r.trace_bytes !== undefined) names.add('trace_bytes');
      if (r.trace_calls !== undefined) names.add('trace_calls');
    }
    for (const name of names) {
      const xs = ok.map((r) => metricValue(r, name)).filter((v): v is number => v !== null);
      if (xs.length > 0) metrics[name] = stat(xs);
    }
    const status: Cell['status'] =
      k.status === 'skipped' || mine.length === 0 ? 'skipped' : bad.length > 0 ? 'failed' : 'ok';
    return {
      workload: k.workload,
      allocator: k.allocator,
      status,
      runs: mine.length,
      failed_runs: bad.length,
      ...(bad[0]?.error ? { error: bad[0].error } : {}),
      metrics,
      ratios: {},
      baseline: k.baseline,
    };
  });
  for (const c of cells) {
    const base = cells.find((b) => b.workload === c.workload && b.allocator === c.baseline);
    if (!base || base.status !== 'ok' || c.status !== 'ok') continue;
    for (const [key, s] of Object.entries(c.metrics)) {
      const b = base.metrics[key];
      if (b && b.median > 0) c.ratios[key] = s.median / b.median;
    }
  }
  return cells;
}

/**
 * The allocators with the best median of `metric` among the passing cells of one workload
 * (several when they tie; none when every cell has the same value: there is no winner).
 */
export function bestAllocators(
  cells: readonly Cell[],
  workload: string,
  metric: string,
  among?: readonly string[],
): string[] {
  const higher = HIGHER_IS_BETTER.has(metric);
  const vals: Array<[string, number]> = [];
  for (const c of cells) {
    if (c.workload !== workload || c.status !== 'ok') continue;
    if (among && !among.includes(c.allocator)) continue;
    const v = c.metrics[metric]?.median;
    if (v !== undefined) vals.push([c.allocator, v]);
  }
  if (vals.length < 2) return [];
  const best = higher ? Math.max(...vals.map(([, v]) => v)) : Math.min(...vals.map(([, v]) => v));
  const winners = vals.filter(([, v]) => v === best).map(([a]) => a);
  return winners.length === vals.length ? [] : winners;
}

/** The first of bestAllocators(), if any. */
export function bestAllocator(
  cells: readonly Cell[],
  workload: string,
  metric: string,
  among?: readonly string[],
): string | undefined {
  return bestAllocators(cells, workload, metric, among)[0];
}
