/**
 * The `heaphook recommend <heaplog> [--margin PCT] [--round BYTES] [--json]` subcommand.
 */
import type { Command } from 'commander';

import { HeaphookError } from '@heaphook/core';
import { libraryPath } from '@heaphook/tlsf';

import { percentOf, PROGRESS_AFTER_MS, progressLines } from '../decode/progress.js';
import { chosenLogs, LOG_OR_FOLDER, withLogChoice } from '../decode/log-choice.js';
import { formatRecommendation, recommendationJson } from './format.js';
import { recommend } from './search.js';

function percent(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) {
    throw new HeaphookError(`--margin: a percentage of at least 0 (e.g. 25), got "${value}"`);
  }
  return n;
}

function bytes(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 16 || n % 16 !== 0) {
    throw new HeaphookError(
      `--round: a byte count, a multiple of 16 (e.g. 1048576), got "${value}"`,
    );
  }
  return n;
}

/**
 * One pass's progress: the first pass counts the events (no total yet); later passes show
 * the share of the first pass's count, never past 100 %.
 */
export function passText(pass: number, events: number, total: number | undefined): string {
  const count = events.toLocaleString('en-US');
  if (total === undefined) return `pass ${pass}: ${count} events`;
  return `pass ${pass}: ${percentOf(events, total)} % (${count} of ${Math.max(total, events).toLocaleString('en-US')} events)`;
}

export function register(program: Command): void {
  const command = program
    .command('recommend')
    .description(
      'replay a heaplog through the real TLSF code and print the INITIAL_MEMPOOL_SIZE under ' +
        'which libheaphook_tlsf.so never grows its pool (environment, heaphook run, ROS 2 launch)',
    )
    .argument('<log>', `${LOG_OR_FOLDER}; recorded without sampling`)
    .option('-m, --margin <percent>', 'added to the replayed minimum', percent, 25)
    .option('--round <bytes>', 'round the sizes up to a multiple of this', bytes, 1024 * 1024)
    .option('--json', 'print the recommendation as JSON');
  withLogChoice(command, false).action(
    async (
      target: string,
      options: { margin: number; round: number; json?: boolean; pid?: number },
    ) => {
      const [log] = chosenLogs(target, options) as [string];
      const tty = process.stderr.isTTY === true;
      const lines = progressLines('heaphook recommend');
      const started = Date.now();
      let drawn = false;
      const r = await recommend(log, {
        marginPercent: options.margin,
        roundTo: options.round,
        onProgress: (pass: number, events: number, total: number | undefined) => {
          const text = passText(pass, events, total);
          if (!tty) lines.update(text);
          else if (Date.now() - started >= PROGRESS_AFTER_MS) {
            process.stderr.write(`\r\x1b[K${text}`);
            drawn = true;
          }
        },
      });
      if (drawn) process.stderr.write('\r\x1b[K');
      const lib = libraryPath();
      process.stdout.write(
        options.json === true ? recommendationJson(r, lib) : formatRecommendation(r, lib),
      );
    },
  );
}
