/**
 * Running the readers on hostile files with the bounds the reader guarantees: a per-process
 * timeout (a hang detector, not a speed goal) and the peak RSS of the reading process.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { expect } from 'vitest';

import { heaphookBin, packageDir } from '../helpers.js';

/** The reader's memory bound (README, "A reader that is safe on any file"). */
export const MEMORY_BOUND = 256 * 1024 * 1024;
/** Per reading process: far above what reading any of these files takes. */
export const HANG_TIMEOUT_MS = 60_000;

const runner = join(packageDir, 'test', 'fuzz', 'read-logs.mjs');
const time = '/usr/bin/time';

export interface ReaderOutcome {
  log: string;
  reader: string;
  outcome: 'ok' | 'error' | 'crash';
  message?: string;
}

/** Reads logs in one child process with a 256 MB heap (read-logs.mjs); outcomes and peak RSS. */
export function readInChild(
  logs: readonly string[],
  timeout = HANG_TIMEOUT_MS,
): { outcomes: ReaderOutcome[]; maxRssBytes: number } {
  const run = spawnSync(process.execPath, ['--max-old-space-size=256', runner, ...logs], {
    cwd: packageDir,
    encoding: 'utf8',
    timeout,
    maxBuffer: 64 << 20,
  });
  expect(run.error, 'the readers hung (per-process timeout)').toBeUndefined();
  expect(run.status, run.stderr).toBe(0);
  const lines = run.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ReaderOutcome & { maxRssBytes?: number });
  const last = lines.pop()!;
  return { outcomes: lines, maxRssBytes: last.maxRssBytes! };
}

export interface CliRun {
  readonly status: number | null;
  readonly stdout: string;
  /** stderr's lines (without /usr/bin/time's and the progress lines). */
  readonly errorLines: string[];
  /** The progress lines a long read prints off a terminal (each checked: never past 100 %). */
  readonly progressLines: string[];
  /** Peak RSS of the heaphook process, when /usr/bin/time is there to measure it. */
  readonly maxRssBytes: number | undefined;
  readonly timedOut: boolean;
}

/** A progress line off a terminal (src/decode/progress.ts), its percentage captured. */
const PROGRESS_LINE =
  /^heaphook(?: recommend)?: (?:reading .*: (?:(\d+) %, )?[\d,]+ events|pass \d+: (?:(?:\d+) % \()?[\d,]+ (?:of [\d,]+ )?events\)?)$/;

/** Runs the real `heaphook` CLI, measuring its peak RSS with /usr/bin/time when present. */
export function heaphookCli(
  args: readonly string[],
  timeout = HANG_TIMEOUT_MS,
  env: Record<string, string> = {},
): CliRun {
  const measured = existsSync(time);
  const command = [process.execPath, heaphookBin, ...args];
  const options = { encoding: 'utf8', timeout, env: { ...process.env, ...env } } as const;
  const run = measured
    ? spawnSync(time, ['-q', '-f', 'heaphook-test-maxrss %M', ...command], options)
    : spawnSync(command[0]!, command.slice(1), options);
  let maxRssBytes: number | undefined;
  const progressLines: string[] = [];
  const errorLines = (run.stderr ?? '').split('\n').filter((line) => {
    const m = /^heaphook-test-maxrss (\d+)$/.exec(line);
    if (m !== null) maxRssBytes = Number(m[1]) * 1024;
    const progress = PROGRESS_LINE.exec(line);
    if (progress !== null) {
      if (progress[1] !== undefined && Number(progress[1]) > 100) {
        throw new Error(`progress past 100 %: ${line}`);
      }
      progressLines.push(line);
    }
    return line !== '' && m === null && progress === null;
  });
  return {
    status: run.status,
    stdout: run.stdout ?? '',
    errorLines,
    progressLines,
    maxRssBytes,
    timedOut: run.error !== undefined,
  };
}

/** A clean failure: one line naming the command, the given status, no stack trace. */
export function expectCleanError(run: CliRun, status: number, what: string): void {
  expect(run.timedOut, `${what}: hung`).toBe(false);
  expect(run.errorLines, what).toHaveLength(1);
  expect(run.errorLines[0], what).toMatch(/^heaphook( \w+)?: /);
  expect(run.errorLines.join('\n'), what).not.toMatch(/^\s+at |node:internal/m);
  expect(run.status, `${what}: ${run.errorLines.join('\n')}`).toBe(status);
}
