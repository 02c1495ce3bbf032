/**
 * `heaphook check <log | DIR> --max-peak 64MiB --max-leaked 0 ... [--limits FILE] [--junit FILE]
 * [--github]`: the CI gate. Exit status 0 when every limit is met, 1 when one is passed (or
 * cannot be checked), 2 for a usage error, 3 when the log is damaged (its valid part is still
 * checked; a limit passed there still exits 1).
 */
import type { Command } from 'commander';

import { HeaphookError, terminalText } from '@heaphook/core';

import { EXIT_DAMAGED_LOG } from '../decode/decoder.js';
import { writeSmallFile } from '../decode/input.js';
import { chosenLogs, LOG_OR_FOLDER, withLogChoice } from '../decode/log-choice.js';
import { report } from '../report/run.js';
import { suppressionsOf, withSiteOptions } from '../report/command.js';
import {
  checkLimits,
  LIMIT_KINDS,
  parseLimit,
  readLimitsFile,
  type Limit,
  type Verdict,
} from './limits.js';
import { githubAnnotations, junitXml, verdictText } from './output.js';

/** Exit status when a limit is passed. */
export const EXIT_LIMIT_PASSED = 1;

/** camelCase of a limit's option name, as commander stores it (max-peak -> maxPeak). */
function optionKey(name: string): string {
  return name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

interface CheckOptions {
  readonly limits?: string;
  readonly junit?: string;
  readonly github?: boolean;
  readonly pid?: number;
  readonly all?: boolean;
  readonly skipFrames?: RegExp[];
  readonly suppressions?: string[];
  readonly defaultSuppressions?: boolean;
  readonly [limit: string]: string | number | boolean | RegExp[] | string[] | undefined;
}

/** The limits of the file, then of the options (an option overrides the file's value). */
function limitsOf(options: CheckOptions): Limit[] {
  const byName = new Map<string, Limit>();
  if (options.limits !== undefined)
    for (const l of readLimitsFile(options.limits)) byName.set(l.kind.name, l);
  for (const kind of LIMIT_KINDS) {
    const given = options[optionKey(kind.name)];
    if (typeof given === 'string') byName.set(kind.name, { kind, max: parseLimit(kind, given) });
  }
  if (byName.size === 0) {
    throw new HeaphookError(
      'give at least one limit, e.g. --max-peak 64MiB --max-leaked 0, or --limits limits.json',
    );
  }
  return LIMIT_KINDS.flatMap((k) => {
    const l = byName.get(k.name);
    return l === undefined ? [] : [l];
  });
}

export async function checkCommand(target: string, options: CheckOptions): Promise<void> {
  const limits = limitsOf(options);
  const suppressions = suppressionsOf(options);
  const results: Array<{ log: string; verdicts: Verdict[] }> = [];
  let damaged = false;
  for (const log of chosenLogs(target, options)) {
    const r = await report(log, {
      top: 20,
      suppressions,
      ...(options.skipFrames !== undefined ? { skipFrames: options.skipFrames } : {}),
    });
    if (r.error !== undefined) {
      damaged = true;
      process.stderr.write(
        `heaphook check: ${terminalText(r.error.message)}; checked the part before byte ${r.error.offset}\n`,
      );
    }
    const verdicts = checkLimits(r.json, limits);
    results.push({ log, verdicts });
    process.stdout.write(verdictText(log, verdicts, r.json));
    if (options.github === true) process.stdout.write(githubAnnotations(log, verdicts));
  }
  if (options.junit !== undefined) {
    writeSmallFile(options.junit, junitXml(results), {
      name: `--junit ${options.junit}`,
      wanted: 'give the path of a file to write the JUnit XML to',
    });
  }
  const passed = results.some((r) => r.verdicts.some((v) => v.status !== 'ok'));
  process.exitCode = passed ? EXIT_LIMIT_PASSED : damaged ? EXIT_DAMAGED_LOG : 0;
}

export function register(program: Command): void {
  const command = program
    .command('check')
    .description(
      'a CI gate: exit 1 when a log passes a limit (peak, leaks, growth, allocations, mapped ' +
        'memory), naming it, by how much, and the stacks behind it',
    )
    .argument('<log>', LOG_OR_FOLDER);
  for (const kind of LIMIT_KINDS) {
    command.option(
      `--${kind.name} <${kind.unit === 'bytes' ? 'size' : 'n'}>`,
      `at most this much ${kind.what}`,
    );
  }
  command
    .option('--limits <file>', 'limits from a JSON file: {"max-peak": "64MiB", "max-leaked": 0}')
    .option('--junit <file>', 'also write the verdicts as JUnit XML (a test case per limit)')
    .option('--github', 'also print GitHub Actions error annotations for the limits passed');
  withSiteOptions(withLogChoice(command, true)).action(checkCommand);
}
