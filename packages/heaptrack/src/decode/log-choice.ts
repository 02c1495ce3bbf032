/**
 * The options by which `report`, `recommend` and `dump` take a folder of logs as well as one
 * log: `--pid N` (that process's log) and, where a command can read several, `--all`.
 */
import { type Command } from 'commander';

import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

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

/** The logs the options choose (see resolveLogs); a file of another tool is a usage error. */
export function chosenLogs(target: string, options: LogChoice): string[] {
  const logs = resolveLogs(target, {
    ...(options.pid !== undefined ? { pid: options.pid } : {}),
    ...(options.all === true ? { all: true } : {}),
  });
  for (const log of logs) {
    const other = otherFormat(log);
    if (other !== undefined) throw new HeaphookError(other, { namesCommand: true });
  }
  return logs;
}

/**
 * What a file is when it is another tool's (by its first bytes), and what to open it with:
 * a gzip'd pprof profile (`heaphook snapshot`, `report -o`'s profile.pb.gz), a zstd file (KDE
 * heaptrack's .zst). Undefined for anything else (a heaplog, or a file the decoder judges).
 */
export function otherFormat(path: string): string | undefined {
  const head = Buffer.alloc(4);
  let n = 0;
  try {
    // Never blocks: a FIFO or a device is left to the decoder, which refuses it.
    const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
    try {
      if (!fstatSync(fd).isFile()) return undefined;
      n = readSync(fd, head, 0, 4, 0);
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined; // the decoder names a missing or unreadable file
  }
  if (n >= 2 && head[0] === 0x1f && head[1] === 0x8b) {
    return `${path} is a pprof profile (gzip'd protobuf, as heaphook snapshot and report -o write), not a heaplog: open it with go tool pprof -http=: ${path}`;
  }
  if (n === 4 && head.readUInt32LE(0) === 0xfd2fb528) {
    return `${path} is a zstd-compressed file (KDE heaptrack writes heaptrack.*.zst), not a heaplog: open a heaptrack file with heaptrack_print or heaptrack_gui`;
  }
  return undefined;
}

/** The argument's description for commands that take a log or a folder. */
export const LOG_OR_FOLDER =
  "a heaplog.<pid>.log file, or the folder heaphook record wrote (its program's log, or a descendant's that did 10x its events)";
