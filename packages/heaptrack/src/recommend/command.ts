/**
 * The `heaphook recommend <heaplog> [--margin PCT] [--round BYTES] [--json]` subcommand.
 */
import type { Command } from 'commander';

import { HeaphookError } from '@heaphook/core';
import { libraryPath } from '@heaphook/tlsf';

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

export function registerRecommend(program: Command): void {
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
      const tty = process.stderr.isTTY === true && options.json !== true;
      const r = await recommend(log, {
        marginPercent: options.margin,
        roundTo: options.round,
        ...(tty
          ? {
              onProgress: (pass: number, events: number, total: number | undefined) => {
                const of = total !== undefined ? `/${total}` : '';
                process.stderr.write(`\rpass ${pass}: ${events}${of} events`);
              },
            }
          : {}),
      });
      if (tty) process.stderr.write('\r\x1b[K');
      const lib = libraryPath();
      process.stdout.write(
        options.json === true ? recommendationJson(r, lib) : formatRecommendation(r, lib),
      );
    },
  );
}
