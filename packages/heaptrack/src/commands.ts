/**
 * The subcommands heaptrack contributes to `heaphook` (see @heaphook/core's cli), in the order
 * `heaphook --help` lists them. Each lives in src/<name>/command.ts and exports `register`:
 *   heaphook record [-o DIR] [-b BACKEND] [-e KEY=VALUE] [--no-vm] -- <command> [args...]
 *   heaphook record -p PID | -n NAME [--duration 10s] [-o DIR]     (a running process)
 *   heaphook dump [--stacks] [--summary] [--json] <log | DIR [--pid N | --all]>
 *   heaphook recommend [--margin PCT] [--json] <log | DIR [--pid N]>
 *   heaphook report [-o DIR [--formats html,svg,...]] [--json] [--top N] [--skip-frames RE]
 *                   [--suppressions FILE] <log | DIR [--pid N | --all]>
 *   heaphook check --max-peak 64MiB ... [--limits FILE] [--junit FILE] [--github]
 *                  [--skip-frames RE] [--suppressions FILE] <log | DIR>
 *   heaphook snapshot PID -o heap.pb.gz [--duration 1s] [--every 30s]
 */
import type { CommandModule } from '@heaphook/core';
import type { Command } from 'commander';

import * as check from './check/command.js';
import * as dump from './dump/command.js';
import * as recommend from './recommend/command.js';
import * as record from './record/command.js';
import * as report from './report/command.js';
import * as snapshot from './snapshot/command.js';

export const commands: readonly CommandModule[] = [
  record,
  dump,
  recommend,
  report,
  check,
  snapshot,
];

export function register(program: Command): void {
  for (const command of commands) command.register(program);
}
