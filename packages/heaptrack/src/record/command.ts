/**
 * `heaphook record [-o DIR] [-b BACKEND] [-e KEY=VALUE] [--no-vm] -- <command> [args...]`, and
 * `heaphook record -p PID [--duration 10s]` / `heaphook record -n NAME` for a running process
 * (running.ts). Refusals of the injector are one line and its exit code (packages/heaptrack
 * README, "Attaching to a running process").
 */
import type { Command } from 'commander';

import {
  collectList,
  HeaphookError,
  jsonText,
  parseEnvAssignment,
  terminalText,
} from '@heaphook/core';

import { basename, join, resolve } from 'node:path';

import {
  programChoice,
  programName,
  releaseSession,
  reserveSession,
  writeSession,
  type Session,
  type SessionLog,
} from '../decode/session.js';
import { parseProcessId } from '../process-id.js';
import { makeOutputDir, record, type RecordedLog, type RecordResult } from './record.js';

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

/** Why a log of record's is incomplete, or undefined when it is not. */
function incomplete(log: RecordedLog | undefined): string | undefined {
  if (log?.reason === 'unfinished') return 'unfinished: the collector died while writing it';
  if (log?.reason === 'write_error') return `a write failed: it ends after ${log.events} events`;
  return undefined;
}

/** A child with fewer events than this part of the reported log's is summarised, not listed. */
const MAJOR_FRACTION = 0.1;

/**
 * What record says at the end: each program of the session once (its logs grouped), the log
 * `report DIR` reads and why, shims and short-lived children in one line, and what to run next.
 */
function nextSteps(session: Session, outputDir: string, logs: readonly RecordedLog[]): string {
  const dir = outputDir === '.' ? '.' : outputDir;
  const choice = programChoice(resolve(outputDir), session);
  const count = (n: number): string => n.toLocaleString('en-US');
  const out: string[] = [];
  if (choice === undefined) {
    out.push(
      `heaphook record: no log of the program itself (${session.logs.length} other log(s)); see ${terminalText(dir)}/heaphook-session.${session.recorderPid}.json`,
    );
    return `${out.join('\n')}\n`;
  }
  const eventsOf = (l: SessionLog): number => choice.events.get(l) ?? 0;
  const why = (l: SessionLog): string => {
    const w = incomplete(logs.find((r) => basename(r.path) === l.file));
    return w !== undefined ? ` (${w})` : '';
  };
  out.push(
    `heaphook record: ${session.logs.length} log${session.logs.length === 1 ? '' : 's'} in ${terminalText(dir)}; report ${terminalText(dir)} reads ${terminalText(join(dir, choice.chosen.file))}${why(choice.chosen)}: ${terminalText(choice.reason)}`,
  );
  // Worth a line of its own: a log that did a tenth of the reported log's work.
  const threshold = eventsOf(choice.chosen) * MAJOR_FRACTION;
  const minor = (l: SessionLog): boolean =>
    l !== choice.chosen &&
    l !== choice.program &&
    (l.role === 'exec-chain' || eventsOf(l) < Math.max(threshold, 1));
  // The logs worth a line, grouped by program name.
  const groups = new Map<string, SessionLog[]>();
  for (const l of session.logs) {
    if (minor(l)) continue;
    const name = programName(l);
    groups.set(name, [...(groups.get(name) ?? []), l]);
  }
  for (const [name, group] of groups) {
    const total = group.reduce((n, l) => n + eventsOf(l), 0);
    const role = group.includes(choice.program) ? ', the program record started' : '';
    const files =
      group.length === 1 ? terminalText(group[0]!.file) + why(group[0]!) : `${group.length} logs`;
    const pids =
      group.length <= 3 ? `pid ${group.map((l) => l.pid).join(', ')}` : `${group.length} processes`;
    out.push(
      `  ${terminalText(name)} (${pids}${role}): ${count(total)} events${choice.estimated ? ' (estimated)' : ''}, ${files}`,
    );
  }
  const rest = session.logs.filter(minor);
  if (rest.length > 0) {
    const byName = new Map<string, number>();
    for (const l of rest) byName.set(programName(l), (byName.get(programName(l)) ?? 0) + 1);
    const names = [...byName]
      .sort((a, b) => b[1] - a[1])
      .map(([n, k]) => (k > 1 ? `${terminalText(n)} ×${k}` : terminalText(n)))
      .join(', ');
    out.push(
      `  and ${rest.length} shim${rest.length === 1 ? '' : 's'} and short-lived child${rest.length === 1 ? '' : 'ren'} (${count(rest.reduce((n, l) => n + eventsOf(l), 0))} events in all): ${names}`,
    );
  }
  out.push(
    `next: npx heaphook report ${terminalText(dir)}        (or recommend ${terminalText(dir)}; --pid N for another process, --all for every log)`,
  );
  return `${out.join('\n')}\n`;
}

/**
 * The session of a record run, written beside its logs; when it cannot be (a full disk), one
 * line saying so and naming the program's log instead (record's status stays the command's).
 */
async function saveSession(
  command: string,
  args: readonly string[],
  result: RecordResult,
  outputDir: string,
  reserved: string | undefined,
): Promise<Session | undefined> {
  try {
    return await writeSession(
      outputDir,
      {
        command,
        args,
        recorderPid: result.recorderPid,
        parentPid: result.parentPid,
        status: result.status,
      },
      result.logs.map((l) => l.path),
      reserved,
      // The collector's count, except for a log it died writing (counted 0: the manifest's
      // reader then estimates from the file's size).
      new Map(result.logs.filter((l) => l.reason !== 'unfinished').map((l) => [l.path, l.events])),
    );
  } catch (error) {
    if (!(error instanceof HeaphookError)) throw error;
    const own = result.logs.filter((l) => l.pid === result.pid).map((l) => l.path);
    process.stderr.write(
      `heaphook record: ${error.message}; \`report ${outputDir}\` may read an older session: ` +
        (own.length > 0
          ? `name the program's log instead (${own.join(', ')})\n`
          : `name a log instead (${result.logs.length} written)\n`),
    );
    return undefined;
  }
}

export function register(program: Command): void {
  program
    .command('record')
    .description('trace every allocation of a command (and its children) into heaplog.<pid>.log')
    .option('-o, --output-dir <dir>', 'where the logs go', '.')
    .option(
      '-b, --backend <name>',
      'trace this backend instead of the libc heap (repeatable)',
      collectList,
      [],
    )
    .option(
      '-e, --env <KEY=VALUE>',
      'environment for the command (repeatable)',
      parseEnvAssignment,
      {},
    )
    .option(
      '--no-vm',
      'do not record mapped memory (by default, when @heaphook/ucm-hooks is installed, it is preloaded first and its VM events are recorded)',
    )
    .option('-q, --quiet', 'do not list the logs written')
    .option(
      '--no-follow',
      "record only the command's own process (through exec), not the processes it starts",
    )
    .option(
      '--only <name>',
      'record only the processes of this program (its executable or argv[0] name; repeatable)',
      collectList,
      [],
    )
    .option(
      '--json',
      "print the session (every log, its process and role, the program's own) as JSON at the end",
    )
    .option(
      '-p, --pid <pid>',
      'trace this running process instead of starting one (ptrace)',
      (text: string) => String(parseProcessId(text, `-p ${text}`)),
    )
    .option(
      '-n, --name <name>',
      'trace every running process of this program (its executable or argv[0] name)',
    )
    .option(
      '--duration <time>',
      'with -p / -n: detach after this long (10s, 500ms, 2m); default: at Ctrl-C or when the processes exit',
    )
    .argument('[command]', 'the program to run')
    .argument('[args...]', 'its arguments (put -- before the command)')
    .passThroughOptions()
    .action(
      async (
        command: string | undefined,
        args: string[],
        options: {
          outputDir: string;
          backend: string[];
          env: Record<string, string>;
          vm: boolean;
          quiet?: boolean;
          json?: boolean;
          follow: boolean;
          only: string[];
          pid?: string;
          name?: string;
          duration?: string;
        },
      ) => {
        if (options.pid !== undefined || options.name !== undefined) {
          process.exitCode = await recordRunningCommand(command, options);
          return;
        }
        if (command === undefined) {
          throw new HeaphookError(
            'record needs a command to run (heaphook record -- <command> [args...]), or -p PID / -n NAME for a running process',
            { namesCommand: true },
          );
        }
        makeOutputDir(options.outputDir, resolve(options.outputDir));
        // Room for the session's manifest, taken before the logs can fill the disk.
        const reserved = reserveSession(options.outputDir);
        let result: RecordResult;
        try {
          result = await record(command, args, {
            outputDir: options.outputDir,
            backends: options.backend,
            env: options.env,
            ...(options.vm ? {} : { vm: false }),
            // The collector's own "wrote" line per log is left out: the closing lines below
            // name each program once.
            quiet: true,
            ...(options.follow ? {} : { follow: false }),
            ...(options.only.length > 0 ? { only: options.only } : {}),
          });
        } catch (error) {
          releaseSession(reserved);
          throw error;
        }
        // The command's own status, whatever happens to the logs and the manifest.
        process.exitCode = result.status;
        const session = await saveSession(command, args, result, options.outputDir, reserved);
        releaseSession(reserved); // renamed into the manifest, or left unused
        if (session === undefined) return;
        if (options.json === true) process.stdout.write(`${jsonText(session, 2)}\n`);
        else if (options.quiet !== true)
          process.stderr.write(nextSteps(session, options.outputDir, result.logs));
      },
    );
}
