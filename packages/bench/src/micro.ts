/**
 * `micro`: in-process micro-benchmarks with benchmark.js, for hot paths that no process-level
 * run shows: the TLSF code itself through the @heaphook/tlsf addon (`new TlsfHeap(size)`,
 * `alloc(size, align)` → offset, `free(offset)`) against the process's own malloc through this
 * package's addon (`MallocHeap`, bench_addon.node, the same interface). One Benchmark.Suite runs
 * every case on both arms, so each figure includes the same one N-API call per operation and
 * the ratio is TLSF's against malloc's. The suite skips with a message when an addon is not
 * built.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

import { nativeFile } from '@heaphook/core';
import Benchmark from 'benchmark';

import { defaultOutDirs, nativeProgram } from './paths.js';

/** What the micro-benchmarks need of the addon's TlsfHeap. */
export interface TlsfHeapLike {
  alloc(size: number, align?: number): number | null;
  free(offset: number): void;
  realloc?(offset: number, size: number): number | null;
  usableSize?(offset: number): number;
  destroy?(): void;
}
type TlsfHeapCtor = new (size: number) => TlsfHeapLike;

/** The arms of the suite: the TlsfHeap addon, and malloc through bench_addon.node. */
export const ARMS = ['TlsfHeap', 'malloc'] as const;
export type Arm = (typeof ARMS)[number];

export interface MicroResult {
  suite: string;
  /** `<arm>: <case>` */
  name: string;
  arm: Arm;
  case: string;
  ops_per_s: number;
  ns_per_op: number;
  rme_percent: number;
  samples: number;
}

export type Loaded = { ctor: TlsfHeapCtor; from: string } | { skipped: string };

/** MallocHeap: what the malloc arm needs, and the calls it made (to tell that it ran). */
export interface MallocHeapLike extends TlsfHeapLike {
  readonly calls: number;
}
export type LoadedMalloc = { ctor: new () => MallocHeapLike; from: string } | { skipped: string };

/** MallocHeap from this package's built addon (build/Release/bench_addon.node). */
export async function loadMallocHeap(): Promise<LoadedMalloc> {
  const addon = nativeProgram('bench_addon.node');
  if (!existsSync(addon))
    return { skipped: `skipped: ${addon} is not built; run npx nx build bench` };
  const require = createRequire(import.meta.url);
  const mod = require(addon) as { MallocHeap?: unknown };
  if (typeof mod.MallocHeap !== 'function')
    return {
      skipped: `skipped: ${addon} does not export MallocHeap; rebuild it (npx nx build bench)`,
    };
  return { ctor: mod.MallocHeap as new () => MallocHeapLike, from: addon };
}

/** TlsfHeap from '@heaphook/tlsf'; failing that, from the package's built addon file. */
export async function loadTlsfHeap(): Promise<Loaded> {
  let why = '';
  try {
    const mod = (await import('@heaphook/tlsf' as string)) as {
      TlsfHeap?: unknown;
      default?: { TlsfHeap?: unknown };
    };
    const ctor = mod.TlsfHeap ?? mod.default?.TlsfHeap;
    if (typeof ctor === 'function') return { ctor: ctor as TlsfHeapCtor, from: '@heaphook/tlsf' };
    why = '@heaphook/tlsf does not export TlsfHeap';
  } catch (e) {
    why = `@heaphook/tlsf did not load (${(e as Error).message.split('\n')[0]})`;
  }
  try {
    const require = createRequire(import.meta.url);
    const dir = dirname(require.resolve('@heaphook/tlsf/package.json'));
    const addon = nativeFile(dir, 'tlsf_addon.node');
    if (existsSync(addon)) {
      const mod = require(addon) as { TlsfHeap?: unknown };
      if (typeof mod.TlsfHeap === 'function')
        return { ctor: mod.TlsfHeap as TlsfHeapCtor, from: addon };
    }
  } catch {
    /* not installed */
  }
  return { skipped: `skipped: the TLSF addon is not built (${why}); run npx nx build tlsf` };
}

/** What ran: the suite's name and its benchmarks in order (`<arm>: <case>`). */
export interface SuiteRun {
  readonly name: string;
  readonly benchmarks: readonly string[];
  /** Benchmarks that threw (their message), none when every case ran. */
  readonly errors: readonly string[];
}

/** Runs one Benchmark.Suite of the cases of every arm, interleaved case by case. */
function runSuite(
  suiteName: string,
  arms: ReadonlyArray<[Arm, Array<[string, () => void]>]>,
  log: (l: string) => void,
  maxTime: number,
  minSamples: number,
): { results: MicroResult[]; run: SuiteRun } {
  const out: MicroResult[] = [];
  const errors: string[] = [];
  const suite = new Benchmark.Suite(suiteName);
  const caseNames = arms[0]![1].map(([name]) => name);
  for (const name of caseNames) {
    for (const [arm, cases] of arms) {
      const fn = cases.find(([n]) => n === name)?.[1];
      if (fn !== undefined) suite.add(`${arm}: ${name}`, fn, { maxTime, minSamples });
    }
  }
  suite.on('cycle', (ev: Benchmark.Event) => {
    const b = ev.target as unknown as Benchmark;
    if (b.error) {
      errors.push(`${String(b.name)}: ${String(b.error)}`);
      log(`  ${String(b.name)}: error ${String(b.error)}`);
      return;
    }
    const name = String(b.name);
    const sep = name.indexOf(': ');
    const r: MicroResult = {
      suite: suiteName,
      name,
      arm: name.slice(0, sep) as Arm,
      case: name.slice(sep + 2),
      ops_per_s: b.hz,
      ns_per_op: 1e9 / b.hz,
      rme_percent: b.stats.rme,
      samples: b.stats.sample.length,
    };
    out.push(r);
    log(
      `  ${r.name.padEnd(52)} ${r.ns_per_op.toFixed(1).padStart(8)} ns/op  ±${r.rme_percent.toFixed(1)}%  (${r.samples} samples)`,
    );
  });
  suite.run({ async: false });
  // the suite's own list (an array-like of its benchmarks), as it ran them
  const list = suite as unknown as ArrayLike<Benchmark>;
  const benchmarks = Array.from(list, (b) => String(b.name));
  return { results: out, run: { name: suiteName, benchmarks, errors } };
}

/** The suite's table: ns per operation of each case on each arm, and TLSF's time over malloc's. */
export function microTable(results: readonly MicroResult[]): string {
  const cases = [...new Set(results.map((r) => r.case))];
  const cell = (c: string, arm: Arm) => results.find((r) => r.case === c && r.arm === arm);
  const rows = cases.map((c) => {
    const t = cell(c, 'TlsfHeap');
    const m = cell(c, 'malloc');
    const ns = (r?: MicroResult) =>
      r ? `${r.ns_per_op.toFixed(1)} ±${r.rme_percent.toFixed(0)}%` : '—';
    return [c, ns(t), ns(m), t && m ? (t.ns_per_op / m.ns_per_op).toFixed(2) : '—'];
  });
  const head = [
    'case (one N-API call per operation)',
    'TlsfHeap ns/op',
    'malloc ns/op',
    'TLSF / malloc',
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (i === 0 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`;
  return [line(head), rule, ...rows.map(line)].join('\n');
}

/** The cases of one arm, over its heap (a TlsfHeap of 256 MiB, or MallocHeap). */
export function heapCases(heap: TlsfHeapLike): Array<[string, () => void]> {
  // Precomputed, seeded sizes: the case measures TLSF, not a random generator.
  let s = 42;
  const next = () => {
    s = (s * 1103515245 + 12345) >>> 0;
    return s;
  };
  const sizes = Array.from({ length: 4096 }, () => 16 + (next() % 4081));
  const slots = new Array<number | null>(4096).fill(null);
  const picks = Array.from({ length: 65536 }, () => next() % 4096);
  let i = 0;
  let j = 0;
  const probe = heap.alloc(64, 1);
  const fail = (what: string) => {
    throw new Error(`${heap.constructor.name}.${what} returned null`);
  };
  const cases: Array<[string, () => void]> = [
    [
      'alloc + free, 64 B',
      () => {
        const o = heap.alloc(64, 1);
        if (o === null) fail('alloc');
        heap.free(o!);
      },
    ],
    [
      'alloc + free, 64 B aligned to 256',
      () => {
        const o = heap.alloc(64, 256);
        if (o === null || o % 256 !== 0) fail('alloc');
        heap.free(o!);
      },
    ],
    [
      'alloc + free, mixed 16 B-4 KiB',
      () => {
        const o = heap.alloc(sizes[i++ & 4095]!, 1);
        if (o === null) fail('alloc');
        heap.free(o!);
      },
    ],
    [
      'churn: replace one of 4096 live blocks (free + alloc)',
      () => {
        const k = picks[j++ & 65535]!;
        const old = slots[k];
        if (old !== null && old !== undefined) heap.free(old);
        const o = heap.alloc(sizes[(j * 7) & 4095]!, 1);
        if (o === null) fail('alloc');
        slots[k] = o;
      },
    ],
  ];
  if (typeof heap.realloc === 'function') {
    cases.push([
      'realloc growth 16 B → 4 KiB in 16 steps, then free',
      () => {
        let o = heap.alloc(16, 1);
        for (let n = 256; n <= 4096 && o !== null; n += 256) o = heap.realloc!(o, n);
        if (o === null) fail('realloc');
        heap.free(o!);
      },
    ]);
  }
  if (typeof heap.usableSize === 'function' && probe !== null) {
    cases.push([
      'usableSize (the cost of one addon call, for scale)',
      () => void heap.usableSize!(probe),
    ]);
  }
  return cases;
}

export interface MicroOptions {
  readonly quick?: boolean;
  /** Seconds of sampling per benchmark (default 2, 0.25 with quick). */
  readonly maxTime?: number;
  /** Samples each benchmark takes at least (default 5). */
  readonly minSamples?: number;
  readonly outDir?: string;
  readonly write?: boolean;
  readonly log?: (line: string) => void;
  /** Injected for tests. */
  readonly loadTlsf?: () => Promise<Loaded>;
  readonly loadMalloc?: () => Promise<LoadedMalloc>;
}

export interface MicroOutput {
  results: MicroResult[];
  skipped: string[];
  /** The suite that ran (absent when skipped). */
  suite?: SuiteRun;
  /** microTable(results), '' when nothing ran. */
  table: string;
  /** Allocation-family calls the malloc arm made through its addon. */
  mallocCalls: number;
}

export async function micro(opts: MicroOptions = {}): Promise<MicroOutput> {
  const log = opts.log ?? ((l: string) => process.stdout.write(`${l}\n`));
  const skipped: string[] = [];
  const results: MicroResult[] = [];
  const maxTime = opts.maxTime ?? (opts.quick ? 0.25 : 2);
  const minSamples = opts.minSamples ?? 5;
  log(`benchmark.js ${Benchmark.version}, ${maxTime} s per case and arm`);
  const tlsf = await (opts.loadTlsf ?? loadTlsfHeap)();
  const malloc = await (opts.loadMalloc ?? loadMallocHeap)();
  let suite: SuiteRun | undefined;
  let table = '';
  let mallocCalls = 0;
  if ('skipped' in tlsf || 'skipped' in malloc) {
    for (const [arm, l] of [
      ['tlsf', tlsf],
      ['malloc', malloc],
    ] as const) {
      if ('skipped' in l) {
        log(`${arm}: ${l.skipped}`);
        skipped.push(`${arm}: ${l.skipped}`);
      }
    }
  } else {
    log(
      `TlsfHeap from ${tlsf.from}, one 256 MiB heap; malloc through MallocHeap from ${malloc.from}`,
    );
    const mallocHeap = new malloc.ctor();
    const ran = runSuite(
      'tlsf-vs-malloc',
      [
        ['TlsfHeap', heapCases(new tlsf.ctor(256 * 1024 * 1024))],
        ['malloc', heapCases(mallocHeap)],
      ],
      log,
      maxTime,
      minSamples,
    );
    results.push(...ran.results);
    suite = ran.run;
    mallocCalls = mallocHeap.calls;
    table = microTable(results);
    log(table);
  }
  if ((opts.write ?? true) && results.length > 0) {
    const dir = opts.outDir ?? defaultOutDirs.micro;
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'micro.json');
    writeFileSync(
      file,
      `${JSON.stringify({ schema: 'heaphook-bench-micro/1', date: new Date().toISOString(), node: process.version, results, skipped }, null, 2)}\n`,
    );
    log(`Written: ${file}`);
  }
  return { results, skipped, ...(suite ? { suite } : {}), table, mallocCalls };
}
