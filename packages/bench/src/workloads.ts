/**
 * The workload catalogue: native programs built from native/workloads/ and two real programs.
 * Every workload checks its own results and exits non-zero when they are wrong (see
 * native/workloads/bench.h for the contract); its `--size` knob is chosen per profile so that a
 * run takes about 0.5-1.5 s under glibc on a 2-core machine (default), or a few tens of ms of
 * work beyond the program's start (quick: a smoke run that every cell runs and verifies).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { nativeProgram, scriptsDir } from './paths.js';
import type { MetricKey, Profile, Workload } from './types.js';

const MiB = 1024 * 1024;

export interface WorkloadDef {
  readonly base: string;
  readonly description: string;
  /** Takes --threads; `effectiveThreads` maps the requested count to what the program runs. */
  readonly threaded: boolean;
  readonly effectiveThreads?: (requested: number) => number;
  readonly sizes: Readonly<Record<Profile, number>>;
  /** --size of the untimed warm-up run (default: a twentieth of the run's size). */
  readonly warmupSize?: number;
  /** Knobs after --size/--seed/--threads in a profile (bench.h: --probe-ms, --slots). */
  readonly profileArgs?: Readonly<Partial<Record<Profile, readonly string[]>>>;
  readonly primary: MetricKey;
  /** Initial pool of the real-time TLSF variant: about 1.5× the workload's peak RSS under glibc. */
  readonly rtPoolBytes: Readonly<Record<Profile, number>>;
  /** Measured under tlsf-rec: TLSF with the pool `heaphook recommend` gives for its own trace. */
  readonly recommendPool?: boolean;
  /** Not run under the tracers (the startup workload: hundreds of processes, a log each). */
  readonly noTracers?: boolean;
  /**
   * Run under the tracers in the quick profile too. --quick traces only these (one
   * single-threaded, one cross-thread, one real program), unless workloads are named.
   */
  readonly tracedWhenQuick?: boolean;
  /** Resolves the command; returns a skip reason when the program is not available. */
  readonly resolve: () =>
    { command: string; args: string[]; env?: Record<string, string> } | { skip: string };
}

function native(program: string) {
  return () => ({ command: nativeProgram(program), args: [] as string[] });
}

let pythonCache: string | null | undefined;
/** The python3 on PATH, resolved to the real interpreter (not a pyenv shim script). */
export function findPython(): string | null {
  if (pythonCache !== undefined) return pythonCache;
  try {
    const out = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
    }).trim();
    pythonCache = out && existsSync(out) ? out : null;
  } catch {
    pythonCache = null;
  }
  return pythonCache;
}

export const WORKLOADS: readonly WorkloadDef[] = [
  {
    base: 'churn',
    description:
      'small-object churn on one thread: replace random objects of 16 B-1 KiB in a table of 20000',
    threaded: false,
    sizes: { quick: 500_000, default: 6_000_000 },
    warmupSize: 75_000,
    primary: 'wall_s',
    rtPoolBytes: { quick: 16 * MiB, default: 16 * MiB },
    tracedWhenQuick: true,
    resolve: native('wl_churn'),
  },
  {
    base: 'larson',
    description:
      'server pattern (Larson): threads replace random objects; every round new threads take over the tables, so blocks are freed by other threads',
    threaded: true,
    sizes: { quick: 500_000, default: 6_000_000 },
    warmupSize: 75_000,
    primary: 'wall_s',
    rtPoolBytes: { quick: 16 * MiB, default: 16 * MiB },
    resolve: native('wl_larson'),
  },
  {
    base: 'xthread',
    description:
      'producer/consumer pairs: messages of 16 B-32 KiB allocated by one thread, checked and freed by another',
    threaded: true,
    effectiveThreads: (t) => 2 * Math.max(1, Math.floor(t / 2)),
    sizes: { quick: 100_000, default: 2_000_000 },
    warmupSize: 10_000,
    primary: 'wall_s',
    rtPoolBytes: { quick: 32 * MiB, default: 32 * MiB },
    tracedWhenQuick: true,
    resolve: native('wl_xthread'),
  },
  {
    base: 'false_sharing',
    description:
      'cache-thrash + cache-scratch (Hoard): threads write their own 8-byte objects; slow when the allocator puts them on one cache line',
    threaded: true,
    sizes: { quick: 5_000, default: 50_000 },
    warmupSize: 750,
    primary: 'wall_s',
    rtPoolBytes: { quick: 8 * MiB, default: 8 * MiB },
    resolve: native('wl_false_sharing'),
  },
  {
    base: 'realloc_growth',
    description:
      '128 buffers grown by appends with realloc to the exact length, up to 32 KiB (some 1 MiB), checked and retired',
    threaded: false,
    sizes: { quick: 15_000, default: 150_000 },
    warmupSize: 2_000,
    primary: 'wall_s',
    rtPoolBytes: { quick: 16 * MiB, default: 96 * MiB },
    resolve: native('wl_realloc_growth'),
  },
  {
    base: 'fragmentation',
    description:
      'long run of mixed lifetimes and a size mix that changes by phase; peak RSS against peak live bytes',
    threaded: false,
    sizes: { quick: 30_000, default: 300_000 },
    warmupSize: 4_000,
    primary: 'reported.rss_over_live',
    rtPoolBytes: { quick: 64 * MiB, default: 160 * MiB },
    recommendPool: true,
    resolve: native('wl_fragmentation'),
  },
  {
    base: 'latency',
    description:
      'real-time loop at 10 kHz per thread, 16 mixed malloc/free per cycle, each call timed; percentiles (all calls, malloc, free) and page faults of the timed phase',
    threaded: true,
    sizes: { quick: 1_000, default: 12_000 },
    warmupSize: 125,
    /* 32,000 timed calls with 2 threads: p99.99 is the 4th slowest */
    profileArgs: { quick: ['--probe-ms=50'] },
    primary: 'reported.p99_99_ns',
    rtPoolBytes: { quick: 16 * MiB, default: 16 * MiB },
    resolve: native('wl_latency'),
  },
  {
    base: 'latency_b2b',
    description:
      'malloc and free back to back, hot: random slots of a table of 20000 (about 10000 live blocks per thread), sizes 8 B-64 KiB log-uniform, no pause; each call timed; percentiles of malloc and of free apart',
    threaded: true,
    sizes: { quick: 20_000, default: 2_000_000 },
    warmupSize: 5_000,
    /* quick: a table of 4000 slots (about 15 MiB live per thread) and a 20,000-operation
     * warm-up instead of 20000 slots and 100,000 */
    profileArgs: { quick: ['--slots=4000', '--probe-ms=50'] },
    primary: 'reported.free_p99_9_ns',
    /* about 73 MiB live per thread (10000 blocks of 7.3 KiB on average); glibc peaks at
     * ~100 MiB with one thread and ~200 MiB with two (quick: ~38 MiB with two) */
    rtPoolBytes: { quick: 64 * MiB, default: 320 * MiB },
    /* 2 M calls per thread under a tracer is minutes of log for little news: the loops above
     * already show the tracers' cost per call */
    noTracers: true,
    resolve: native('wl_latency_b2b'),
  },
  {
    base: 'startup',
    description:
      'start-up cost: N short processes one after the other (spawn, 48 allocations of start-up sizes, checked, exit), as a shell pipeline or a build starts them',
    threaded: false,
    sizes: { quick: 30, default: 400 },
    warmupSize: 5,
    primary: 'wall_s',
    rtPoolBytes: { quick: 4 * MiB, default: 4 * MiB },
    noTracers: true,
    resolve: native('wl_startup'),
  },
  {
    base: 'batch',
    description:
      'one size at a time (16 B-1 KiB), batches of 25-1600 blocks: allocate the batch, free the first half oldest first and the rest newest first',
    threaded: false,
    sizes: { quick: 200_000, default: 6_000_000 },
    warmupSize: 30_000,
    primary: 'wall_s',
    rtPoolBytes: { quick: 8 * MiB, default: 8 * MiB },
    resolve: native('wl_batch'),
  },
  {
    base: 'xmalloc',
    description:
      'xmalloc-test: one producer allocates blocks of 16 B-8 KiB, N-1 consumers check and free them (every free remote); rings bound the live set, so RSS shows how late remote frees come back',
    threaded: true,
    effectiveThreads: (t) => Math.max(2, t),
    sizes: { quick: 100_000, default: 2_000_000 },
    warmupSize: 10_000,
    primary: 'wall_s',
    rtPoolBytes: { quick: 16 * MiB, default: 16 * MiB },
    resolve: native('wl_xmalloc'),
  },
  {
    base: 'threads',
    description:
      'short-lived threads: rounds of N threads that each free what a thread of the previous round left, churn 16 B-4 KiB blocks and exit; --size threads in all',
    threaded: true,
    sizes: { quick: 300, default: 6_000 },
    warmupSize: 50,
    primary: 'wall_s',
    rtPoolBytes: { quick: 8 * MiB, default: 8 * MiB },
    resolve: native('wl_threads'),
  },
  {
    base: 'mixed',
    description:
      'espresso/cfrac-like phases: batches of 8 B-2 KiB blocks (1% 4-64 KiB), some reallocated, three quarters freed in random order, the rest kept for later phases',
    threaded: false,
    sizes: { quick: 150_000, default: 4_000_000 },
    warmupSize: 25_000,
    primary: 'wall_s',
    rtPoolBytes: { quick: 16 * MiB, default: 16 * MiB },
    resolve: native('wl_mixed'),
  },
  {
    base: 'python-json',
    description:
      'real program, as-is: python3 builds a document of N records, JSON dump + parse round trips, checked',
    threaded: false,
    sizes: { quick: 500, default: 6_000 },
    warmupSize: 75,
    primary: 'wall_s',
    rtPoolBytes: { quick: 32 * MiB, default: 96 * MiB },
    tracedWhenQuick: true,
    resolve: () => {
      const python = findPython();
      if (!python) return { skip: 'install python3' };
      return { command: python, args: [join(scriptsDir, 'json_roundtrip.py')] };
    },
  },
  {
    base: 'node-json',
    description:
      'real program, as-is: node builds a document of N records, JSON stringify + parse round trips through a Buffer, checked',
    threaded: false,
    sizes: { quick: 500, default: 6_000 },
    warmupSize: 75,
    primary: 'wall_s',
    rtPoolBytes: { quick: 64 * MiB, default: 64 * MiB },
    resolve: () => ({ command: process.execPath, args: [join(scriptsDir, 'json_roundtrip.mjs')] }),
  },
];

export const WORKLOAD_NAMES = WORKLOADS.map((w) => w.base);

export interface WorkloadSelection {
  readonly profile: Profile;
  /** Thread counts for threaded workloads (each becomes an instance `<name>-t<N>`). */
  readonly threads: readonly number[];
  /** Names to keep (base or instance names); all when empty. */
  readonly only?: readonly string[];
  /** Overrides the profile's size of every workload (tests use tiny sizes). */
  readonly sizeOverride?: number;
  readonly seed?: number;
  /** Extra definitions (tests add fake workloads). */
  readonly extra?: readonly WorkloadDef[];
}

/** Expands the catalogue into workload instances, in catalogue order. */
export function selectWorkloads(sel: WorkloadSelection): Workload[] {
  const defs = [...WORKLOADS, ...(sel.extra ?? [])];
  const only = (sel.only ?? []).filter((s) => s.length > 0);
  const known = new Set(defs.map((d) => d.base));
  for (const name of only) {
    const base = name.replace(/-t\d+$/, '');
    if (!known.has(base)) {
      throw new Error(`unknown workload '${name}'; known: ${[...known].join(', ')}`);
    }
  }
  const out: Workload[] = [];
  for (const def of defs) {
    const instances: Array<number | undefined> = def.threaded ? [] : [undefined];
    if (def.threaded) {
      for (const t of sel.threads) {
        const eff = def.effectiveThreads ? def.effectiveThreads(t) : t;
        if (!instances.includes(eff)) instances.push(eff);
      }
    }
    for (const threads of instances) {
      const name = threads === undefined ? def.base : `${def.base}-t${threads}`;
      if (only.length > 0 && !only.includes(def.base) && !only.includes(name)) continue;
      const size = sel.sizeOverride ?? def.sizes[sel.profile];
      const resolved = def.resolve();
      const args = [`--size=${size}`, `--seed=${sel.seed ?? 42}`];
      if (threads !== undefined) args.push(`--threads=${threads}`);
      args.push(...(def.profileArgs?.[sel.profile] ?? []));
      // --quick traces a few workloads only, unless the user named the workloads
      const noTracers =
        def.noTracers === true ||
        (sel.profile === 'quick' && only.length === 0 && def.tracedWhenQuick !== true);
      const common = {
        name,
        base: def.base,
        description: def.description,
        size,
        primary: def.primary,
        rtPoolBytes: def.rtPoolBytes[sel.profile],
        ...(def.recommendPool ? { recommendPool: true } : {}),
        ...(noTracers ? { noTracers: true } : {}),
        ...(threads !== undefined ? { threads } : {}),
      };
      if ('skip' in resolved) {
        out.push({
          ...common,
          command: '',
          args: [],
          env: {},
          status: 'skipped',
          reason: resolved.skip,
        });
      } else {
        out.push({
          ...common,
          command: resolved.command,
          args: [...resolved.args, ...args],
          env: resolved.env ?? {},
          status: 'ready',
        });
      }
    }
  }
  return out;
}
