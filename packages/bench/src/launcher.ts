/**
 * Runs one workload under one allocator through hh-run (native/launcher/hh-run.c), which
 * forks the command with the allocator's environment, waits for it with wait4() and reports
 * the child's rusage (wall, CPU, peak RSS, page faults) on fd 3. The workload's own figures are
 * the JSON object on the last JSON line of its stdout.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';

import { decodeLogColumns, OPS } from '@heaphook/heaptrack';

import { allocatorEnv } from './allocators.js';
import { launcherPath } from './paths.js';
import type { Allocator, LauncherReport, RunRecord, Workload } from './types.js';

export interface RunOptions {
  /** Seconds before the run is killed and counted as a timeout. */
  readonly timeoutS: number;
  /** Parent folder of the per-run scratch folders (the run's cwd; tracers write there). */
  readonly scratchRoot: string;
  readonly launcher?: string;
  /** Count the calls in the heaplogs the run leaves (RunRecord.trace_calls). */
  readonly countTraceCalls?: boolean;
}

const signalNames = new Map<number, string>();
for (const [name, num] of Object.entries(constants.signals))
  if (!signalNames.has(num)) signalNames.set(num, name); // SIGABRT before SIGIOT

export function signalName(sig: number): string {
  return signalNames.get(sig) ?? `signal ${sig}`;
}

/** The last line of `text` that is a JSON object, parsed; null when there is none. */
export function lastJsonLine(text: string): Record<string, unknown> | null {
  const lines = text.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim();
    if (!line.startsWith('{') || !line.endsWith('}')) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (typeof v === 'object' && v !== null && !Array.isArray(v))
        return v as Record<string, unknown>;
    } catch {
      /* not JSON: keep looking */
    }
  }
  return null;
}

function tail(text: string, lines = 12): string {
  return text
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .slice(-lines)
    .join('\n');
}

/** The most telling line of a failed run's stderr. */
function reasonFrom(stderr: string): string | undefined {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  return lines.find((l) => l.includes('verification failed')) ?? lines.at(-1);
}

export interface Classified {
  status: RunRecord['status'];
  error?: string;
  reported: Record<string, unknown> | null;
}

/** Decides whether a run passed, from what the launcher and the workload printed. Pure. */
export function classifyRun(
  report: LauncherReport | null,
  stdout: string,
  stderr: string,
  timeoutS: number,
): Classified {
  const reported = lastJsonLine(stdout);
  if (report === null) {
    return {
      status: 'failed',
      error: `the launcher reported nothing${stderr ? `: ${reasonFrom(stderr)}` : ''}`,
      reported,
    };
  }
  if (report.exec_errno !== 0) {
    return {
      status: 'failed',
      error: reasonFrom(stderr) ?? `cannot start the program (errno ${report.exec_errno})`,
      reported,
    };
  }
  if (report.timed_out)
    return { status: 'timeout', error: `timed out after ${timeoutS} s`, reported };
  if (report.signal !== 0) {
    const why = reasonFrom(stderr);
    return {
      status: 'failed',
      error: `killed by ${signalName(report.signal)}${why ? `: ${why}` : ''}`,
      reported,
    };
  }
  if (report.exit_code !== 0) {
    const why = reasonFrom(stderr);
    return {
      status: 'failed',
      error: `exit code ${report.exit_code}${why ? `: ${why}` : ''}`,
      reported,
    };
  }
  if (reported === null)
    return { status: 'failed', error: 'no result line (JSON) on stdout', reported };
  if (reported.ok !== true)
    return { status: 'failed', error: `the workload reported ok=${String(reported.ok)}`, reported };
  return { status: 'ok', reported };
}

const OP_REALLOC_DONE = OPS.indexOf('realloc_done');

/**
 * Allocation-family calls in the heaplogs of a folder: every event but realloc's completion
 * record. A damaged log counts what decodes before the damage.
 */
export async function heaplogCalls(dir: string): Promise<number> {
  let calls = 0;
  for (const entry of readdirSync(dir)) {
    if (!/^heaplog\..*\.log$/.test(entry)) continue;
    try {
      for await (const batch of decodeLogColumns(join(dir, entry), { reuseColumns: true })) {
        const { op, length } = batch.events;
        for (let k = 0; k < length; k++) if (op[k] !== OP_REALLOC_DONE) calls++;
      }
    } catch {
      // the part before the damage is counted
    }
  }
  return calls;
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    total += entry.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return total;
}

/** The command line hh-run is given for this run (exported for tests and the JSON record). */
export function launcherArgs(
  w: Workload,
  a: Allocator,
  scratch: string,
  timeoutS: number,
): string[] {
  const args = ['--timeout', String(timeoutS), '--cwd', scratch];
  const env = { ...w.env, ...allocatorEnv(a, w) };
  for (const [k, v] of Object.entries(env)) args.push('--env', `${k}=${v}`);
  args.push(
    '--',
    ...(a.wrap ?? []).map((s) => s.replaceAll('{dir}', scratch)),
    w.command,
    ...w.args,
  );
  return args;
}

export async function runOne(
  seq: number,
  rep: number,
  w: Workload,
  a: Allocator,
  opts: RunOptions,
): Promise<RunRecord> {
  const scratch = mkdtempSync(
    join(opts.scratchRoot, `${w.name}.${a.name}.`.replace(/[^A-Za-z0-9_.+-]/g, '_')),
  );
  const args = launcherArgs(w, a, scratch, opts.timeoutS);
  const env = { ...process.env };
  delete env.LD_PRELOAD; // hh-run itself never runs under an allocator being measured
  const child = spawn(opts.launcher ?? launcherPath, args, {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    env,
  });
  const out: Buffer[] = [];
  let outBytes = 0;
  let err = '';
  let rep3 = '';
  child.stdout!.on('data', (d: Buffer) => {
    if (outBytes < 4 << 20) {
      out.push(d);
      outBytes += d.length;
    }
  });
  child.stderr!.on('data', (d: Buffer) => {
    err = (err + d.toString('utf8')).slice(-16384);
  });
  const fd3 = child.stdio[3] as NodeJS.ReadableStream;
  fd3.on('data', (d: Buffer) => {
    rep3 += d.toString('utf8');
  });
  // hh-run enforces the timeout; this is only a guard against hh-run itself hanging.
  const guard = setTimeout(() => child.kill('SIGKILL'), (opts.timeoutS + 30) * 1000);
  const code = await new Promise<number | null>((resolve) => {
    child.on('error', () => resolve(null));
    child.on('close', (c) => resolve(c));
  });
  clearTimeout(guard);
  let report: LauncherReport | null = null;
  if (code !== null) {
    try {
      report = JSON.parse(rep3.trim()) as LauncherReport;
    } catch {
      report = null;
    }
  }
  const stdout = Buffer.concat(out).toString('utf8');
  const c = classifyRun(report, stdout, err, opts.timeoutS);
  let traceBytes: number | undefined;
  let traceCalls: number | undefined;
  if (a.kind === 'tracer') {
    try {
      traceBytes = dirBytes(scratch);
    } catch {
      traceBytes = undefined;
    }
    if (opts.countTraceCalls && c.status === 'ok') traceCalls = await heaplogCalls(scratch);
  }
  rmSync(scratch, { recursive: true, force: true });
  const usable = report !== null && report.exec_errno === 0;
  const record: RunRecord = {
    seq,
    workload: w.name,
    allocator: a.name,
    rep,
    status: c.status,
    ...(c.error ? { error: c.error } : {}),
    exit_code: usable && report!.exit_code >= 0 ? report!.exit_code : null,
    signal: usable && report!.signal ? signalName(report!.signal) : null,
    wall_s: usable ? report!.wall_ns / 1e9 : null,
    user_s: usable ? report!.utime_us / 1e6 : null,
    sys_s: usable ? report!.stime_us / 1e6 : null,
    cpu_s: usable ? (report!.utime_us + report!.stime_us) / 1e6 : null,
    peak_rss_bytes: usable ? report!.maxrss_kb * 1024 : null,
    minflt: usable ? report!.minflt : null,
    majflt: usable ? report!.majflt : null,
    voluntary_switches: usable ? report!.nvcsw : null,
    involuntary_switches: usable ? report!.nivcsw : null,
    reported: c.reported,
    ...(traceBytes !== undefined ? { trace_bytes: traceBytes } : {}),
    ...(traceCalls !== undefined ? { trace_calls: traceCalls } : {}),
    ...(c.status !== 'ok' ? { stderr_tail: tail(err) } : {}),
  };
  return record;
}
