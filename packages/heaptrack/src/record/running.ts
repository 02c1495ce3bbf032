/**
 * `heaphook record -p PID` / `-n NAME`: trace processes that are already running. For each one a
 * collector is started (`heaphook-heaptrack-collector --attach PID`), the tracer is loaded into
 * the process with heaphook-inject and told to hand its records to that collector
 * (heaphook_heaptrack_attach_collector); at the end (the duration, Ctrl-C, the process exiting,
 * or `stop()`) the process and the fork children it started meanwhile are detached
 * (heaphook_heaptrack_detach: the GOTs restored, the connection closed) and the collector ends
 * their logs. The processes go on untraced; the tracer library stays loaded in them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

import {
  findProcesses,
  HeaphookError,
  INJECT_EXIT_CODES,
  injectCall,
  InjectRefusal,
} from '@heaphook/core';

import {
  collectorPath,
  makeOutputDir,
  readManifest,
  tracerLibraryPath,
  type RecordedLog,
} from './record.js';

/** heaphook_heaptrack_attach*'s return values (include/heaphook/heaptrack.h). */
const ATTACH_RESULTS: Readonly<Record<number, string>> = {
  1: 'is traced by heaphook already (another `heaphook record -p` or an attach() of its own)',
  2: 'runs with the tracer preloaded (`heaphook record -- ...`): it is traced already',
  4: 'could not create its log',
  5: 'could not redirect its malloc calls (a GOT could not be written)',
  6: 'could not reach the collector (in another network namespace, e.g. a container?)',
};

export interface AttachRunningOptions {
  /** Where the logs go (default: the current directory). */
  readonly outputDir?: string;
  /** Do not print the "wrote ..." lines. */
  readonly quiet?: boolean;
}

/** One traced process: its collector and what the collector said. */
interface Attachment {
  readonly pid: number;
  readonly collector: ChildProcess;
  readonly manifest: string;
  /** The logs open (the target's and its fork children's): pid -> path. */
  readonly open: Map<number, string>;
  readonly ended: Promise<void>;
  /** Set when stop() asks the collector to end: an end before that is a death. */
  stopping: boolean;
  /** How the collector died ("killed by SIGKILL", "exited with status 1"), once it has. */
  died: string | undefined;
}

/** A collector that ended before stop() asked it to: tracing of its process stopped. */
export interface CollectorDeath {
  /** The process it served. */
  readonly pid: number;
  /** "killed by SIGKILL", "exited with status 1". */
  readonly how: string;
}

export interface RunningRecording {
  /** The processes attached. */
  readonly pids: readonly number[];
  /** Resolves when every attached process has exited (their logs closed). */
  readonly allExited: Promise<void>;
  /**
   * Resolves when a collector dies while tracing (killed, crashed). Its process sees its
   * connection end and detaches itself (heaptrack's attach.c, the watch thread); the log it was
   * writing is kept and listed by stop() as 'unfinished'.
   */
  readonly collectorDied: Promise<CollectorDeath>;
  /** Detaches every process still traced (and its fork children) and closes the logs. */
  stop(): Promise<RecordedLog[]>;
}

function readLine(child: ChildProcess, onLine: (line: string) => void): void {
  if (child.stdout === null) return;
  createInterface({ input: child.stdout }).on('line', onLine);
}

async function startCollector(
  pid: number,
  outputDir: string,
  scratch: string,
  quiet: boolean,
): Promise<{ attachment: Attachment; socket: string }> {
  // The collector reads the target's credentials from /proc and exits without one: say what
  // the injector would (exit 10), not that the collector exited.
  if (!existsSync(`/proc/${pid}`))
    throw new InjectRefusal(
      `no process with pid ${pid}`,
      'no-such-process',
      INJECT_EXIT_CODES['no-such-process'],
    );
  const manifest = join(scratch, `logs.${pid}.tsv`);
  const collector = spawn(
    collectorPath(),
    [
      '--attach',
      String(pid),
      '--dir',
      outputDir,
      '--manifest',
      manifest,
      ...(quiet ? ['--quiet'] : []),
    ],
    // Its own process group: a terminal's Ctrl-C is ours to handle (we detach first). Its
    // standard input is a pipe we never write to, its lifeline: when we are killed (SIGKILL,
    // the OOM killer, a cancelled job) the pipe ends and the collector ends the logs and exits,
    // and the process, its connection gone, detaches itself.
    { stdio: ['pipe', 'pipe', 'inherit'], detached: true },
  );
  const open = new Map<number, string>();
  let announce: ((socket: string) => void) | undefined;
  const socket = new Promise<string>((resolveSocket, reject) => {
    announce = resolveSocket;
    collector.on('error', reject);
    collector.on('exit', (code) =>
      reject(
        new HeaphookError(
          `the collector for process ${pid} exited (${String(code)}) before listening`,
        ),
      ),
    );
  });
  readLine(collector, (line) => {
    const [word, value] = line.split(' ');
    if (word === 'socket' && value !== undefined) announce?.(value);
    // "log <pid> <path>", "closed <pid> <events> <reason> <path>" (collector.c)
    else if (word === 'log') open.set(Number(value), line.slice(line.indexOf(' ', 4) + 1));
    else if (word === 'closed') open.delete(Number(value));
  });
  const attachment: Attachment = {
    pid,
    collector,
    manifest,
    open,
    ended: new Promise<void>((resolveEnded) =>
      collector.on('close', (code, signal) => {
        if (!attachment.stopping)
          attachment.died = signal !== null ? `killed by ${signal}` : `exited with status ${code}`;
        resolveEnded();
      }),
    ),
    stopping: false,
    died: undefined,
  };
  return { attachment, socket: await socket };
}

/**
 * The fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses:
 * they follow its last ')'): [0] the state, [1] the parent, [19] the start time. undefined when
 * the process is gone.
 */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== 'Z' && state !== 'X';
}

/** The parent of pid (from /proc/<pid>/stat), or undefined when it is gone. */
function parentOf(pid: number): number | undefined {
  const parent = statFields(pid)?.[1];
  return parent === undefined ? undefined : Number(parent);
}

/**
 * Whether pid is root or a descendant of it now, by the kernel's parent links. A pid the
 * collector reports is the kernel's view of a peer it checked, but the process may be gone and
 * its pid reused: heaphook acts (injects a detach) only on the process it attached to and on
 * processes of its tree.
 */
export function descendsFrom(pid: number, root: number): boolean {
  for (
    let p: number | undefined = pid, depth = 0;
    p !== undefined && p > 1 && depth < 4096;
    depth++
  ) {
    if (p === root) return true;
    p = parentOf(p);
  }
  return false;
}

/** The prefix of the scratch folders `record -p` makes in the temporary folder. */
const SCRATCH_PREFIX = 'heaphook-attach-';
/** The file in a scratch folder naming the process that made it: "<pid> <start time>". */
const SCRATCH_OWNER = 'owner';

/** A process's identity: its pid and start time (field 22 of /proc/<pid>/stat, in clock
 * ticks since boot), which tells it from a later process given the same pid. */
function identityOf(pid: number): string | undefined {
  const startTime = statFields(pid)?.[19];
  return startTime === undefined ? undefined : `${pid} ${startTime}`;
}

/**
 * Removes the scratch folders of `record -p` runs that were killed before they could (their
 * owner file names a process that is gone). A folder without an owner file is being made now,
 * or is not ours: it is left alone.
 */
export function removeStaleScratch(root: string = tmpdir()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(root).filter((n) => n.startsWith(SCRATCH_PREFIX));
  } catch {
    return removed;
  }
  for (const name of names) {
    const folder = join(root, name);
    let owner: string;
    try {
      owner = readFileSync(join(folder, SCRATCH_OWNER), 'utf8').trim();
    } catch {
      continue;
    }
    const pid = Number(owner.split(' ')[0]);
    if (Number.isSafeInteger(pid) && pid > 0 && identityOf(pid) === owner) continue;
    rmSync(folder, { recursive: true, force: true });
    removed.push(folder);
  }
  return removed;
}

/** Calls a function of the tracer in process pid; InjectRefusal when the injector refuses. */
function callTracer(pid: number, symbol: string, argument?: string): Promise<number> {
  return injectCall({
    pid,
    library: tracerLibraryPath(),
    symbol,
    ...(argument !== undefined ? { argument } : {}),
  });
}

/**
 * Attaches to each process (InjectRefusal, or a HeaphookError, when one cannot be: the ones
 * attached before it are detached again). The logs are written by the collectors while the
 * processes run; stop() detaches and returns them.
 */
export async function attachRunning(
  pids: readonly number[],
  options: AttachRunningOptions = {},
): Promise<RunningRecording> {
  const outputDir = resolve(options.outputDir ?? '.');
  makeOutputDir(options.outputDir ?? '.', outputDir);
  removeStaleScratch();
  const scratch = mkdtempSync(join(tmpdir(), SCRATCH_PREFIX));
  writeFileSync(join(scratch, SCRATCH_OWNER), `${identityOf(process.pid) ?? process.pid}\n`);
  const attachments: Attachment[] = [];
  const stopCollector = async (a: Attachment): Promise<void> => {
    a.stopping = true;
    a.collector.kill('SIGTERM');
    await a.ended;
  };
  let stopped: Promise<RecordedLog[]> | undefined;
  const stop = (): Promise<RecordedLog[]> => {
    stopped ??= (async () => {
      for (const a of attachments) {
        // A dead collector's process detached itself when its connection ended.
        if (a.died !== undefined) continue;
        // The process first, then the fork children it started while traced: those still in
        // its tree (one that left it, or a pid the collector heard of and now someone else's,
        // is not touched: its log ends when the collector stops).
        const children = [...a.open.keys()].filter((p) => p !== a.pid && descendsFrom(p, a.pid));
        for (const pid of [a.pid, ...children]) {
          if (!alive(pid)) continue;
          try {
            await callTracer(pid, 'heaphook_heaptrack_detach');
          } catch (error) {
            // Exited meanwhile: its log is closed by the collector as it ended.
            if (!(error instanceof InjectRefusal && error.reason === 'exited')) throw error;
          }
        }
      }
      await Promise.all(attachments.map(stopCollector));
      const logs = attachments.flatMap((a) => [
        ...(existsSync(a.manifest) ? readManifest(a.manifest) : []),
        // A dead collector's open logs end where it stopped writing, without END.
        ...(a.died !== undefined
          ? [...a.open].map(([pid, path]) => ({
              path,
              pid,
              events: 0,
              reason: 'unfinished' as const,
            }))
          : []),
      ]);
      rmSync(scratch, { recursive: true, force: true });
      return logs;
    })();
    return stopped;
  };
  try {
    for (const pid of pids) {
      const { attachment, socket } = await startCollector(
        pid,
        outputDir,
        scratch,
        options.quiet === true,
      );
      attachments.push(attachment);
      let result: number;
      try {
        result = await callTracer(pid, 'heaphook_heaptrack_attach_collector', socket);
      } catch (error) {
        await stopCollector(attachment);
        attachments.pop();
        throw error;
      }
      if (result !== 0) {
        await stopCollector(attachment);
        attachments.pop();
        throw new HeaphookError(
          `process ${pid} ${ATTACH_RESULTS[result] ?? `refused the attach (${result})`}`,
          {
            exitStatus: result === 1 || result === 2 ? INJECT_EXIT_CODES['already-traced'] : 1,
            namesCommand: true,
          },
        );
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const allExited = (async () => {
    while (
      stopped === undefined &&
      attachments.some((a) => alive(a.pid) || (a.died === undefined && a.open.size > 0))
    ) {
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const collectorDied = Promise.race(
    attachments.map((a) =>
      a.ended.then(() =>
        a.died !== undefined ? { pid: a.pid, how: a.died } : new Promise<CollectorDeath>(() => {}),
      ),
    ),
  );
  return { pids: attachments.map((a) => a.pid), allExited, collectorDied, stop };
}

/** The pids `heaphook record -n NAME` attaches to; a HeaphookError (exit 10) when none. */
export function processesNamed(name: string): number[] {
  const pids = findProcesses(name);
  if (pids.length === 0) {
    throw new HeaphookError(`no running process is named ${name} (its executable or argv[0])`, {
      exitStatus: INJECT_EXIT_CODES['no-such-process'],
      namesCommand: true,
    });
  }
  return pids;
}

/** "10s", "500ms", "2m", "1h", or plain seconds, in milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  if (match === null || Number(match[1]) <= 0) {
    throw new HeaphookError(`${text} is not a duration: give e.g. 10s, 500ms, 2m or 1h`, {
      namesCommand: true,
    });
  }
  return Number(match[1]) * units[match[2] ?? 's']!;
}

/**
 * SIGINT, SIGTERM and SIGHUP caught from now on (installed before the attach, so a Ctrl-C at any
 * moment ends in a detach): `interrupted` resolves at the first. release() puts the default
 * back; while the processes are being detached, further signals are only counted.
 */
export interface SignalTrap {
  readonly interrupted: Promise<void>;
  release(): void;
}

export function trapSignals(): SignalTrap {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  let resolveInterrupted: () => void = () => {};
  const interrupted = new Promise<void>((r) => (resolveInterrupted = r));
  const onSignal = (): void => resolveInterrupted();
  for (const s of signals) process.on(s, onSignal);
  return {
    interrupted,
    release: () => {
      for (const s of signals) process.off(s, onSignal);
    },
  };
}

/**
 * Waits until the duration ends, a trapped signal arrives, every process has exited, or a
 * collector died; then stops the recording (detach) and releases the trap. Returns the logs
 * and why it stopped (with the death, when a collector died).
 */
export async function recordUntilDone(
  recording: RunningRecording,
  trap: SignalTrap,
  durationMs: number | undefined,
): Promise<{
  logs: RecordedLog[];
  why: 'duration' | 'signal' | 'exited' | 'collector';
  collectorDied?: CollectorDeath;
}> {
  let timer: NodeJS.Timeout | undefined;
  let collectorDied: CollectorDeath | undefined;
  const why = await Promise.race([
    recording.allExited.then(() => 'exited' as const),
    recording.collectorDied.then((death) => {
      collectorDied = death;
      return 'collector' as const;
    }),
    trap.interrupted.then(() => 'signal' as const),
    ...(durationMs !== undefined
      ? [new Promise<'duration'>((r) => (timer = setTimeout(() => r('duration'), durationMs)))]
      : []),
  ]);
  if (timer !== undefined) clearTimeout(timer);
  try {
    const logs = await recording.stop();
    return { logs, why, ...(collectorDied !== undefined ? { collectorDied } : {}) };
  } finally {
    trap.release();
  }
}
