/**
 * Opening the log a command reads. A reader is safe on any path the user gives: only a regular
 * file is read (a FIFO or a device could block or never end), the open itself cannot block
 * (O_NONBLOCK), and every file-system problem is one line naming the path and the fix (a
 * LogInputError, exit status 2), never a Node stack trace.
 */
import {
  closeSync,
  constants,
  fstatSync,
  openSync,
  readSync,
  statSync,
  writeSync,
  type Stats,
} from 'node:fs';
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
export function kindOf(s: Stats): string {
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

/**
 * A small file the user names beside the log (a limits file, a session manifest): how the
 * error lines name it (`--limits heap.json`), the fix they end with, and the most it may hold.
 */
export interface SmallFile {
  readonly name: string;
  readonly wanted: string;
  /** Bytes: a larger file is refused, not read on. */
  readonly cap: number;
}

function smallFileError(file: Pick<SmallFile, 'name' | 'wanted'>, problem: string): HeaphookError {
  return new HeaphookError(`${file.name} ${problem}; ${file.wanted}`, {
    exitStatus: EXIT_USAGE,
    namesCommand: true,
  });
}

/** The HeaphookError of a file-system error on a small file (other errors as they are). */
function fileSystemProblem(
  file: Pick<SmallFile, 'name' | 'wanted'>,
  error: unknown,
  verb: 'read' | 'written',
): unknown {
  if (error instanceof HeaphookError) return error;
  const { code, path } = error as NodeJS.ErrnoException;
  if (code === 'ENOENT' && verb === 'read') return smallFileError(file, 'does not exist');
  const line = describeFileSystemError(error);
  if (line === undefined) return error;
  const problem = path !== undefined ? line.replace(`${path}: `, '') : line;
  return smallFileError(file, `cannot be ${verb}: ${problem}`);
}

/**
 * The text of a small regular file, at most `file.cap` bytes, or a HeaphookError naming it:
 * a FIFO, a device or a directory is refused before it is opened (no open or read that waits
 * or never ends: /dev/zero, a pipe without a writer), the open cannot block (O_NONBLOCK) and
 * is checked again, and reading stops one byte past the cap.
 */
export function readSmallFile(path: string, file: SmallFile): string {
  let fd: number | undefined;
  try {
    const before = statSync(path);
    if (!before.isFile()) throw smallFileError(file, `is ${kindOf(before)}, not a regular file`);
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
    const after = fstatSync(fd);
    if (!after.isFile()) throw smallFileError(file, `is ${kindOf(after)}, not a regular file`);
    const buffer = Buffer.allocUnsafe(file.cap + 1);
    let length = 0;
    while (length < buffer.length) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
    }
    if (length > file.cap) {
      throw smallFileError(file, `holds more than ${file.cap} bytes, the most it may`);
    }
    return buffer.toString('utf8', 0, length);
  } catch (error) {
    throw fileSystemProblem(file, error, 'read');
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Writes a small file the user names (a JUnit report): a regular file, created or truncated;
 * an existing FIFO, device or directory is refused, never opened for writing (a FIFO without
 * a reader would block the write forever), and the open itself cannot block.
 */
export function writeSmallFile(
  path: string,
  data: string,
  file: Pick<SmallFile, 'name' | 'wanted'>,
): void {
  let fd: number | undefined;
  try {
    let before: Stats | undefined;
    try {
      before = statSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (before !== undefined && !before.isFile()) {
      throw smallFileError(file, `is ${kindOf(before)}, not a regular file`);
    }
    fd = openSync(
      path,
      constants.O_WRONLY |
        constants.O_CREAT |
        constants.O_TRUNC |
        constants.O_NONBLOCK |
        constants.O_NOCTTY,
      0o666,
    );
    const after = fstatSync(fd);
    if (!after.isFile()) throw smallFileError(file, `is ${kindOf(after)}, not a regular file`);
    const bytes = Buffer.from(data, 'utf8');
    for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at, bytes.length - at);
  } catch (error) {
    throw fileSystemProblem(file, error, 'written');
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
