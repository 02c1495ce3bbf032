/**
 * `heaphook-bench report-throughput` (nx: `nx run bench:report-throughput`): how fast heaphook
 * reads back a large trace, next to KDE heaptrack's heaptrack_print on a trace of the same
 * program, and whether its memory stays flat as the log grows.
 *
 * 1. Records the churn workload (wl_churn, two events per operation) with heaphook's heaptrack
 *    at 1x, 2x and 4x a size (4x: the timed log, 10M+ events by default), with KDE heaptrack
 *    at 4x, and a one-operation log that gives the fixed start-up/exit allocations.
 * 2. Times, interleaved and repeated (each run a process of its own under hh-run, which gives
 *    wall time and the child's peak RSS): heaphook's report pass (buildReportModel: decode +
 *    every figure of the report, the events replayed natively), `heaphook report --json`, and
 *    `heaptrack_print` on the KDE trace.
 * 3. The native report pass's peak RSS on the 1x, 2x, 4x logs.
 * 4. The churn figures side by side (issue 38): the heaplog's size against KDE's .zst, the CPU
 *    time (user + sys, children included) of `report --json` against heaptrack_print's, and
 *    the tracing cost with stacks against KDE heaptrack's: the 4x churn run untraced, under
 *    heaphook's heaptrack and under KDE heaptrack, interleaved with the timings of step 2.
 * Writes latest.{json,md} into packages/bench/out/report-throughput (ignored by git) or --out.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

import { tracerLibraryPath } from '@heaphook/heaptrack';

import { lastJsonLine } from './launcher.js';
import { machineInfo, type MachineInfo } from './machine.js';
import { assertBuilt, defaultOutDirs, launcherPath, nativeProgram, packageDir } from './paths.js';
import { stat } from './stats.js';
import type { LauncherReport, Stat } from './types.js';

/** The `heaphook` executable of the installed @heaphook/core (its package.json's bin). */
function heaphookExecutable(): string {
  const manifest = createRequire(import.meta.url).resolve('@heaphook/core/package.json');
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: { heaphook: string } };
  return resolve(dirname(manifest), bin.heaphook);
}

export const THROUGHPUT_SCHEMA = 'heaphook-report-throughput/3';

export interface ThroughputOptions {
  /** Small logs, 1 run: the test's smoke run. */
  readonly quick?: boolean;
  /** Interleaved repetitions of each timed tool (default 5; 1 with quick). */
  readonly runs?: number;
  /** Churn operations of the 1x log (2 events each; default 1,250,000 -> 4x = 10M events). */
  readonly size?: number;
  /** Output folder (default packages/bench/out/report-throughput). */
  readonly outDir?: string;
  readonly write?: boolean;
  readonly log?: (line: string) => void;
}

export interface ToolResult {
  readonly tool: string;
  readonly status: 'ok' | 'skipped' | 'failed';
  readonly reason?: string;
  readonly description: string;
  /** Wall time of the whole process (s), over the runs. */
  readonly wall_s?: Stat;
  /** CPU time of the process and the children it waited for (user + sys, s), over the runs. */
  readonly cpu_s?: Stat;
  /** Peak RSS of the process (bytes), over the runs. */
  readonly peak_rss_bytes?: Stat;
  /** Events of the 4x log per second of wall time (median). */
  readonly events_per_s?: number;
}

export interface MemoryPoint {
  readonly scale: number;
  readonly events: number;
  readonly log_bytes: number;
  readonly peak_rss_bytes: number;
}

export interface ThroughputResults {
  readonly schema: typeof THROUGHPUT_SCHEMA;
  readonly date: string;
  readonly command: string;
  readonly profile: 'quick' | 'default';
  readonly runs: number;
  readonly machine: MachineInfo;
  readonly workload: {
    readonly program: string;
    readonly size: number;
    /** Operations the workload reported for the 4x log (one malloc + one free each... x2). */
    readonly events_reported: number;
    /** Events of a one-operation run less its 2: the program's own start-up/exit calls. */
    readonly fixed_events: number;
  };
  readonly log: {
    readonly bytes: number;
    readonly events_decoded: number;
    /** events_decoded - fixed_events: must equal events_reported. */
    readonly workload_events_decoded: number;
  };
  readonly kde_trace?: { readonly bytes: number; readonly version?: string };
  /** Time inside buildReportModel() (native pass, no process start-up), median, and events/s. */
  readonly decode: { readonly ms: Stat; readonly events_per_s: number };
  readonly tools: ToolResult[];
  /** heaptrack_print wall time / heaphook's (native report pass, and report --json), medians. */
  readonly speedup: { readonly model?: number; readonly report?: number };
  readonly memory: MemoryPoint[];
  /** The three churn figures of the 4x log, side by side; undefined parts: KDE heaptrack is
   * not installed. */
  readonly churn: ChurnFigures;
}

/** A traced or untraced run of the 4x churn workload: wall and CPU time (s), over the runs. */
export interface TracingRun {
  readonly wall_s: Stat;
  readonly cpu_s: Stat;
}

export interface ChurnFigures {
  /** heaplog bytes / KDE .zst bytes (goal: at most 1.0). */
  readonly log_size_ratio?: number;
  /** CPU time of `heaphook report --json` / heaptrack_print's, medians (goal: at most 0.5). */
  readonly report_cpu_ratio?: number;
  readonly tracing: {
    readonly untraced: TracingRun;
    /** heaphook's heaptrack with stacks (the default). */
    readonly heaphook: TracingRun;
    readonly kde?: TracingRun;
    /** heaphook's slowdown over the untraced run (traced / untraced - 1, wall medians) as a
     * share of KDE heaptrack's (goal: at most 1/3). */
    readonly share_of_kde?: number;
    /** The same share on CPU time (the tracer's threads and collector included). */
    readonly cpu_share_of_kde?: number;
  };
}

interface Measured {
  report: LauncherReport;
  stdout: string;
  stderr: string;
}

/** Runs a command under hh-run: its output and the kernel's figures (wall, peak RSS). */
async function measure(
  cmd: string,
  args: readonly string[],
  env: Record<string, string> = {},
  cwd?: string,
  timeoutS = 900,
): Promise<Measured> {
  const hh = ['--timeout', String(timeoutS)];
  if (cwd) hh.push('--cwd', cwd);
  for (const [k, v] of Object.entries(env)) hh.push('--env', `${k}=${v}`);
  const base = { ...process.env };
  delete base.LD_PRELOAD;
  const child = spawn(launcherPath, [...hh, '--', cmd, ...args], {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    env: base,
  });
  let stdout = '';
  let stderr = '';
  let rep = '';
  child.stdout!.on('data', (d: Buffer) => {
    if (stdout.length < 1 << 22) stdout += d.toString('utf8');
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString('utf8')).slice(-16384);
  });
  (child.stdio[3] as NodeJS.ReadableStream).on('data', (d: Buffer) => {
    rep += d.toString('utf8');
  });
  await new Promise<void>((done) => child.on('close', () => done()));
  let report: LauncherReport;
  try {
    report = JSON.parse(rep.trim()) as LauncherReport;
  } catch {
    throw new Error(`hh-run reported nothing for ${cmd}: ${stderr.trim()}`);
  }
  return { report, stdout, stderr };
}

function ok(m: Measured, what: string): void {
  const r = m.report;
  if (r.exec_errno !== 0 || r.exit_code !== 0 || r.signal !== 0 || r.timed_out) {
    const last = m.stderr.trim().split('\n').at(-1) ?? '';
    throw new Error(
      `${what} failed (exit ${r.exit_code}, signal ${r.signal}${r.timed_out ? ', timed out' : ''}): ${last}`,
    );
  }
}

function findOnPath(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = join(dir, cmd);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

/** Records churn --size n with heaphook's heaptrack; returns the log and the reported ops. */
async function recordHeaphook(
  dir: string,
  size: number,
): Promise<{ log: string; ops: number; m: Measured }> {
  mkdirSync(dir, { recursive: true });
  const m = await measure(
    nativeProgram('wl_churn'),
    ['--size', String(size)],
    { LD_PRELOAD: tracerLibraryPath(), HEAPHOOK_LOG_DIR: dir },
    dir,
  );
  ok(m, `wl_churn --size ${size} under heaphook's heaptrack`);
  const logs = readdirSync(dir).filter((f) => /^heaplog\.\d+\.log$/.test(f));
  if (logs.length !== 1) throw new Error(`expected one heaplog in ${dir}, found ${logs.length}`);
  const reported = lastJsonLine(m.stdout);
  const ops = Number(reported?.ops);
  if (!Number.isInteger(ops)) throw new Error(`wl_churn printed no ops count: ${m.stdout}`);
  return { log: join(dir, logs[0]!), ops, m };
}

function median(xs: readonly number[]): number {
  return stat(xs).median;
}

const fmtS = (s: Stat): string =>
  `${s.median.toFixed(2)} s (${s.min.toFixed(2)}-${s.max.toFixed(2)})`;
const fmtMiB = (b: number): string => `${(b / 1048576).toFixed(0)} MiB`;
const fmtX = (x: number | undefined): string => (x === undefined ? 'n/a' : `${x.toFixed(2)}`);
const cpuOf = (r: LauncherReport): number => (r.utime_us + r.stime_us) / 1e6;
const fmtRun = (t: TracingRun | undefined): string =>
  t === undefined ? 'skipped' : `${fmtS(t.wall_s)} wall, ${fmtS(t.cpu_s)} CPU`;

/** The three churn figures as markdown lines. */
export function formatChurn(r: ThroughputResults): string[] {
  const c = r.churn;
  const t = c.tracing;
  const print = r.tools.find((x) => x.tool === 'heaptrack_print');
  const rep = r.tools[1];
  return [
    `### Churn figures side by side (wl_churn --size ${4 * r.workload.size}, ${fmtM(r.log.events_decoded)} events)`,
    '',
    '| figure | heaphook | KDE heaptrack | ratio | goal |',
    '| --- | --- | --- | --- | --- |',
    `| log size | ${(r.log.bytes / 1e6).toFixed(2)} MB | ${r.kde_trace ? `${(r.kde_trace.bytes / 1e6).toFixed(2)} MB` : 'n/a'} | ${fmtX(c.log_size_ratio)} | at most 1.0 |`,
    `| read CPU (user+sys): report --json vs heaptrack_print | ${rep?.cpu_s ? fmtS(rep.cpu_s) : 'n/a'} | ${print?.cpu_s ? fmtS(print.cpu_s) : 'n/a'} | ${fmtX(c.report_cpu_ratio)} | at most 0.5 |`,
    `| tracing slowdown with stacks (traced / untraced, wall) | ${(t.heaphook.wall_s.median / t.untraced.wall_s.median).toFixed(2)}x | ${t.kde ? `${(t.kde.wall_s.median / t.untraced.wall_s.median).toFixed(2)}x` : 'n/a'} | ${fmtX(t.share_of_kde)} of KDE's (CPU: ${fmtX(t.cpu_share_of_kde)}) | at most 0.33 |`,
    '',
    `Churn untraced: ${fmtRun(t.untraced)}; under heaphook: ${fmtRun(t.heaphook)}; under KDE heaptrack: ${fmtRun(t.kde)}.`,
  ];
}
const fmtM = (n: number): string => `${(n / 1e6).toFixed(2)} M`;

export function formatThroughput(r: ThroughputResults): string {
  const lines = [
    `## Report throughput (${r.date.slice(0, 10)}, ${r.profile}, ${r.runs} interleaved runs)`,
    '',
    `Log: wl_churn --size ${4 * r.workload.size}: ${fmtM(r.log.events_decoded)} events decoded (${r.log.workload_events_decoded} from the loop = ${r.workload.events_reported} reported), heaplog ${(r.log.bytes / 1e6).toFixed(1)} MB` +
      (r.kde_trace ? `, KDE trace ${(r.kde_trace.bytes / 1e6).toFixed(1)} MB.` : '.'),
    `Load average ${r.machine.loadavg_start.toFixed(2)} at the start, ${(r.machine.loadavg_end ?? 0).toFixed(2)} at the end, ${r.machine.logical_cpus} CPUs.`,
    '',
    '| tool | wall, median (min-max) | CPU (user+sys), median | events/s | peak RSS, median (max) |',
    '| --- | --- | --- | --- | --- |',
  ];
  for (const t of r.tools) {
    if (t.status !== 'ok') {
      lines.push(`| ${t.tool} | ${t.status}: ${t.reason ?? ''} | | | |`);
      continue;
    }
    lines.push(
      `| ${t.tool} | ${fmtS(t.wall_s!)} | ${fmtS(t.cpu_s!)} | ${fmtM(t.events_per_s!)} | ${fmtMiB(t.peak_rss_bytes!.median)} (${fmtMiB(t.peak_rss_bytes!.max)}) |`,
    );
  }
  lines.push(
    '',
    `Inside buildReportModel() (native pass, no process start-up): ${r.decode.ms.median.toFixed(0)} ms median = ${fmtM(r.decode.events_per_s)} events/s.`,
    `heaptrack_print time / heaphook's: report model ${r.speedup.model?.toFixed(2) ?? 'n/a'}x, report --json ${r.speedup.report?.toFixed(2) ?? 'n/a'}x (above 1: heaphook faster; goal 3x).`,
    '',
    '| log length | events | heaplog | report model (native) peak RSS |',
    '| --- | --- | --- | --- |',
    ...r.memory.map(
      (m) =>
        `| ${m.scale}x | ${fmtM(m.events)} | ${(m.log_bytes / 1e6).toFixed(1)} MB | ${fmtMiB(m.peak_rss_bytes)} |`,
    ),
    '',
    ...formatChurn(r),
  );
  return lines.join('\n');
}

export async function reportThroughput(o: ThroughputOptions = {}): Promise<ThroughputResults> {
  assertBuilt();
  const say = o.log ?? ((s: string) => process.stderr.write(`${s}\n`));
  const quick = o.quick === true;
  const runs = o.runs ?? (quick ? 1 : 5);
  const size = o.size ?? (quick ? 20_000 : 1_250_000);
  const loadStart = loadavg()[0]!;
  const work = mkdtempSync(join(tmpdir(), 'hh-report-throughput-'));
  try {
    // 1. The logs.
    say(`recording wl_churn at --size ${size}, ${2 * size}, ${4 * size} and 1 ...`);
    const fixedRun = await recordHeaphook(join(work, 'x0'), 1);
    const byScale = new Map<number, { log: string; ops: number }>();
    for (const scale of [1, 2, 4])
      byScale.set(scale, await recordHeaphook(join(work, `x${scale}`), scale * size));
    const main = byScale.get(4)!;
    const child = join(packageDir, 'dist', 'reportthroughput-child.js');
    const decodeOnce = async (
      log: string,
    ): Promise<{ m: Measured; events: number; ms: number }> => {
      const m = await measure(process.execPath, [child, log]);
      ok(m, `report model of ${log}`);
      const j = lastJsonLine(m.stdout);
      return { m, events: Number(j?.events), ms: Number(j?.decode_ms) };
    };
    const fixed = (await decodeOnce(fixedRun.log)).events - fixedRun.ops;

    const kde = findOnPath('heaptrack');
    const kdePrint = findOnPath('heaptrack_print');
    let kdeTrace: string | undefined;
    let kdeReason: string | undefined;
    if (kde && kdePrint) {
      say('recording the same program with KDE heaptrack ...');
      const dir = join(work, 'kde');
      mkdirSync(dir);
      const m = await measure(
        kde,
        ['-o', join(dir, 'trace'), nativeProgram('wl_churn'), '--size', String(4 * size)],
        {},
        dir,
      );
      ok(m, 'KDE heaptrack');
      const f = readdirSync(dir).find((n) => n.startsWith('trace'));
      if (f) kdeTrace = join(dir, f);
      else kdeReason = 'KDE heaptrack wrote no trace';
    } else kdeReason = 'install heaptrack (Debian package; tools/install-system-packages.sh)';

    const heaphookBin = heaphookExecutable();
    const hasReport =
      spawnSync(process.execPath, [heaphookBin, 'report', '--help'], { encoding: 'utf8' })
        .status === 0;
    const reportArgs = hasReport ? ['report', main.log, '--json'] : ['dump', '--summary', main.log];

    // 2. Interleaved timings.
    interface Tool {
      name: string;
      description: string;
      run?: () => Promise<Measured>;
      reason?: string;
      /** A run of the workload (traced or not), reported in `churn`, not in `tools`. */
      tracing?: boolean;
    }
    const decodeMs: number[] = [];
    let eventsDecoded = 0;
    const tools: Tool[] = [
      {
        name: 'heaphook report model (native pass)',
        description:
          'buildReportModel() of @heaphook/heaptrack in a node process: decode + every figure of the report, events replayed by heaplog_addon.node',
        run: async () => {
          const d = await decodeOnce(main.log);
          decodeMs.push(d.ms);
          eventsDecoded = d.events;
          return d.m;
        },
      },
      {
        name: hasReport ? 'heaphook report --json' : 'heaphook dump --summary',
        description: `heaphook ${reportArgs[0]} (symbolised, text/JSON only)`,
        run: async () => {
          const m = await measure(process.execPath, [heaphookBin, ...reportArgs]);
          ok(m, `heaphook ${reportArgs[0]}`);
          return m;
        },
      },
      {
        name: 'heaptrack_print',
        description:
          'KDE heaptrack_print on the KDE trace of the same program (default text report)',
        ...(kdeTrace && kdePrint
          ? {
              run: async () => {
                const m = await measure(kdePrint, [kdeTrace!]);
                ok(m, 'heaptrack_print');
                return { ...m, stdout: '' };
              },
            }
          : { reason: kdeReason ?? 'no KDE trace' }),
      },
    ];
    // The tracing cost: the 4x churn run untraced, under heaphook's heaptrack (stacks, the
    // default) and under KDE heaptrack, each run in a fresh folder that is removed after it.
    const churnArgs = ['--size', String(4 * size)];
    let traceRun = 0;
    const traced = async (what: string, run: (dir: string) => Promise<Measured>) => {
      const dir = join(work, `trace-${traceRun++}`);
      mkdirSync(dir);
      try {
        const m = await run(dir);
        ok(m, what);
        return { ...m, stdout: '' };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    const UNTRACED = 'wl_churn untraced';
    const UNDER_HEAPHOOK = "wl_churn under heaphook's heaptrack (stacks)";
    const UNDER_KDE = 'wl_churn under KDE heaptrack';
    tools.push(
      {
        name: UNTRACED,
        tracing: true,
        description: `wl_churn ${churnArgs.join(' ')} with glibc, no tracer`,
        run: () =>
          traced(UNTRACED, (dir) => measure(nativeProgram('wl_churn'), churnArgs, {}, dir)),
      },
      {
        name: UNDER_HEAPHOOK,
        tracing: true,
        description: "the same run under heaphook's heaptrack (LD_PRELOAD, call stacks)",
        run: () =>
          traced(UNDER_HEAPHOOK, (dir) =>
            measure(
              nativeProgram('wl_churn'),
              churnArgs,
              { LD_PRELOAD: tracerLibraryPath(), HEAPHOOK_LOG_DIR: dir },
              dir,
            ),
          ),
      },
      {
        name: UNDER_KDE,
        tracing: true,
        description: 'the same run under KDE heaptrack (heaptrack -o FILE)',
        ...(kde
          ? {
              run: () =>
                traced(UNDER_KDE, (dir) =>
                  measure(kde, ['-o', join(dir, 'trace'), nativeProgram('wl_churn'), ...churnArgs]),
                ),
            }
          : { reason: kdeReason ?? 'no KDE heaptrack' }),
      },
    );
    const walls = new Map<string, number[]>();
    const cpus = new Map<string, number[]>();
    const rss = new Map<string, number[]>();
    for (let rep = 0; rep < runs; rep++) {
      // Rotate the order so that no tool always runs first (or right after another).
      for (let i = 0; i < tools.length; i++) {
        const t = tools[(i + rep) % tools.length]!;
        if (!t.run) continue;
        say(`run ${rep + 1}/${runs}: ${t.name}`);
        const m = await t.run();
        (walls.get(t.name) ?? walls.set(t.name, []).get(t.name)!).push(m.report.wall_ns / 1e9);
        (cpus.get(t.name) ?? cpus.set(t.name, []).get(t.name)!).push(cpuOf(m.report));
        (rss.get(t.name) ?? rss.set(t.name, []).get(t.name)!).push(m.report.maxrss_kb * 1024);
      }
    }
    const toolResults: ToolResult[] = tools
      .filter((t) => t.tracing !== true)
      .map((t) => {
        const w = walls.get(t.name);
        if (!t.run || !w)
          return {
            tool: t.name,
            status: 'skipped',
            reason: t.reason ?? '',
            description: t.description,
          };
        const ws = stat(w);
        return {
          tool: t.name,
          status: 'ok',
          description: t.description,
          wall_s: ws,
          cpu_s: stat(cpus.get(t.name)!),
          peak_rss_bytes: stat(rss.get(t.name)!),
          events_per_s: eventsDecoded / ws.median,
        };
      });

    // 3. Memory against log length.
    const memory: MemoryPoint[] = [];
    for (const scale of [1, 2, 4]) {
      const { log } = byScale.get(scale)!;
      const d = await decodeOnce(log);
      memory.push({
        scale,
        events: d.events,
        log_bytes: statSync(log).size,
        peak_rss_bytes: d.m.report.maxrss_kb * 1024,
      });
    }

    const wall = (name: string): number | undefined => {
      const w = walls.get(name);
      return w ? median(w) : undefined;
    };
    const printS = wall('heaptrack_print');
    const sumS = wall(tools[0]!.name);
    const repS = wall(tools[1]!.name);
    const ms = stat(decodeMs);
    const runOf = (name: string): TracingRun | undefined => {
      const w = walls.get(name);
      const c = cpus.get(name);
      return w && c ? { wall_s: stat(w), cpu_s: stat(c) } : undefined;
    };
    const untraced = runOf(UNTRACED)!;
    const underHeaphook = runOf(UNDER_HEAPHOOK)!;
    const underKde = runOf(UNDER_KDE);
    const slowdown = (t: TracingRun, of: 'wall_s' | 'cpu_s'): number =>
      t[of].median / untraced[of].median - 1;
    const printCpu = runOf('heaptrack_print')?.cpu_s.median;
    const reportCpu = runOf(tools[1]!.name)?.cpu_s.median;
    const churn: ChurnFigures = {
      ...(kdeTrace ? { log_size_ratio: statSync(main.log).size / statSync(kdeTrace).size } : {}),
      ...(printCpu && reportCpu ? { report_cpu_ratio: reportCpu / printCpu } : {}),
      tracing: {
        untraced,
        heaphook: underHeaphook,
        ...(underKde
          ? {
              kde: underKde,
              share_of_kde: slowdown(underHeaphook, 'wall_s') / slowdown(underKde, 'wall_s'),
              cpu_share_of_kde: slowdown(underHeaphook, 'cpu_s') / slowdown(underKde, 'cpu_s'),
            }
          : {}),
      },
    };
    const results: ThroughputResults = {
      schema: THROUGHPUT_SCHEMA,
      date: new Date().toISOString(),
      command: ['report-throughput', ...process.argv.slice(3)].join(' '),
      profile: quick ? 'quick' : 'default',
      runs,
      machine: { ...machineInfo(), loadavg_start: loadStart, loadavg_end: loadavg()[0]! },
      workload: {
        program: 'wl_churn',
        size,
        events_reported: main.ops,
        fixed_events: fixed,
      },
      log: {
        bytes: statSync(main.log).size,
        events_decoded: eventsDecoded,
        workload_events_decoded: eventsDecoded - fixed,
      },
      ...(kdeTrace ? { kde_trace: { bytes: statSync(kdeTrace).size } } : {}),
      decode: { ms, events_per_s: eventsDecoded / (ms.median / 1000) },
      tools: toolResults,
      speedup: {
        ...(printS && sumS ? { model: printS / sumS } : {}),
        ...(printS && repS ? { report: printS / repS } : {}),
      },
      memory,
      churn,
    };
    if (o.write !== false) {
      const out = o.outDir ?? defaultOutDirs['report-throughput'];
      mkdirSync(out, { recursive: true });
      writeFileSync(join(out, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
      writeFileSync(join(out, 'latest.md'), `${formatThroughput(results)}\n`);
    }
    return results;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
