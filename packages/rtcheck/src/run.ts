/**
 * Running a program under the guard: libheaphook_rtcheck.so preloaded first, the backend (if
 * any) after it, each process writing its report file into a fresh folder; then the files are
 * read, symbolised and judged.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { exitStatusOf, HeaphookError, preloadEnv } from '@heaphook/core';

import { analyze, type Analysis } from './analyze.js';
import { parseReport, type RawReport } from './report-file.js';
import type { Suppression } from './suppressions.js';

export interface RtcheckOptions {
  /** A backend to run under the guard (tlsf, a user's); default: the libc heap. */
  readonly backend?: string;
  /** Stop at the first violation (HEAPHOOK_RT_GUARD=abort). */
  readonly abort?: boolean;
  /** The suppression file (applied to the report, and in-process under --abort). */
  readonly suppressionsFile?: string;
  readonly suppressions?: readonly Suppression[];
  /** Only marked sections count, not scheduling policies (HEAPHOOK_RT_MARK_ONLY). */
  readonly markOnly?: boolean;
  /** Only threads whose name matches count (HEAPHOOK_RT_THREADS, a POSIX extended regex). */
  readonly threads?: string;
  /** A warm-up: nothing counts until this long after start (2s, 500ms) or until the program
   * receives SIGUSR1 / SIGUSR2 (HEAPHOOK_RT_AFTER). */
  readonly after?: string;
  /** More environment for the program (backend options). */
  readonly env?: Readonly<Record<string, string>>;
  /** Where the program's output goes (default: inherited, left alone). */
  readonly stdio?: 'inherit' | 'pipe';
}

export interface RtcheckResult {
  readonly analysis: Analysis;
  /** The program's exit status (128 + signal when a signal ended it). */
  readonly programStatus: number;
  /** The command's: the program's if it failed, else 1 when any violation, else 0. */
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** --after: a time (500ms, 2s, 1.5m, 1h; plain seconds) or SIGUSR1 / SIGUSR2. */
export function checkAfter(text: string): string {
  if (/^(\d+(\.\d+)?(ms|s|m|h)?|SIGUSR[12])$/.test(text) && !/^0+(\.0+)?[a-z]*$/.test(text)) {
    return text;
  }
  throw new HeaphookError(
    `--after ${text}: give a warm-up time (500ms, 2s, 1m) or a signal the program will receive (SIGUSR1, SIGUSR2), e.g. --after 2s`,
    { namesCommand: true },
  );
}

/** The command's exit status: a CI gate that never hides a failing program. */
export function rtcheckStatus(programStatus: number, analysis: Analysis): number {
  if (programStatus !== 0) return programStatus;
  return analysis.violations.length > 0 || analysis.dropped > 0 ? 1 : 0;
}

function readReports(dir: string): RawReport[] {
  return readdirSync(dir)
    .filter((f) => /^rtcheck\.\d+\.txt$/.test(f))
    .sort()
    .flatMap((f) => {
      const text = readFileSync(join(dir, f), 'utf8');
      return text.startsWith('heaphook-rtcheck') ? [parseReport(text)] : [];
    });
}

export async function rtcheck(
  command: string,
  args: readonly string[],
  options: RtcheckOptions = {},
): Promise<RtcheckResult> {
  const dir = mkdtempSync(join(tmpdir(), 'heaphook-rtcheck-'));
  try {
    const env: Record<string, string> = {
      ...options.env,
      HEAPHOOK_RT_REPORT: join(dir, 'rtcheck.%p.txt'),
      HEAPHOOK_RT_GUARD: options.abort === true ? 'abort' : 'report',
    };
    if (options.markOnly === true) env.HEAPHOOK_RT_MARK_ONLY = '1';
    if (options.threads !== undefined) env.HEAPHOOK_RT_THREADS = options.threads;
    if (options.after !== undefined) env.HEAPHOOK_RT_AFTER = checkAfter(options.after);
    if (options.abort === true && options.suppressionsFile !== undefined) {
      env.HEAPHOOK_RT_SUPPRESSIONS = options.suppressionsFile;
    }
    const backends = ['rtcheck', ...(options.backend !== undefined ? [options.backend] : [])];
    const child = spawn(command, [...args], {
      env: preloadEnv(backends, { env }),
      stdio: options.stdio === 'pipe' ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const forward = (signal: NodeJS.Signals): void => {
      child.kill(signal);
    };
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
    for (const signal of signals) process.on(signal, forward);
    const programStatus = await new Promise<number>((resolve) => {
      child.on('error', (error: NodeJS.ErrnoException) => {
        stderr += `heaphook rtcheck: cannot run ${command}: ${error.message}\n`;
        resolve(error.code === 'ENOENT' ? 127 : 126);
      });
      child.on('close', (status, signal) => resolve(exitStatusOf(status, signal)));
    });
    for (const signal of signals) process.off(signal, forward);
    const analysis = await analyze(readReports(dir), options.suppressions ?? []);
    return {
      analysis,
      programStatus,
      status: rtcheckStatus(programStatus, analysis),
      stdout,
      stderr,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
