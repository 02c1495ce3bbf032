/**
 * `heaphook record -p PID [--duration 10s]` and `heaphook record -n NAME`: the CLI side of
 * running.ts. Refusals of the injector are one line and its exit code (packages/heaptrack
 * README, "Attaching to a running process").
 */
import { HeaphookError } from '@heaphook/core';

import { join } from 'node:path';

import {
  attachRunning,
  parseDuration,
  processesNamed,
  recordUntilDone,
  trapSignals,
} from './running.js';

export interface RecordRunningOptions {
  readonly outputDir: string;
  readonly backend: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly only: readonly string[];
  readonly follow: boolean;
  readonly quiet?: boolean;
  readonly json?: boolean;
  readonly pid?: string;
  readonly name?: string;
  readonly duration?: string;
}

function usage(message: string): HeaphookError {
  return new HeaphookError(message, { namesCommand: true });
}

/**
 * Attaches, waits, detaches; returns the exit status: 0, or 1 when a collector died while
 * tracing (its process detached itself; the log it was writing is kept, unfinished, and named).
 */
export async function recordRunningCommand(
  command: string | undefined,
  options: RecordRunningOptions,
): Promise<number> {
  if (options.pid !== undefined && options.name !== undefined)
    throw usage('give -p PID or -n NAME, not both');
  if (command !== undefined)
    throw usage(`-p / -n trace a running process: leave out the command (${command})`);
  const notApplicable = [
    options.backend.length > 0 ? '-b' : '',
    Object.keys(options.env).length > 0 ? '-e' : '',
    options.only.length > 0 ? '--only' : '',
    options.follow ? '' : '--no-follow',
  ].filter((o) => o !== '');
  if (notApplicable.length > 0)
    throw usage(`${notApplicable.join(', ')} apply to a command heaphook starts, not to -p / -n`);
  let pids: number[];
  if (options.pid !== undefined) {
    const pid = Number(options.pid);
    if (!/^\d+$/.test(options.pid) || pid <= 0)
      throw usage(`-p ${options.pid} is not a process id`);
    pids = [pid];
  } else {
    pids = processesNamed(options.name ?? '');
  }
  const durationMs = options.duration !== undefined ? parseDuration(options.duration) : undefined;
  const quiet = options.quiet === true;
  const trap = trapSignals();
  let recording;
  try {
    recording = await attachRunning(pids, { outputDir: options.outputDir, quiet });
  } catch (error) {
    trap.release();
    throw error;
  }
  if (!quiet) {
    const until = durationMs !== undefined ? `for ${options.duration}` : 'until Ctrl-C';
    process.stderr.write(
      `heaphook record: attached to ${pids.length === 1 ? 'process' : 'processes'} ${pids.join(', ')}; tracing ${until} (or until it exits)\n`,
    );
  }
  const { logs, why, collectorDied } = await recordUntilDone(recording, trap, durationMs);
  if (collectorDied !== undefined) {
    // Said even with --quiet: the recording failed.
    const unfinished = logs.filter((log) => log.reason === 'unfinished').map((log) => log.path);
    process.stderr.write(
      `heaphook record: the collector for process ${collectorDied.pid} was ${collectorDied.how}; tracing stopped and the process detached itself (it runs on). ` +
        (unfinished.length > 0
          ? `What it wrote is kept, unfinished: ${unfinished.join(', ')}\n`
          : `The logs it wrote are in ${options.outputDir}\n`),
    );
  }
  if (options.json === true) {
    process.stdout.write(
      `${JSON.stringify({ pids, stoppedBy: why, ...(collectorDied !== undefined ? { collectorDied } : {}), logs }, null, 2)}\n`,
    );
  } else if (!quiet) {
    const dir = options.outputDir;
    process.stderr.write(
      `heaphook record: ${why === 'exited' ? 'the process exited' : why === 'collector' ? 'stopped' : 'detached'}; ${logs.length} log(s) in ${dir}\n` +
        `next: npx heaphook report ${logs.length === 1 ? join(dir, logs[0]!.path.split('/').pop()!) : dir}\n`,
    );
  }
  return collectorDied !== undefined ? 1 : 0;
}
