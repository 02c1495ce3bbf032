/**
 * `heaphook record`: run a command under the out-of-process collector, which writes one
 * heaplog per traced process (the command, its forked children, the programs they exec).
 */
import { spawn, type StdioOptions } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
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
  readonly events: number;
  /** 'exit': the process ran its exit path; 'lost': it crashed, called _exit or exec'd;
   * 'collector': the collector was stopped (a second Ctrl-C) while the process ran;
   * 'detach': `heaphook record -p` detached from the running process. */
  readonly reason: 'exit' | 'lost' | 'collector' | 'detach';
}

export interface RecordResult {
  /** The command's exit status, or 128 + signal number. */
  readonly status: number;
  /** The collector's pid: the parent of the process started for the command. */
  readonly recorderPid: number;
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

/** The logs the collector listed in its manifest (one line per log it closed). */
export function readManifest(manifest: string): RecordedLog[] {
  return readFileSync(manifest, 'utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const [path, pid, events, reason] = line.split('\t');
      return {
        path: path!,
        pid: Number(pid),
        events: Number(events),
        reason:
          reason === 'exit' || reason === 'collector' || reason === 'detach' ? reason : 'lost',
      };
    });
}

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
  const scratch = mkdtempSync(join(tmpdir(), 'heaphook-record-'));
  const manifest = join(scratch, 'logs.tsv');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...(options.vm === true ? { HEAPHOOK_TRACE_VM: 'yes' } : {}),
    ...(options.only !== undefined && options.only.length > 0
      ? { HEAPHOOK_TRACE_ONLY: options.only.join(',') }
      : {}),
    ...options.env,
  };
  delete env.LD_PRELOAD; // the collector itself is not traced
  const collectorArgs = [
    '--dir',
    outputDir,
    '--preload',
    [...preload, ...existing.filter((p) => !preload.includes(p))].join(':'),
    '--manifest',
    manifest,
    ...(options.quiet === true ? ['--quiet'] : []),
    ...(options.follow === false ? ['--no-follow'] : []),
    '--',
    command,
    ...args,
  ];
  const stdio = options.stdio ?? 'inherit';
  const child = spawn(collectorPath(), collectorArgs, { env, stdio });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, forward);
  try {
    const status = await new Promise<number>((resolvePromise, reject) => {
      child.on('error', reject);
      child.on('close', (code, signal) =>
        resolvePromise(code ?? (signal !== null ? 128 + (constants.signals[signal] ?? 0) : 1)),
      );
    });
    const logs: RecordedLog[] = existsSync(manifest) ? readManifest(manifest) : [];
    return { status, recorderPid: child.pid ?? 0, logs, stdout, stderr };
  } finally {
    for (const signal of signals) process.off(signal, forward);
    rmSync(scratch, { recursive: true, force: true });
  }
}
