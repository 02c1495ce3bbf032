/**
 * CLI subcommands contributed to `heaphook` (see @heaphook/core's cli):
 *   heaphook record [-o DIR] [-b BACKEND] [-e KEY=VALUE] [--no-vm] -- <command> [args...]
 *   heaphook record -p PID | -n NAME [--duration 10s] [-o DIR]     (a running process)
 *   heaphook snapshot PID -o heap.pb.gz [--duration 1s] [--every 30s]
 *   heaphook dump [--stacks] [--summary] [--json] <log | DIR [--pid N | --all]>
 *   heaphook recommend [--margin PCT] [--json] <log | DIR [--pid N]>
 *   heaphook report [-o DIR [--formats html,svg,...]] [--json] [--top N] [--skip-frames RE]
 *                   [--suppressions FILE] <log | DIR [--pid N | --all]>
 *   heaphook check --max-peak 64MiB ... [--limits FILE] [--junit FILE] [--github]
 *                  [--skip-frames RE] [--suppressions FILE] <log | DIR>
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

import { decodeLog, EXIT_DAMAGED_LOG, LogFormatError } from './decode/decoder.js';
import { dump } from './report/dump.js';
import { registerCheck } from './check/command.js';
import { registerRecommend } from './recommend/command.js';
import { registerReport } from './report/command.js';
import { chosenLogs, LOG_OR_FOLDER, withLogChoice } from './decode/log-choice.js';
import {
  programChoice,
  programName,
  releaseSession,
  reserveSession,
  writeSession,
  type Session,
  type SessionLog,
} from './decode/session.js';
import { makeOutputDir, record, type RecordedLog, type RecordResult } from './record/record.js';
import { recordRunningCommand } from './record/command.js';
import { parseProcessId } from './process-id.js';
import { registerSnapshot } from './snapshot/command.js';
import type { StackNodeRecord } from './decode/records.js';
import { framesOf, summarize, type LeakCheckSummary, type LeakSite } from './report/summary.js';
import { formatFrame, Symbolizer } from './report/symbolize.js';
import { startProgress } from './report/progress.js';

async function printLeakChecks(
  checks: readonly LeakCheckSummary[],
  stacks: ReadonlyMap<number, StackNodeRecord>,
  symbolizer: Symbolizer,
  out: string[],
): Promise<void> {
  for (const { check: c, leaked, reachable } of checks) {
    out.push(
      `leak check ${c.check} (${c.trigger}): ${c.leakedBlocks} of ${c.liveBlocks} blocks leaked ` +
        `(${c.leakedBytes} bytes), ${c.reachableBlocks} never freed but still reachable ` +
        `(${c.reachableBytes} bytes); world stopped ${(c.durationNs / 1e6).toFixed(3)} ms`,
    );
    const groups: [string, LeakSite[]][] = [
      ['leaked', leaked],
      ['reachable', reachable.slice(0, 5)],
    ];
    for (const [label, sites] of groups) {
      for (const site of sites.slice(0, 10)) {
        out.push(`  ${label}: ${site.blocks} blocks, ${site.bytes} bytes`);
        const pcs = framesOf(stacks, site.stack);
        const frames = await symbolizer.symbolize(pcs);
        for (const pc of pcs) {
          for (const f of frames.get(pc) ?? []) out.push(`      ${formatFrame(f)}`);
        }
      }
    }
  }
}

async function printSummary(path: string): Promise<void> {
  const progress = startProgress(path);
  let s;
  try {
    s = await summarize(path, { leakBlocks: false, onBlock: (n) => progress.update(n) });
  } finally {
    progress.stop();
  }
  const out: string[] = [];
  const p = s.process;
  out.push(`log: ${terminalText(path)}`);
  if (p !== undefined) out.push(`process: ${p.pid} ${terminalText(p.argv.join(' '))}`);
  out.push(`events: ${s.events}`);
  for (const [op, n] of Object.entries(s.calls)) {
    if (n > 0 && op !== 'realloc_done') out.push(`  ${op}: ${n}`);
  }
  out.push(`allocated: ${s.allocatedBytes} bytes`);
  out.push(`peak: ${s.peakBytes} bytes at ${(s.peakTime / 1e9).toFixed(6)} s`);
  // Not yet a verdict: the leak checks below (when the log has them) split these blocks into
  // leaked and still reachable.
  out.push(`never freed: ${s.liveBlocks} blocks, ${s.liveBytes} bytes`);
  if (s.freedBeforeAttach > 0)
    out.push(`freed, allocated before attach: ${s.freedBeforeAttach} blocks`);
  if (s.mapped !== undefined) {
    const m = s.mapped;
    out.push(
      `mapped: peak ${m.peakBytes} bytes at ${(m.peakTimeNs / 1e9).toFixed(6)} s, ${m.finalBytes} bytes at the end; ${m.mappedEvents} mapped (${m.mappedBytes} bytes), ${m.unmappedEvents} unmapped (${m.unmappedBytes} bytes)`,
    );
  }
  if (s.end !== undefined) out.push(`end: ${s.end.reason}, ${s.end.dropped} dropped`);
  else out.push('end: none (the log stops without an END record)');
  const symbolizer = new Symbolizer(s.modules);
  for (const site of s.leakSites.slice(0, 10)) {
    out.push(`never freed: ${site.blocks} blocks, ${site.bytes} bytes`);
    const pcs = framesOf(s.stacks, site.stack);
    const frames = await symbolizer.symbolize(pcs);
    for (const pc of pcs) for (const f of frames.get(pc) ?? []) out.push(`    ${formatFrame(f)}`);
  }
  await printLeakChecks(s.leakChecks, s.stacks, symbolizer, out);
  process.stdout.write(`${out.join('\n')}\n`);
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

/** dump --json: every record of the log as one JSON object per line (with its log under --all). */
async function dumpJson(path: string, withLog: boolean): Promise<void> {
  const lines: string[] = [];
  const flush = (): void => {
    if (lines.length > 0) process.stdout.write(`${lines.join('\n')}\n`);
    lines.length = 0;
  };
  for await (const record of decodeLog(path)) {
    lines.push(jsonText(withLog ? { log: path, ...record } : record));
    if (lines.length >= 4096) flush();
  }
  flush();
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

  const dumpCommand = program
    .command('dump')
    .description('print a heaplog, one line per event (function name first, then its fields)')
    .argument('<log>', LOG_OR_FOLDER)
    .option('-s, --stacks', 'print the symbolised stack under each event')
    .option('--summary', 'print totals, peak and leaks instead of the events')
    .option('--no-headers', 'leave out the # process / module / end lines')
    .option('--json', 'print every record as one line of JSON (JSON Lines) instead of text');
  withLogChoice(dumpCommand, true).action(
    async (
      target: string,
      options: {
        stacks?: boolean;
        summary?: boolean;
        headers: boolean;
        json?: boolean;
        pid?: number;
        all?: boolean;
      },
    ) => {
      for (const log of chosenLogs(target, options)) {
        if (options.all === true && options.json !== true)
          process.stdout.write(`== ${terminalText(log)}\n`);
        try {
          if (options.summary === true) await printSummary(log);
          else if (options.json === true) await dumpJson(log, options.all === true);
          else await dump(log, { stacks: options.stacks === true, headers: options.headers });
        } catch (error) {
          if (error instanceof LogFormatError) {
            throw new HeaphookError(error.message, { exitStatus: EXIT_DAMAGED_LOG });
          }
          throw error;
        }
      }
    },
  );

  registerRecommend(program);
  registerReport(program);
  registerCheck(program);
  registerSnapshot(program);
}
