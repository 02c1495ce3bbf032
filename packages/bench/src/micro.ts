/**
 * `micro`: in-process micro-benchmarks with benchmark.js, for hot paths that no process-level
 * run shows: the TLSF code itself through the @heaphook/tlsf addon (`new TlsfHeap(size)`,
 * `alloc(size, align)` → offset, `free(offset)`). Each suite skips with a message when its
 * addon is not built. Figures include the cost of one N-API call per operation.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

import { nativeFile } from '@heaphook/core';
import Benchmark from 'benchmark';

import { defaultOutDirs } from './paths.js';

/** What the micro-benchmarks need of the addon's TlsfHeap. */
export interface TlsfHeapLike {
  alloc(size: number, align?: number): number | null;
  free(offset: number): void;
  realloc?(offset: number, size: number): number | null;
  usableSize?(offset: number): number;
  destroy?(): void;
}
type TlsfHeapCtor = new (size: number) => TlsfHeapLike;

export interface MicroResult {
  suite: string;
  name: string;
  ops_per_s: number;
  ns_per_op: number;
  rme_percent: number;
  samples: number;
}

export type Loaded = { ctor: TlsfHeapCtor; from: string } | { skipped: string };

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

function runSuite(
  suiteName: string,
  cases: Array<[string, () => void]>,
  log: (l: string) => void,
  maxTime: number,
): MicroResult[] {
  const out: MicroResult[] = [];
  const suite = new Benchmark.Suite(suiteName);
  for (const [name, fn] of cases) suite.add(name, fn, { maxTime, minSamples: 5 });
  suite.on('cycle', (ev: Benchmark.Event) => {
    const b = ev.target as unknown as Benchmark;
    if (b.error) {
      log(`  ${String(b.name)}: error ${String(b.error)}`);
      return;
    }
    const r: MicroResult = {
      suite: suiteName,
      name: String(b.name),
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
  return out;
}

/** The TLSF suite; `maxTime` seconds per case (benchmark.js keeps sampling until then). */
export function tlsfCases(Heap: TlsfHeapCtor): Array<[string, () => void]> {
  const heap = new Heap(256 * 1024 * 1024);
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
    throw new Error(`TlsfHeap.${what} returned null`);
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
  readonly outDir?: string;
  readonly write?: boolean;
  readonly log?: (line: string) => void;
  /** Injected for tests. */
  readonly loadTlsf?: () => Promise<Loaded>;
}

export async function micro(
  opts: MicroOptions = {},
): Promise<{ results: MicroResult[]; skipped: string[] }> {
  const log = opts.log ?? ((l: string) => process.stdout.write(`${l}\n`));
  const skipped: string[] = [];
  const results: MicroResult[] = [];
  const maxTime = opts.quick ? 0.25 : 2;
  log(`benchmark.js ${Benchmark.version}, ${maxTime} s per case`);
  const tlsf = await (opts.loadTlsf ?? loadTlsfHeap)();
  if ('skipped' in tlsf) {
    log(`tlsf: ${tlsf.skipped}`);
    skipped.push(`tlsf: ${tlsf.skipped}`);
  } else {
    log(`tlsf: TlsfHeap from ${tlsf.from}, one 256 MiB heap`);
    results.push(...runSuite('tlsf', tlsfCases(tlsf.ctor), log, maxTime));
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
  return { results, skipped };
}
