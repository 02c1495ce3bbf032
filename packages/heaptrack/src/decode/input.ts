/**
 * Opening the log a command reads. A reader is safe on any path the user gives: only a regular
 * file is read (a FIFO or a device could block or never end), the open itself cannot block
 * (O_NONBLOCK), and every file-system problem is one line naming the path and the fix (a
 * LogInputError, exit status 2), never a Node stack trace.
 */
import { constants, type Stats } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';

import { describeFileSystemError, EXIT_USAGE, HeaphookError } from '@heaphook/core';

const WANTED = 'give a heaplog file (heaplog.<pid>.log, written by heaphook record)';

/** A log path that cannot be read: the message names the path, the problem and the fix. */
export class LogInputError extends HeaphookError {
  constructor(
    readonly path: string,
    problem: string,
  ) {
    super(`${path} ${problem}; ${WANTED}`, { exitStatus: EXIT_USAGE, namesCommand: true });
    this.name = 'LogInputError';
  }
}

/** What a path is, when it is not a regular file. */
function kindOf(s: Stats): string {
  if (s.isDirectory()) return 'a directory';
  if (s.isFIFO()) return 'a FIFO (named pipe)';
  if (s.isSocket()) return 'a socket';
  if (s.isCharacterDevice()) return 'a character device';
  if (s.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}

function refuse(path: string, s: Stats): LogInputError {
  return new LogInputError(path, `is ${kindOf(s)}, not a regular file`);
}

/** The LogInputError of a file-system error on `path` (other errors are returned as they are). */
export function logInputError(path: string, error: unknown): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return new LogInputError(path, 'does not exist');
  if (code === 'EISDIR') return new LogInputError(path, 'is a directory');
  const line = describeFileSystemError(error);
  if (line === undefined) return error;
  return new LogInputError(path, `cannot be read: ${line.replace(`${path}: `, '')}`);
}

/**
 * Opens a log for reading: a regular file, or a LogInputError. The path is checked before the
 * open (stat: no open of a FIFO at all) and the open descriptor again after it (the path may
 * have changed in between); O_NONBLOCK keeps even that open from waiting for a FIFO's writer.
 */
export async function openLogFile(path: string): Promise<FileHandle> {
  let file: FileHandle | undefined;
  try {
    const before = await stat(path);
    if (!before.isFile()) throw refuse(path, before);
    file = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
    const after = await file.stat();
    if (!after.isFile()) throw refuse(path, after);
    return file;
  } catch (error) {
    await file?.close();
    throw logInputError(path, error);
  }
}
