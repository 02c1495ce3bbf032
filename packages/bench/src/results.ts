/**
 * latest.json: every run's raw figures, the cells' medians and ratios, the machine and the
 * versions. The schema is documented in the package README ("latest.json") and checked by
 * validateResults(), which the tests run on a real result.
 */
import type { MachineInfo, Versions } from './machine.js';
import type { Allocator, Cell, Profile, RunRecord, Workload } from './types.js';
import type { PoolRecommendation } from './recommended.js';
import type { UcmHooksSection } from './ucmhooks.js';

export const SCHEMA_ID = 'heaphook-bench/1';

export interface AllocatorRecord {
  name: string;
  kind: Allocator['kind'];
  status: 'ready' | 'skipped';
  reason?: string;
  description: string;
  preload: string[];
  /** Environment for every workload. */
  env: Record<string, string>;
  /** Environment that depends on the workload (tlsf-rt's pool size), by workload name. */
  env_per_workload?: Record<string, Record<string, string>>;
  /** Command prefix ({dir} = the run's scratch folder). */
  wrap?: string[];
  baseline: string;
  source?: string;
  version?: string;
}

export interface WorkloadRecord {
  name: string;
  base: string;
  description: string;
  threads?: number;
  size: number;
  command: string;
  args: string[];
  primary: string;
  status: 'ready' | 'skipped';
  reason?: string;
}

export interface Results {
  schema: typeof SCHEMA_ID;
  /** When the run started (ISO 8601). */
  date: string;
  duration_s: number;
  /** The command line, as typed after the program name. */
  command: string;
  options: {
    profile: Profile;
    runs: number;
    tracer_runs: number;
    threads: number[];
    allocators: string[] | null;
    workloads: string[] | null;
    timeout_s: number;
    seed: number;
    size: number | null;
  };
  machine: MachineInfo;
  versions: Versions;
  allocators: AllocatorRecord[];
  tracers: AllocatorRecord[];
  workloads: WorkloadRecord[];
  runs: RunRecord[];
  cells: Cell[];
  /** tlsf-rec: the pools `heaphook recommend` gave for traces of the workloads it runs. */
  recommended_pools?: PoolRecommendation[];
  /** Memory-event hooks: ns per hooked call (absent when not run: --no-ucm-hooks). */
  ucm_hooks?: UcmHooksSection;
}

export function allocatorRecord(a: Allocator, workloads: readonly Workload[]): AllocatorRecord {
  const rec: AllocatorRecord = {
    name: a.name,
    kind: a.kind,
    status: a.status,
    ...(a.reason ? { reason: a.reason } : {}),
    description: a.description,
    preload: [...a.preload],
    env: { ...a.env },
    baseline: a.baseline,
    ...(a.wrap && a.wrap.length > 0 ? { wrap: [...a.wrap] } : {}),
    ...(a.source ? { source: a.source } : {}),
    ...(a.version ? { version: a.version } : {}),
  };
  if (a.envFor) {
    rec.env_per_workload = {};
    for (const w of workloads)
      if (!a.appliesTo || a.appliesTo(w)) rec.env_per_workload[w.name] = a.envFor(w);
  }
  return rec;
}

export function workloadRecord(w: Workload): WorkloadRecord {
  return {
    name: w.name,
    base: w.base,
    description: w.description,
    ...(w.threads !== undefined ? { threads: w.threads } : {}),
    size: w.size,
    command: w.command,
    args: [...w.args],
    primary: w.primary,
    status: w.status,
    ...(w.reason ? { reason: w.reason } : {}),
  };
}

/* ---------------- validation ---------------- */

type Check = (v: unknown) => boolean;
const isString: Check = (v) => typeof v === 'string';
const isNumber: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const isNumOrNull: Check = (v) => v === null || isNumber(v);
const isStrOrNull: Check = (v) => v === null || isString(v);
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const oneOf =
  (...xs: string[]): Check =>
  (v) =>
    typeof v === 'string' && xs.includes(v);
const arrayOf =
  (c: Check): Check =>
  (v) =>
    Array.isArray(v) && v.every(c);
const optional =
  (c: Check): Check =>
  (v) =>
    v === undefined || c(v);
const stringMap: Check = (v) => isObject(v) && Object.values(v).every(isString);

function fields(
  where: string,
  obj: unknown,
  spec: Record<string, Check>,
  problems: string[],
): void {
  if (!isObject(obj)) {
    problems.push(`${where}: not an object`);
    return;
  }
  for (const [k, check] of Object.entries(spec)) {
    if (!check(obj[k]))
      problems.push(`${where}.${k}: unexpected value ${JSON.stringify(obj[k])?.slice(0, 80)}`);
  }
}

const statCheck: Check = (v) =>
  isObject(v) &&
  isNumber(v.median) &&
  isNumber(v.min) &&
  isNumber(v.max) &&
  isNumber(v.n) &&
  (v.min as number) <= (v.median as number) &&
  (v.median as number) <= (v.max as number);

const allocatorSpec: Record<string, Check> = {
  name: isString,
  kind: oneOf('glibc', 'backend', 'variant', 'system', 'custom', 'tracer'),
  status: oneOf('ready', 'skipped'),
  reason: optional(isString),
  description: isString,
  preload: arrayOf(isString),
  env: stringMap,
  env_per_workload: optional((v) => isObject(v) && Object.values(v).every(stringMap)),
  wrap: optional(arrayOf(isString)),
  baseline: isString,
  source: optional(isString),
  version: optional(isString),
};

/** Problems found in a parsed latest.json; empty when it follows the schema. */
export function validateResults(doc: unknown): string[] {
  const p: string[] = [];
  if (!isObject(doc)) return ['not an object'];
  fields(
    '',
    doc,
    {
      schema: (v) => v === SCHEMA_ID,
      date: (v) => isString(v) && !Number.isNaN(Date.parse(v as string)),
      duration_s: isNumber,
      command: isString,
      allocators: Array.isArray,
      tracers: Array.isArray,
      workloads: Array.isArray,
      runs: Array.isArray,
      cells: Array.isArray,
    },
    p,
  );
  fields(
    'options',
    doc.options,
    {
      profile: oneOf('quick', 'default'),
      runs: isNumber,
      tracer_runs: isNumber,
      threads: arrayOf(isNumber),
      allocators: (v) => v === null || arrayOf(isString)(v),
      workloads: (v) => v === null || arrayOf(isString)(v),
      timeout_s: isNumber,
      seed: isNumber,
      size: isNumOrNull,
    },
    p,
  );
  fields(
    'machine',
    doc.machine,
    {
      cpu_model: isString,
      logical_cpus: isNumber,
      memory_bytes: isNumber,
      kernel: isString,
      os: isString,
      arch: isString,
      loadavg_start: isNumber,
      loadavg_end: optional(isNumber),
    },
    p,
  );
  fields(
    'versions',
    doc.versions,
    {
      node: isString,
      glibc: isStrOrNull,
      compiler: isStrOrNull,
      python3: isStrOrNull,
      heaphook: stringMap,
      git: isStrOrNull,
    },
    p,
  );
  const names = new Set<string>();
  for (const [i, a] of ((doc.allocators as unknown[]) ?? []).entries()) {
    fields(`allocators[${i}]`, a, allocatorSpec, p);
    if (isObject(a) && isString(a.name)) names.add(a.name as string);
  }
  for (const [i, a] of ((doc.tracers as unknown[]) ?? []).entries()) {
    fields(`tracers[${i}]`, a, allocatorSpec, p);
    if (isObject(a) && isString(a.name)) names.add(a.name as string);
  }
  if (!names.has('glibc')) p.push('allocators: no glibc entry (the baseline)');
  const workloads = new Set<string>();
  for (const [i, w] of ((doc.workloads as unknown[]) ?? []).entries()) {
    fields(
      `workloads[${i}]`,
      w,
      {
        name: isString,
        base: isString,
        description: isString,
        threads: optional(isNumber),
        size: isNumber,
        command: isString,
        args: arrayOf(isString),
        primary: isString,
        status: oneOf('ready', 'skipped'),
        reason: optional(isString),
      },
      p,
    );
    if (isObject(w) && isString(w.name)) workloads.add(w.name as string);
  }
  for (const [i, r] of ((doc.runs as unknown[]) ?? []).entries()) {
    fields(
      `runs[${i}]`,
      r,
      {
        seq: isNumber,
        workload: (v) => isString(v) && workloads.has(v as string),
        allocator: (v) => isString(v) && names.has(v as string),
        rep: isNumber,
        status: oneOf('ok', 'failed', 'timeout'),
        error: optional(isString),
        exit_code: isNumOrNull,
        signal: isStrOrNull,
        wall_s: isNumOrNull,
        user_s: isNumOrNull,
        sys_s: isNumOrNull,
        cpu_s: isNumOrNull,
        peak_rss_bytes: isNumOrNull,
        minflt: isNumOrNull,
        majflt: isNumOrNull,
        voluntary_switches: isNumOrNull,
        involuntary_switches: isNumOrNull,
        reported: (v) => v === null || isObject(v),
        trace_bytes: optional(isNumber),
        trace_calls: optional(isNumber),
        stderr_tail: optional(isString),
      },
      p,
    );
    if (isObject(r) && r.status === 'ok' && !isNumber(r.wall_s))
      p.push(`runs[${i}]: ok without wall_s`);
    if (isObject(r) && r.status !== 'ok' && !isString(r.error))
      p.push(`runs[${i}]: not ok without an error`);
  }
  for (const [i, c] of ((doc.cells as unknown[]) ?? []).entries()) {
    fields(
      `cells[${i}]`,
      c,
      {
        workload: (v) => isString(v) && workloads.has(v as string),
        allocator: (v) => isString(v) && names.has(v as string),
        status: oneOf('ok', 'failed', 'skipped'),
        runs: isNumber,
        failed_runs: isNumber,
        error: optional(isString),
        metrics: (v) => isObject(v) && Object.values(v).every(statCheck),
        ratios: (v) => isObject(v) && Object.values(v).every(isNumber),
        baseline: isString,
      },
      p,
    );
  }
  if (doc.recommended_pools !== undefined) {
    if (!Array.isArray(doc.recommended_pools)) p.push('recommended_pools: not an array');
    for (const [i, r] of (Array.isArray(doc.recommended_pools)
      ? (doc.recommended_pools as unknown[])
      : []
    ).entries())
      fields(
        `recommended_pools[${i}]`,
        r,
        {
          workload: (v) => isString(v) && workloads.has(v as string),
          status: oneOf('ok', 'failed'),
          error: optional(isString),
          env: stringMap,
          initial_pool_bytes: isNumOrNull,
          additional_pool_bytes: isNumOrNull,
          peak_live_bytes: isNumOrNull,
          replayed_minimum_bytes: isNumOrNull,
          events: isNumOrNull,
          record_s: isNumber,
          recommend_s: isNumber,
        },
        p,
      );
  }
  if (doc.ucm_hooks !== undefined) {
    fields(
      'ucm_hooks',
      doc.ucm_hooks,
      {
        status: oneOf('ok', 'failed', 'skipped'),
        reason: optional(isString),
        runs: isNumber,
        iters: isNumber,
        reps: isNumber,
        library: isStrOrNull,
        columns: Array.isArray,
        loops: Array.isArray,
        raw: Array.isArray,
      },
      p,
    );
    const u = doc.ucm_hooks as Record<string, unknown>;
    for (const [i, l] of (Array.isArray(u.loops) ? (u.loops as unknown[]) : []).entries())
      fields(
        `ucm_hooks.loops[${i}]`,
        l,
        {
          name: isString,
          calls: isNumber,
          columns: isObject,
          ratios: isObject,
          same_counts: isObject,
        },
        p,
      );
  }
  return p;
}
