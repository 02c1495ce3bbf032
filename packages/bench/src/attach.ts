/**
 * `heaphook-bench attach`: what `heaphook record -p` costs the process it attaches to.
 *
 * The target (native/attach/pause_probe.c, built here with cc) runs a tight malloc/free loop on
 * its main thread and prints, every 100 ms, how many units it did and the longest gap between
 * two of them. Each run: 1 s untraced, the attach (heaphook-inject + the collector, as
 * `record -p` does it), 1 s traced, the detach, 1 s untraced again. From the periods:
 *   - the loop's throughput traced and after the detach, as ratios to the untraced one;
 *   - the pause the attach and the detach cause: the longest gap of the periods they overlap
 *     (ms), next to the longest gap of the untraced phase;
 *   - the wall time of the attach and of the detach (ms).
 * Two targets: "idle" (a second thread sleeps in nanosleep: the injector takes it and the loop
 * only sees the GOT patching) and "alone" (the loop is the only thread: the injector must stop
 * it for the dlopen). Runs of the two interleave; the figures are medians over the runs.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { attachRunning } from '@heaphook/heaptrack';

import { defaultOutDirs, packageDir } from './paths.js';

export type AttachTarget = 'idle' | 'alone';

export interface AttachRow {
  readonly target: AttachTarget;
  readonly runs: number;
  /** Units per second of the untraced loop. */
  readonly untracedPerSecond: number;
  /** Throughput traced / untraced. */
  readonly tracedRatio: number;
  /** Throughput after the detach / untraced. */
  readonly detachedRatio: number;
  /** Longest gap between two units of the untraced phase, ms. */
  readonly untracedGapMs: number;
  /** Longest gap in the periods the attach overlaps, ms. */
  readonly attachPauseMs: number;
  readonly detachPauseMs: number;
  /** Wall time of the attach (inject + handshake) and of the detach, ms. */
  readonly attachMs: number;
  readonly detachMs: number;
}

interface Period {
  readonly end: number; // ns, CLOCK_MONOTONIC (process.hrtime's clock)
  readonly units: number;
  readonly gap: number; // ns
}

const PERIOD_NS = 100e6;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
}

const now = (): number => Number(process.hrtime.bigint());
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function buildProbe(dir: string): string {
  const out = join(dir, 'pause_probe');
  const src = join(packageDir, 'native', 'attach', 'pause_probe.c');
  const r = spawnSync('cc', ['-O2', '-fno-builtin', '-pthread', '-o', out, src], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`cannot build ${src}: ${r.stderr || String(r.error)}`);
  return out;
}

/** The periods that end within [from, to]. */
function within(periods: readonly Period[], from: number, to: number): Period[] {
  return periods.filter((p) => p.end - PERIOD_NS >= from && p.end <= to);
}

/** The periods that overlap [from, to]. */
function overlapping(periods: readonly Period[], from: number, to: number): Period[] {
  return periods.filter((p) => p.end >= from && p.end - PERIOD_NS <= to);
}

const rate = (ps: readonly Period[]): number =>
  ps.reduce((n, p) => n + p.units, 0) / Math.max(1, ps.length);
const longest = (ps: readonly Period[]): number => Math.max(0, ...ps.map((p) => p.gap)) / 1e6;

interface RunFigures {
  readonly untraced: number;
  readonly traced: number;
  readonly detached: number;
  readonly untracedGapMs: number;
  readonly attachPauseMs: number;
  readonly detachPauseMs: number;
  readonly attachMs: number;
  readonly detachMs: number;
}

async function oneRun(probe: string, target: AttachTarget, logs: string): Promise<RunFigures> {
  const child = spawn(probe, [target], { stdio: ['ignore', 'pipe', 'inherit'] });
  const periods: Period[] = [];
  let ready: () => void = () => {};
  const started = new Promise<void>((r) => (ready = r));
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.startsWith('ready')) return ready();
    const [end, units, gap] = line.split(' ').map(Number);
    periods.push({ end: end!, units: units!, gap: gap! });
  });
  const ended = new Promise<void>((r) => child.on('close', () => r()));
  try {
    await started;
    await sleep(1200);
    const attachStart = now();
    const recording = await attachRunning([child.pid ?? 0], { outputDir: logs, quiet: true });
    const attachEnd = now();
    await sleep(1000);
    const detachStart = now();
    await recording.stop();
    const detachEnd = now();
    await sleep(1000);
    const end = now();
    const untraced = within(periods, attachStart - 1e9, attachStart);
    return {
      untraced: rate(untraced),
      traced: rate(within(periods, attachEnd + PERIOD_NS, detachStart)),
      detached: rate(within(periods, detachEnd + PERIOD_NS, end)),
      untracedGapMs: longest(untraced),
      attachPauseMs: longest(overlapping(periods, attachStart, attachEnd)),
      detachPauseMs: longest(overlapping(periods, detachStart, detachEnd)),
      attachMs: (attachEnd - attachStart) / 1e6,
      detachMs: (detachEnd - detachStart) / 1e6,
    };
  } finally {
    child.kill('SIGTERM');
    await ended;
  }
}

export interface AttachBenchOptions {
  readonly runs?: number;
  /** Write <outDir>/latest.json (default true; default outDir: packages/bench/out/attach). */
  readonly write?: boolean;
  readonly outDir?: string;
}

export async function attachBench(options: AttachBenchOptions = {}): Promise<AttachRow[]> {
  const runs = options.runs ?? 5;
  const scratch = mkdtempSync(join(tmpdir(), 'heaphook-bench-attach-'));
  try {
    const probe = buildProbe(scratch);
    const targets: AttachTarget[] = ['idle', 'alone'];
    const figures = new Map<AttachTarget, RunFigures[]>(targets.map((t) => [t, []]));
    for (let run = 0; run < runs; run++) {
      for (const target of run % 2 === 0 ? targets : [...targets].reverse()) {
        const logs = join(scratch, `logs-${target}-${run}`);
        figures.get(target)!.push(await oneRun(probe, target, logs));
        rmSync(logs, { recursive: true, force: true });
      }
    }
    const rows = targets.map((target): AttachRow => {
      const f = figures.get(target)!;
      const m = (pick: (r: RunFigures) => number): number => median(f.map(pick));
      return {
        target,
        runs,
        untracedPerSecond: m((r) => r.untraced) * (1e9 / PERIOD_NS),
        tracedRatio: m((r) => r.traced / r.untraced),
        detachedRatio: m((r) => r.detached / r.untraced),
        untracedGapMs: m((r) => r.untracedGapMs),
        attachPauseMs: m((r) => r.attachPauseMs),
        detachPauseMs: m((r) => r.detachPauseMs),
        attachMs: m((r) => r.attachMs),
        detachMs: m((r) => r.detachMs),
      };
    });
    if (options.write !== false) {
      const dir = options.outDir ?? defaultOutDirs.attach;
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(rows, null, 2)}\n`);
    }
    return rows;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function formatAttach(rows: readonly AttachRow[]): string {
  const head =
    'target  untraced units/s  traced  detached  gap untraced  attach: pause / wall  detach: pause / wall\n';
  const f = (x: number, d = 2): string => x.toFixed(d);
  return (
    head +
    rows
      .map(
        (r) =>
          `${r.target.padEnd(6)}  ${f(r.untracedPerSecond / 1e6, 1).padStart(11)} M    ${f(r.tracedRatio).padStart(5)}x  ${f(r.detachedRatio).padStart(7)}x  ${f(r.untracedGapMs).padStart(9)} ms  ${f(r.attachPauseMs).padStart(8)} / ${f(r.attachMs, 1)} ms  ${f(r.detachPauseMs).padStart(8)} / ${f(r.detachMs, 1)} ms`,
      )
      .join('\n') +
    `\n(medians of ${rows[0]?.runs ?? 0} interleaved runs; ratios are throughput / untraced)\n`
  );
}
