/**
 * The options by which `report`, `recommend` and `dump` take a folder of logs as well as one
 * log: `--pid N` (that process's log) and, where a command can read several, `--all`.
 */
import { type Command } from 'commander';

import { HeaphookError } from '@heaphook/core';

import { resolveLogs, type LogChoice } from './session.js';

function pidOption(value: string): number {
  const pid = Number(value);
  if (!Number.isInteger(pid) || pid <= 0) {
    throw new HeaphookError(`--pid ${value}: give a process id, e.g. --pid 4242`);
  }
  return pid;
}

/** Adds --pid (and --all when `all`) to a command whose argument is a log or a folder. */
export function withLogChoice(command: Command, all: boolean): Command {
  command.option(
    '--pid <pid>',
    "in a folder: the log of this process instead of the program's own",
    pidOption,
  );
  if (all) command.option('--all', 'in a folder: every log of the session, one after another');
  return command;
}

/** The logs the options choose (see resolveLogs). */
export function chosenLogs(target: string, options: LogChoice): string[] {
  return resolveLogs(target, {
    ...(options.pid !== undefined ? { pid: options.pid } : {}),
    ...(options.all === true ? { all: true } : {}),
  });
}

/** The argument's description for commands that take a log or a folder. */
export const LOG_OR_FOLDER =
  "a heaplog.<pid>.log file, or the folder heaphook record wrote (its program's log)";
