/**
 * A recording session: what `heaphook record` ran and which of its logs is the program's own.
 *
 * A command rarely runs alone: a pyenv shim is a shell script that forks helpers and then execs
 * python; `env`, `nice`, `sh -c 'exec ...'` exec the program; a shell runs a pipeline in
 * children. Every traced image writes a log, so one `record` can leave dozens. The program's
 * own log is the last image of the process `record` started: the PROCESS record whose parent
 * is record's own process and which was not forked (an exec keeps the pid; the images of one
 * pid follow each other in start time). The session manifest, `heaphook-session.<collector
 * pid>.json` beside the logs, records each log with its pid, parent, command line and role,
 * so `report DIR`, `recommend DIR` and `dump DIR` pick the program's log, or the one `--pid`
 * names, or every log (`--all`). It is written atomically (a temporary file renamed), into
 * room reserved before the recording, so a full disk leaves the manifest whole or absent.
 */
import {
  closeSync,
  ftruncateSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

import { describeFileSystemError, HeaphookError, jsonText } from '@heaphook/core';

import { readProcessRecord } from './decoder.js';
import { readSmallFile } from './input.js';

export const SESSION_FILE_PATTERN = /^heaphook-session\.(\d+)\.json$/;
const LOG_FILE_PATTERN = /^heaplog\.\d+(\.\d+)?\.log$/;

/** A log's part in its session. */
export type SessionRole =
  /** the last image of the process record started: the program itself */
  | 'program'
  /** an earlier image of that process (a shim, env, a shell that exec'd the program) */
  | 'exec-chain'
  /** any other process: a child of the program or of a shim */
  | 'child';

export interface SessionLog {
  /** The log's file name, in the session's folder. */
  readonly file: string;
  readonly pid: number;
  readonly ppid: number;
  readonly exe: string;
  readonly argv: readonly string[];
  readonly forkChild: boolean;
  readonly startTimeMs: number;
  readonly role: SessionRole;
  /** Events in the log, as the collector counted them (manifests from before it have none). */
  readonly events?: number;
}

export interface Session {
  readonly version: 1;
  /** The command as given to record, and its arguments. */
  readonly command: string;
  readonly args: readonly string[];
  /** The collector's pid: it names the manifest. */
  readonly recorderPid: number;
  /** The parent of the process record started (record's own process). Manifests written
   * before record started the command itself have none: their parent was the collector. */
  readonly parentPid?: number;
  /** The command's exit status (128 + signal when a signal ended it). */
  readonly status: number;
  /** The program's log (a file of `logs`), when one was written. */
  readonly program?: string;
  readonly logs: readonly SessionLog[];
}

/**
 * Gives each log its role: among the logs of unforked processes whose parent is the process
 * that started the command, the latest started is the program, the others the exec chain
 * before it.
 */
export function assignRoles(
  logs: readonly Omit<SessionLog, 'role'>[],
  parentPid: number,
): SessionLog[] {
  const root = logs.filter((l) => l.ppid === parentPid && !l.forkChild);
  const program = root.reduce<Omit<SessionLog, 'role'> | undefined>(
    (latest, l) => (latest === undefined || l.startTimeMs >= latest.startTimeMs ? l : latest),
    undefined,
  );
  return logs.map((l) => ({
    ...l,
    role: l === program ? 'program' : root.includes(l) ? 'exec-chain' : 'child',
  }));
}

/** The manifest's place in dir. */
export function sessionPath(dir: string, recorderPid: number): string {
  return join(dir, `heaphook-session.${recorderPid}.json`);
}

/** Bytes a reservation (reserveSession) holds: the manifest of ~200 logs. */
const RESERVED_BYTES = 64 * 1024;

/**
 * Reserves the room of a session manifest in dir before a recording, so that it can still be
 * written when the logs have filled the disk: a hidden file of RESERVED_BYTES (not a manifest
 * by its name), which writeSession overwrites and renames. Undefined when it cannot be made.
 */
export function reserveSession(dir: string): string | undefined {
  const path = join(dir, `.heaphook-session.${process.pid}.${Date.now()}.tmp`);
  try {
    writeFileSync(path, Buffer.alloc(RESERVED_BYTES, 0x20), { flag: 'wx' });
    return path;
  } catch {
    rmSync(path, { force: true });
    return undefined;
  }
}

/** Removes a reservation that was not used. */
export function releaseSession(reserved: string | undefined): void {
  if (reserved !== undefined) rmSync(reserved, { force: true });
}

/**
 * Writes text to path atomically: into a temporary file beside it (the reservation, when
 * given: overwritten in place, so no new room is needed), renamed over path. A reader sees the
 * old file or the new one, never a part; on failure the temporary file is removed and a
 * HeaphookError names path and the cause.
 */
function writeAtomically(path: string, text: string, reserved?: string): void {
  const temp = reserved ?? join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    const fd = openSync(temp, reserved !== undefined ? 'r+' : 'wx');
    try {
      const bytes = Buffer.from(text);
      let done = 0;
      while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done, done);
      ftruncateSync(fd, bytes.length);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (error) {
    rmSync(temp, { force: true });
    throw new HeaphookError(
      `cannot write the session manifest ${path}: ${describeFileSystemError(error) ?? (error as Error).message}`,
    );
  }
}

/**
 * Writes the session's manifest beside its logs (atomically: see writeAtomically; into the
 * reservation of reserveSession when given); returns the session, or throws a HeaphookError
 * naming the manifest when it cannot be written.
 */
export async function writeSession(
  dir: string,
  run: {
    command: string;
    args: readonly string[];
    recorderPid: number;
    parentPid: number;
    status: number;
  },
  logPaths: readonly string[],
  reserved?: string,
  events?: ReadonlyMap<string, number>,
): Promise<Session> {
  const described: Omit<SessionLog, 'role'>[] = [];
  for (const path of logPaths) {
    const p = await readProcessRecord(path);
    if (p === undefined) continue;
    const n = events?.get(path);
    described.push({
      ...(n !== undefined ? { events: n } : {}),
      file: basename(path),
      pid: p.pid,
      ppid: p.ppid,
      exe: p.exe,
      argv: p.argv,
      forkChild: p.forkChild,
      startTimeMs: p.startTimeMs,
    });
  }
  const logs = assignRoles(described, run.parentPid);
  const program = logs.find((l) => l.role === 'program');
  const session: Session = {
    version: 1,
    command: run.command,
    args: run.args,
    recorderPid: run.recorderPid,
    parentPid: run.parentPid,
    status: run.status,
    ...(program !== undefined ? { program: program.file } : {}),
    logs,
  };
  writeAtomically(sessionPath(dir, run.recorderPid), `${jsonText(session, 2)}\n`, reserved);
  return session;
}

/** The most a session manifest may hold (a session of thousands of logs, each with its argv). */
export const SESSION_FILE_CAP = 64 * 1024 * 1024;

/** The newest session manifest in a folder (by modification time), if any. */
export function readLatestSession(dir: string): Session | undefined {
  const manifests = readdirSync(dir)
    .filter((f) => SESSION_FILE_PATTERN.test(f))
    .map((f) => ({ path: join(dir, f), mtime: statSync(join(dir, f)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  const newest = manifests[0];
  if (newest === undefined) return undefined;
  const text = readSmallFile(newest.path, {
    name: newest.path,
    wanted: 'name a log instead',
    cap: SESSION_FILE_CAP,
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new HeaphookError(
      `${newest.path} is not a session manifest (${(error as Error).message}); name a log instead`,
    );
  }
  const session = parsed as Partial<Session>;
  if (session.version !== 1 || !Array.isArray(session.logs)) {
    throw new HeaphookError(
      `${newest.path} is not a version 1 session manifest; name a log instead`,
    );
  }
  return session as Session;
}

export interface LogChoice {
  /** The log of this process (its last image when it exec'd). */
  readonly pid?: number;
  /** Every log of the session (or of the folder). */
  readonly all?: boolean;
}

function describeLog(l: SessionLog): string {
  return `${l.file} (pid ${l.pid}, ${l.role}: ${l.argv.join(' ').slice(0, 60)})`;
}

/**
 * The logs a command reads for `target`: a log file is itself; a folder is resolved through its
 * newest session manifest (the program's log, the one `--pid` names, or all of them); a folder
 * without a manifest (logs written standalone) gives its one log, or all with `--all`.
 */
export function resolveLogs(target: string, choice: LogChoice = {}): string[] {
  let isDir = false;
  try {
    isDir = statSync(target).isDirectory();
  } catch {
    // not there: the reader names the missing file
  }
  if (!isDir) {
    if (choice.pid !== undefined || choice.all === true) {
      throw new HeaphookError(
        `--pid and --all choose among the logs of a folder; ${target} is one log (give its folder)`,
        { namesCommand: true },
      );
    }
    return [target];
  }
  const dir = resolve(target);
  const session = readLatestSession(dir);
  if (session === undefined) {
    const logs = readdirSync(dir)
      .filter((f) => LOG_FILE_PATTERN.test(f))
      .sort()
      .map((f) => join(dir, f));
    if (choice.all === true || logs.length === 1) return logs;
    throw new HeaphookError(
      logs.length === 0
        ? `${target} is a directory with no heaplog.<pid>.log and no session manifest; give a heaplog file (heaplog.<pid>.log) or the folder heaphook record wrote`
        : `${target} holds ${logs.length} logs and no session manifest (heaphook record writes one): name one log, or give --all`,
      { namesCommand: true },
    );
  }
  if (choice.all === true) return session.logs.map((l) => join(dir, l.file));
  if (choice.pid !== undefined) {
    const ofPid = session.logs.filter((l) => l.pid === choice.pid);
    const last = ofPid.reduce<SessionLog | undefined>(
      (latest, l) => (latest === undefined || l.startTimeMs >= latest.startTimeMs ? l : latest),
      undefined,
    );
    if (last === undefined) {
      const pids = [...new Set(session.logs.map((l) => l.pid))].join(', ');
      throw new HeaphookError(`no log of pid ${choice.pid} in ${target} (its pids: ${pids})`, {
        namesCommand: true,
      });
    }
    return [join(dir, last.file)];
  }
  const picked = programChoice(dir, session);
  if (picked !== undefined) return [join(dir, picked.chosen.file)];
  if (session.program === undefined) {
    throw new HeaphookError(
      `the session in ${target} has no log of the program itself (it may have been killed before it started): give --pid, or --all. Its logs: ${session.logs.map(describeLog).join('; ')}`,
      { namesCommand: true },
    );
  }
  return [join(dir, session.program)];
}

/** How many times the program's events a descendant must do to be reported instead of it. */
export const DESCENDANT_FACTOR = 10;

/** Which log `report DIR` (and `check`, `recommend`, `dump`) reads, and why. */
export interface ProgramChoice {
  /** The log read. */
  readonly chosen: SessionLog;
  /** The exec-chain program: the last image of the process record started. */
  readonly program: SessionLog;
  /** Why `chosen` was picked, in words. */
  readonly reason: string;
  /** The session's other logs. */
  readonly others: readonly SessionLog[];
  /** Events of each log (the manifest's count, or estimated from the file's size). */
  readonly events: ReadonlyMap<SessionLog, number>;
  /** True when some counts are estimates (a manifest written before counts were kept). */
  readonly estimated: boolean;
}

/** argv[0]'s base name, or the executable's: how a person names a program. */
export function programName(l: Pick<SessionLog, 'argv' | 'exe'>): string {
  const first = l.argv[0] ?? l.exe;
  return first.slice(first.lastIndexOf('/') + 1) || l.exe;
}

/**
 * The log a person means by "the program": the exec-chain program, unless a descendant did at
 * least DESCENDANT_FACTOR times its events (`gcc` runs `cc1`, which does the work; a shell
 * script runs its tool): then the descendant with the most events.
 */
export function programChoice(dir: string, session: Session): ProgramChoice | undefined {
  const program = session.logs.find((l) => l.file === session.program);
  if (program === undefined) return undefined;
  const estimated = session.logs.some((l) => l.events === undefined);
  const events = new Map<SessionLog, number>();
  for (const l of session.logs) {
    let n = l.events;
    if (n === undefined) {
      // An older manifest: a log's size stands for its events (about 0.7 bytes an event).
      try {
        n = Math.round(statSync(join(dir, l.file)).size / 0.7);
      } catch {
        n = 0;
      }
    }
    events.set(l, n);
  }
  const own = events.get(program)!;
  const busiest = session.logs
    .filter((l) => l !== program && l.role === 'child')
    .reduce<SessionLog | undefined>(
      (best, l) => (best === undefined || events.get(l)! > events.get(best)! ? l : best),
      undefined,
    );
  const others = session.logs.filter((l) => l !== program);
  const count = (n: number): string => n.toLocaleString('en-US');
  if (busiest !== undefined && events.get(busiest)! >= DESCENDANT_FACTOR * Math.max(own, 1)) {
    const n = events.get(busiest)!;
    const times = own > 0 ? `${Math.floor(n / own).toLocaleString('en-US')}×` : 'all';
    return {
      chosen: busiest,
      program,
      reason: `${programName(busiest)} (pid ${busiest.pid}) did ${count(n)} events, ${times} the ${count(own)} of ${programName(program)} (pid ${program.pid}), the program record started; a descendant that does ${DESCENDANT_FACTOR}× or more the program's events is the one reported (--pid ${program.pid} for ${programName(program)})`,
      others: session.logs.filter((l) => l !== busiest),
      events,
      estimated,
    };
  }
  return {
    chosen: program,
    program,
    reason: `${programName(program)} (pid ${program.pid}) is the program record started${others.length > 0 ? ` (the last image of its process), and no descendant did ${DESCENDANT_FACTOR}× its ${count(own)} events` : ''}`,
    others,
    events,
    estimated,
  };
}

/** The choice `resolveLogs` makes for a folder without --pid / --all, when it is a session's. */
export function folderChoice(target: string): ProgramChoice | undefined {
  try {
    if (!statSync(target).isDirectory()) return undefined;
  } catch {
    return undefined;
  }
  const dir = resolve(target);
  const session = readLatestSession(dir);
  return session === undefined ? undefined : programChoice(dir, session);
}
