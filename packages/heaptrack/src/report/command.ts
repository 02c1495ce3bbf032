/** The `heaphook report` command (listed in package.json's heaphook.commands). */
import type { Command } from 'commander';

import { HeaphookError, jsonText, terminalText } from '@heaphook/core';

import { join } from 'node:path';

import { EXIT_DAMAGED_LOG } from '../decode/decoder.js';
import { chosenLogs, LOG_OR_FOLDER, withLogChoice } from '../decode/log-choice.js';
import { parseFormats, REPORT_FORMATS, report, type ReportFormat } from './run.js';
import { choiceText } from './choice.js';
import { parseSkipFrames } from './sites.js';
import { loadSuppressions, PROJECT_SUPPRESSIONS } from './suppressions.js';
import { folderChoice } from '../decode/session.js';

/** Exit status when the log is damaged: the report of its valid part is still produced. */
export { EXIT_DAMAGED_LOG };

export interface ReportCommandOptions {
  readonly outputDir?: string;
  readonly json?: boolean;
  readonly symbols: boolean;
  readonly top: string;
  readonly pid?: number;
  readonly all?: boolean;
  readonly diff?: string;
  readonly formats?: ReportFormat[];
  readonly skipFrames?: RegExp[];
  readonly suppressions?: string[];
  readonly defaultSuppressions?: boolean;
}

export async function reportCommand(target: string, options: ReportCommandOptions): Promise<void> {
  const top = Number(options.top);
  if (!Number.isInteger(top) || top < 1) {
    throw new HeaphookError(`--top ${options.top}: give a whole number of sites, e.g. --top 20`);
  }
  if (options.diff !== undefined) {
    if (options.all === true) {
      throw new HeaphookError('--diff compares two logs: leave out --all (pick one with --pid)');
    }
    const [base] = chosenLogs(options.diff, {}) as [string];
    const [now] = chosenLogs(target, options) as [string];
    const outputDir = options.outputDir;
    const skipFrames = options.skipFrames ?? [];
    // Loaded here: a report without --diff needs none of it.
    const [{ diffReports, diffText }, { diffReportFiles }] = await Promise.all([
      import('./diff.js'),
      import('./diff-html.js'),
    ]);
    const { diff: d, result } =
      outputDir === undefined
        ? { diff: await diffReports(base, now, { symbolize: options.symbols, top, skipFrames }) }
        : await diffReportFiles(base, now, {
            outputDir,
            symbolize: options.symbols,
            top,
            skipFrames,
          });
    for (const warning of d.warnings) {
      process.stderr.write(`heaphook report: warning: ${terminalText(warning)}\n`);
    }
    process.stdout.write(options.json === true ? `${jsonText(d, 2)}\n` : diffText(d));
    if (options.json !== true && result !== undefined) process.stdout.write(written(result.files));
    return;
  }
  if (options.formats !== undefined && options.outputDir === undefined) {
    throw new HeaphookError(
      '--formats chooses the files -o writes: give -o DIR too, e.g. -o out --formats html,svg',
    );
  }
  const suppressions = suppressionsOf(options);
  const logs = chosenLogs(target, options);
  const several = options.all === true;
  const jsons: unknown[] = [];
  // Which log of the folder is "the program", and why (the text says it first).
  const choice =
    options.pid === undefined && !several && options.json !== true
      ? folderChoice(target)
      : undefined;
  const preface = choice !== undefined ? await choiceText(target, choice) : undefined;
  for (const log of logs) {
    // With --all and -o, each log's files go to a folder of its own, named after the log.
    const outputDir =
      options.outputDir === undefined
        ? undefined
        : several
          ? join(options.outputDir, log.replace(/^.*\//, '').replace(/\.log$/, ''))
          : options.outputDir;
    const result = await report(log, {
      ...(outputDir !== undefined ? { outputDir } : {}),
      symbolize: options.symbols,
      top,
      ...(options.formats !== undefined ? { formats: options.formats } : {}),
      ...(options.skipFrames !== undefined ? { skipFrames: options.skipFrames } : {}),
      suppressions,
      ...(preface !== undefined ? { preface } : {}),
    });
    if (options.json === true) jsons.push(several ? { log, report: result.json } : result.json);
    else {
      if (several) process.stdout.write(`== ${terminalText(log)}\n`);
      process.stdout.write(result.text);
      if (result.files.length > 0) process.stdout.write(written(result.files));
    }
    if (result.error !== undefined) {
      process.stderr.write(
        `heaphook: ${terminalText(result.error.message)}; the report covers the part before byte ${result.error.offset}\n`,
      );
      process.exitCode = EXIT_DAMAGED_LOG;
    }
  }
  if (options.json === true) process.stdout.write(`${jsonText(several ? jsons : jsons[0], 2)}\n`);
}

/** The suppressions of --suppressions and the project's default file (suppressions.ts). */
export function suppressionsOf(options: {
  suppressions?: string[];
  defaultSuppressions?: boolean;
}): { rules: ReturnType<typeof loadSuppressions>['suppressions']; files: string[] } {
  const { suppressions, files } = loadSuppressions(options.suppressions ?? [], {
    project: options.defaultSuppressions !== false,
  });
  return { rules: suppressions, files };
}

/** Adds --skip-frames, --suppressions and --no-default-suppressions (report and check). */
export function withSiteOptions(command: Command): Command {
  return command
    .option(
      '--skip-frames <regex>',
      'also name sites past frames whose function matches (repeatable; beside the built-in allocator list)',
      (text: string, previous: RegExp[] | undefined) => parseSkipFrames(text, previous ?? []),
    )
    .option(
      '--suppressions <file>',
      "known leaks, one leak:FUNCTION_OR_LIBRARY a line (LSan's and KDE heaptrack's format; repeatable): counted apart",
      (file: string, previous: string[] | undefined) => [...(previous ?? []), file],
    )
    .option(
      '--no-default-suppressions',
      `do not read the project's ${PROJECT_SUPPRESSIONS} (looked for in the working directory and its parents)`,
    );
}

/** The files -o wrote, one per line. */
function written(files: readonly string[]): string {
  return `written:\n${files.map((f) => `  ${terminalText(f)}\n`).join('')}`;
}

export function register(program: Command): void {
  const command = program
    .command('report')
    .description(
      'summarise a heaplog: calls, peak, leaks, top sites, heap over time; -o DIR also writes HTML, SVG/PNG/PDF charts, a flame graph and a pprof profile',
    )
    .argument('<log>', LOG_OR_FOLDER)
    .option(
      '-o, --output-dir <dir>',
      'write report.html, heap.svg/png/pdf, flamegraph.svg, profile.pb.gz, speedscope.json, heap.perfetto-trace, summary.json (--formats chooses)',
    )
    .option(
      '--json',
      'print the machine-readable summary (README: "report --json") instead of text',
    )
    .option('--no-symbols', 'do not resolve stacks with addr2line (raw module+offset frames)')
    .option(
      '--top <n>',
      'sites listed per table (text, JSON and the check and diff listings)',
      '20',
    )
    .option(
      '--formats <list>',
      `with -o: only these files, comma-separated: ${Object.keys(REPORT_FORMATS).join(',')}`,
      parseFormats,
    )
    .option(
      '--diff <base>',
      'compare with a base run (a log or a folder): totals and the sites that grew or shrank; with -o, report.html adds a differential flame graph',
    );
  withSiteOptions(withLogChoice(command, true)).action(reportCommand);
}
