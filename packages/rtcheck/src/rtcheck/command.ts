/**
 * `heaphook rtcheck`, contributed to `heaphook` (listed in package.json, see @heaphook/core's cli):
 *   heaphook rtcheck [--json FILE] [--backend NAME] [--abort] [--suppressions FILE]
 *                    [--mark-only] [--threads REGEX] [--after 2s|SIGUSR2] [-e KEY=VALUE]
 *                    -- COMMAND [args...]
 */
import { writeFileSync } from 'node:fs';

import type { Command } from 'commander';

import { describeFileSystemError, HeaphookError, parseEnvAssignment } from '@heaphook/core';

import { analysisJson, formatAnalysis } from '../format.js';
import { rtcheck } from '../run.js';
import { readSuppressions } from '../suppressions.js';

interface RtcheckCliOptions {
  json?: string;
  backend?: string;
  abort?: boolean;
  suppressions?: string;
  markOnly?: boolean;
  threads?: string;
  after?: string;
  env: Record<string, string>;
}

function writeJson(path: string, text: string): void {
  try {
    writeFileSync(path, text);
  } catch (error) {
    throw new HeaphookError(
      `--json ${path}: ${describeFileSystemError(error)}; name a file in a folder you can write`,
      { namesCommand: true },
    );
  }
}

export function register(program: Command): void {
  program
    .command('rtcheck')
    .description(
      'run a command and report every allocation and blocking call made in a real-time thread (SCHED_FIFO/RR/DEADLINE, or marked); exit 1 when there is any',
    )
    .option('--json <file>', 'also write the violations as JSON to this file')
    .option('-b, --backend <name>', 'the allocator under the check (default: the libc heap)')
    .option('--abort', 'stop the program at the first violation, with its stack (RTSan default)')
    .option(
      '--suppressions <file>',
      "RTSan's suppression file (call-stack-contains:NAME, function-name-matches:NAME) or heaphook's (frame:, call:, file:, thread:)",
    )
    .option(
      '--mark-only',
      'only sections marked with heaphook_rt_enter/exit (or RTSan names) count',
    )
    .option(
      '--threads <regex>',
      "only threads whose name matches count (a POSIX extended regular expression, e.g. '^(control|rt_)')",
    )
    .option(
      '--after <time|signal>',
      'a warm-up: nothing counts until this long after start (500ms, 2s) or until the program receives SIGUSR1 or SIGUSR2',
    )
    .option(
      '-e, --env <KEY=VALUE>',
      'environment for the command (repeatable)',
      parseEnvAssignment,
      {},
    )
    .argument('<command>', 'the program to run')
    .argument('[args...]', 'its arguments (put -- before the command)')
    .passThroughOptions()
    .action(async (command: string, args: string[], options: RtcheckCliOptions) => {
      const suppressions =
        options.suppressions !== undefined ? readSuppressions(options.suppressions) : [];
      // the JSON's file is made before the program runs, so a bad path costs no run
      if (options.json !== undefined) writeJson(options.json, '');
      const result = await rtcheck(command, args, {
        ...(options.backend !== undefined ? { backend: options.backend } : {}),
        abort: options.abort === true,
        ...(options.suppressions !== undefined ? { suppressionsFile: options.suppressions } : {}),
        suppressions,
        markOnly: options.markOnly === true,
        ...(options.threads !== undefined ? { threads: options.threads } : {}),
        ...(options.after !== undefined ? { after: options.after } : {}),
        env: options.env,
      });
      process.stderr.write(result.stderr);
      process.stderr.write(formatAnalysis(result.analysis));
      if (options.json !== undefined) {
        writeJson(
          options.json,
          `${analysisJson(result.analysis, { program: result.programStatus, command: result.status })}\n`,
        );
      }
      process.exitCode = result.status;
    });
}
