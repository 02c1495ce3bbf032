/**
 * `heaphook record`: run a command under the out-of-process collector, which writes one
 * heaplog per traced process (the command, its forked children, the programs they exec). The
 * command is started here, as this process's child, and the collector beside it.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { constants } from 'node:os';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { describeFileSystemError, HeaphookError, libraryPath, nativeFile } from '@heaphook/core';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The collector executable built with this package. */
export function collectorPath(): string {
  const path = nativeFile(packageDir, 'heaphook-heaptrack-collector');
  if (!existsSync(path)) {
    throw new HeaphookError(
      `the heaptrack collector is missing at ${path}. Build it with "npx nx build heaptrack".`,
    );
  }
  return path;
}

/** The tracer's preload library built with this package. */
export function tracerLibraryPath(): string {
  const path = nativeFile(packageDir, 'libheaphook_heaptrack.so');
  if (!existsSync(path)) {
    throw new HeaphookError(
      `libheaphook_heaptrack.so is missing at ${path}. Build it with "npx nx build heaptrack".`,
    );
  }
  return path;
}

export interface RecordOptions {
  /** Where the logs go (default: the current directory). */
  readonly outputDir?: string;
  /** Backends to trace, preloaded after the tracer (e.g. ['tlsf']); default: the libc heap. */
  readonly backends?: readonly string[];
  /** Extra environment for the command (HEAPHOOK_STACKS=0, HEAPHOOK_SAMPLE_BYTES=...). */
  readonly env?: Readonly<Record<string, string>>;
  /** stdio of the command (default 'inherit'). */
  readonly stdio?: StdioOptions;
  /** Do not print the "wrote ..." lines. */
  readonly quiet?: boolean;
  /** Record only the command's own process (through its exec chain), not its children
   * (default: every process, following forks and execs). */
  readonly follow?: boolean;
  /** Record only the processes of these programs (executable or argv[0] base names); the
   * others run with the tracer loaded but write no log. */
  readonly only?: readonly string[];
  /**
   * Record mapped memory (VM_MAPPED / VM_UNMAPPED) by preloading @heaphook/ucm-hooks first:
   * true requires it (an error names the fix when it is missing), false leaves it out, and the
   * default records it when the package is installed and built.
   */
  readonly vm?: boolean;
}

/** ucm-hooks' library, to preload before the tracer, or undefined (see RecordOptions.vm). */
export function memoryEventsLibrary(wanted?: boolean): string | undefined {
  if (wanted === false) return undefined;
  try {
    return libraryPath('ucm-hooks');
  } catch (error) {
    if (wanted !== true) return undefined;
    throw new HeaphookError(
      `recording mapped memory needs @heaphook/ucm-hooks (${(error as Error).message}). Install it with "npm i @heaphook/ucm-hooks", or record without it (--no-vm).`,
    );
  }
}

export interface RecordedLog {
  readonly path: string;
  readonly pid: number;
  /** The events in the log (0 for 'unfinished': the collector died before counting them). */
  readonly events: number;
  /** 'exit': the process ran its exit path; 'lost': it crashed, called _exit or exec'd;
   * 'collector': the collector was stopped (a second Ctrl-C) while the process ran;
   * 'detach': `heaphook record -p` detached from the running process; 'write_error': a write of
   * the log failed (a full disk): it ends at its last whole block, the process ran on
   * untraced; 'protocol': the process broke the collector's protocol (a record outside the
   * format's limits): the log ends before it, the process ran on untraced; 'unfinished': the collector died while writing it (the log ends where it stopped,
   * without END, possibly in the middle of a block). */
  readonly reason:
    'exit' | 'lost' | 'collector' | 'detach' | 'write_error' | 'protocol' | 'unfinished';
}

export interface RecordResult {
  /** The command's exit status, or 128 + signal number; 130 when signals stopped the recording
   * while the command ran (it runs on: see `stopped`). */
  readonly status: number;
  /** The collector's pid (it names the session manifest, heaphook-session.<pid>.json). */
  readonly recorderPid: number;
  /** The pid of the process that started the command: this one, the program's parent. */
  readonly parentPid: number;
  /** The command's pid (undefined when it could not be started). */
  readonly pid: number | undefined;
  /** Signals (a second Ctrl-C) stopped the recording while the command ran: its logs end with
   * END collector and record returned without waiting for it. */
  readonly stopped: boolean;
  /** How the collector died while it served the command ("killed by SIGKILL", "exited with
   * status 1"), or undefined. Tracing stopped then; record still waited for the command and
   * returns its status. */
  readonly collectorDied?: string;
  readonly logs: RecordedLog[];
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Creates the folder the logs go to, or a HeaphookError naming it and the fix (a file in the
 * way, a parent that is not a folder, no permission): one line, exit status 2.
 */
export function makeOutputDir(given: string, outputDir: string): void {
  try {
    mkdirSync(outputDir, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const problem =
      code === 'EEXIST' || code === 'ENOTDIR'
        ? 'is a file (or lies under one), not a directory'
        : `cannot be created: ${describeFileSystemError(error) ?? (error as Error).message}`;
    throw new HeaphookError(`-o ${given} ${problem}; give a directory for the logs`, {
      namesCommand: true,
    });
  }
}

const REASONS = new Set(['exit', 'lost', 'collector', 'detach', 'write_error', 'protocol']);

function reasonOf(text: string | undefined): RecordedLog['reason'] {
  return REASONS.has(text ?? '') ? (text as RecordedLog['reason']) : 'lost';
}

/** The logs the collector listed in its manifest (one line per log it closed). */
export function readManifest(manifest: string): RecordedLog[] {
  return readFileSync(manifest, 'utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const [path, pid, events, reason] = line.split('\t');
      return { path: path!, pid: Number(pid), events: Number(events), reason: reasonOf(reason) };
    });
}

/** The collector's "closed <pid> <events> <reason> <path>" line as a log, or undefined. */
export function closedLine(line: string): RecordedLog | undefined {
  const m = /^closed (\d+) (\d+) (\S+) (.+)$/.exec(line);
  if (m === null) return undefined;
  return { path: m[4]!, pid: Number(m[1]), events: Number(m[2]), reason: reasonOf(m[3]) };
}

type StdioEntry = 'pipe' | 'inherit' | 'ignore' | 'overlapped' | 'ipc' | number | object | null;

/** The three standard streams of a spawn's stdio option (undefined entries are pipes). */
function streamsOf(stdio: StdioOptions): [StdioEntry, StdioEntry, StdioEntry] {
  if (typeof stdio === 'string') return [stdio, stdio, stdio];
  const at = (k: number): StdioEntry => (stdio[k] ?? 'pipe') as StdioEntry;
  return [at(0), at(1), at(2)];
}

/**
 * Whether a signal this process got was sent to its whole process group by its terminal (so
 * the program, in the same group, got it too): SIGINT, SIGQUIT or SIGHUP while this process
 * is in the foreground group of a terminal (/proc/self/stat: tty_nr set, tpgid = pgrp).
 */
function fromOwnTerminal(signal: NodeJS.Signals): boolean {
  if (signal !== 'SIGINT' && signal !== 'SIGHUP' && signal !== 'SIGQUIT') return false;
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const [, , pgrp, , tty, tpgid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(tty) !== 0 && pgrp === tpgid;
  } catch {
    return false;
  }
}

/**
 * Runs the command under the tracer, its records written by an out-of-process collector
 * (`heaphook-heaptrack-collector --record`): one log per traced process. The command is this
 * process's own child, so its status is never lost: when the collector dies, tracing stops
 * (each traced process says so once), the logs keep what was written, and record still waits
 * for the command and returns its status.
 */
export async function record(
  command: string,
  args: readonly string[],
  options: RecordOptions = {},
): Promise<RecordResult> {
  const outputDir = resolve(options.outputDir ?? '.');
  makeOutputDir(options.outputDir ?? '.', outputDir);
  const ucm = memoryEventsLibrary(options.vm);
  const preload = [
    ...(ucm !== undefined ? [ucm] : []),
    tracerLibraryPath(),
    ...(options.backends ?? []).map((b) => libraryPath(b)),
  ];
  const existing = (process.env.LD_PRELOAD ?? '').split(/[\s:]+/).filter((p) => p.length > 0);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...(options.vm === true ? { HEAPHOOK_TRACE_VM: 'yes' } : {}),
    ...(options.only !== undefined && options.only.length > 0
      ? { HEAPHOOK_TRACE_ONLY: options.only.join(',') }
      : {}),
    ...options.env,
  };
  const collectorEnv: NodeJS.ProcessEnv = { ...env };
  delete collectorEnv.LD_PRELOAD; // the collector itself is not traced
  const stdio = streamsOf(options.stdio ?? 'inherit');
  let stdout = '';
  let stderr = '';
  /** A line of record's own, where the command's standard error goes. */
  const say = (line: string): void => {
    if (stdio[2] === 'pipe') stderr += line;
    else if (stdio[2] !== 'ignore') process.stderr.write(line);
  };

  // The collector: standard input is its lifeline (closed when the command has ended), its
  // standard output says what it does (collector.c).
  const collector = spawn(
    collectorPath(),
    ['--record', '--dir', outputDir, ...(options.quiet === true ? ['--quiet'] : [])],
    { env: collectorEnv, stdio: ['pipe', 'pipe', stdio[2] as StdioEntry as 'pipe'] },
  );
  collector.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  collector.stdin!.on('error', () => {}); // a collector that died: its lifeline is moot
  const opened = new Map<string, number>(); // path -> pid, until closed
  const logs: RecordedLog[] = [];
  let stopped = false;
  let commandChild: ChildProcess | undefined;
  let commandStatus: number | undefined;
  let announceSocket: ((socket: string) => void) | undefined;
  const socket = new Promise<string>((resolveSocket) => (announceSocket = resolveSocket));
  createInterface({ input: collector.stdout! }).on('line', (line) => {
    const [word, value] = line.split(' ');
    if (word === 'socket' && value !== undefined) announceSocket?.(value);
    else if (word === 'log') opened.set(line.slice(line.indexOf(' ', 4) + 1), Number(value));
    else if (word === 'signal' && commandStatus === undefined) commandChild?.kill(Number(value));
    else if (word === 'stopped') stopped = true;
    else {
      const log = closedLine(line);
      if (log === undefined) return;
      opened.delete(log.path);
      logs.push(log);
    }
  });
  const collectorEnded = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
    (resolveEnded, reject) => {
      collector.on('error', reject);
      collector.on('close', (code, signal) => resolveEnded({ code, signal }));
    },
  );
  let collectorGone = false;
  void collectorEnded.then(
    () => (collectorGone = true),
    () => (collectorGone = true),
  );

  // Ctrl-C, SIGTERM, SIGHUP: to the collector, which passes them on to the command or stops
  // (forward_signal in collector.c); once it is gone, to the command, unless the terminal sent
  // it to the whole group (the command got it already).
  const forward = (signal: NodeJS.Signals): void => {
    if (!collectorGone) collector.kill(signal);
    else if (commandStatus === undefined && !fromOwnTerminal(signal)) commandChild?.kill(signal);
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, forward);
  try {
    const endedEarly = collectorEnded.then(({ code, signal }) => {
      throw new HeaphookError(
        `the heaptrack collector ended (${signal ?? `status ${String(code)}`}) before it listened; see its message above`,
      );
    });
    endedEarly.catch(() => {}); // after the socket came, its end is handled below
    const name = await Promise.race([socket, endedEarly]);
    const child = spawn(command, [...args], {
      env: {
        ...env,
        LD_PRELOAD: [...preload, ...existing.filter((p) => !preload.includes(p))].join(':'),
        HEAPHOOK_COLLECTOR: name,
        // --no-follow: the command's own process records (through exec), not its children
        ...(options.follow === false ? { HEAPHOOK_TRACE_PARENT: String(process.pid) } : {}),
      },
      stdio: stdio as StdioOptions,
    });
    commandChild = child;
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const commandExited = new Promise<number>((resolveExit) => {
      child.on('error', (error: NodeJS.ErrnoException) => {
        if (child.pid !== undefined) return; // a kill that failed: the command runs on
        say(`heaphook record: cannot run ${describeFileSystemError(error) ?? error.message}\n`);
        resolveExit(error.code === 'ENOENT' ? 127 : 126);
      });
      child.on('exit', (code, signal) =>
        resolveExit(code ?? (signal !== null ? 128 + (constants.signals[signal] ?? 0) : 1)),
      );
    }).then((status) => {
      commandStatus = status;
      collector.stdin!.end(); // the lifeline: the command is done
      return status;
    });
    const commandClosed = new Promise<void>((resolveClosed) => {
      child.on('close', () => resolveClosed());
      child.on('error', () => {
        if (child.pid === undefined) resolveClosed();
      });
    });

    // The collector ends first when signals stop it or when it dies; else after the command
    // (and any process the command left running that is still traced).
    const { code, signal } = await Promise.race([
      collectorEnded,
      commandExited.then(() => collectorEnded),
    ]);
    let collectorDied: string | undefined;
    if (!stopped && (signal !== null || code !== 0 || commandStatus === undefined)) {
      collectorDied = signal !== null ? `killed by ${signal}` : `exited with status ${code}`;
      const unfinished = [...opened];
      for (const [path, pid] of unfinished)
        logs.push({ path, pid, events: 0, reason: 'unfinished' });
      opened.clear();
      say(
        `heaphook record: the collector ${signal !== null ? `was ${collectorDied}` : collectorDied}; tracing stopped. ` +
          (unfinished.length > 0
            ? `What it wrote is kept, unfinished: ${unfinished.map(([path]) => path).join(', ')}. `
            : `The logs it wrote are in ${outputDir}. `) +
          (commandStatus === undefined ? 'The program runs on; waiting for it to end.' : '') +
          '\n',
      );
    }
    if (stopped && commandStatus === undefined) {
      // A second Ctrl-C: the logs are closed, the command runs on without us.
      child.unref();
      for (const s of [child.stdin, child.stdout, child.stderr]) (s as Socket | null)?.unref();
      return {
        status: 130,
        recorderPid: collector.pid ?? 0,
        parentPid: process.pid,
        pid: child.pid,
        stopped,
        logs,
        stdout,
        stderr,
      };
    }
    const status = await commandExited;
    await commandClosed;
    return {
      status,
      recorderPid: collector.pid ?? 0,
      parentPid: process.pid,
      pid: child.pid,
      stopped,
      ...(collectorDied !== undefined ? { collectorDied } : {}),
      logs,
      stdout,
      stderr,
    };
  } finally {
    for (const signal of signals) process.off(signal, forward);
    if (commandChild === undefined) collector.stdin!.end(); // no command: the collector ends
  }
}
