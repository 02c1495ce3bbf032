// `heaphook watch`: the memory events of a command it starts (libheaphook_ucm.so preloaded,
// HEAPHOOK_MEM_WATCH_SOCKET set) or of a running process (the library injected, and its
// heaphook_ucm_stream_start called there), printed as they arrive.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

import { exitStatusOf, HeaphookError, injectCall, InjectRefusal } from '@heaphook/core';

import { libraryPath } from '../index.js';
import { MemoryEvent } from '../constants.js';
import type { MemoryEventName } from '../watch.js';
import { describeEvent, EVENT_HEADER, formatEventLine } from './format.js';
import { eventName } from './protocol.js';
import {
  WatchServer,
  type StreamEnd,
  type StreamListener,
  type StreamStart,
  type WatchConnection,
} from './server.js';

/** Exit status when the target could not be watched (no connection, install failed). */
export const EXIT_NOT_WATCHED = 1;

/** What `heaphook watch` asks of a session (not the in-process API's WatchOptions, watch.ts). */
export interface WatchSessionOptions {
  /** MemoryEvent bits to record. */
  readonly events: number;
  /** The target's ring, in events (a power of two). */
  readonly ringRecords: number;
  readonly json: boolean;
  /** Stop watching after this many milliseconds. */
  readonly durationMs?: number;
  /** Where event lines go (and, with json, every line). */
  readonly out: NodeJS.WritableStream;
  /** Where the text mode's attach, detach and summary lines go. */
  readonly err: NodeJS.WritableStream;
}

function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** Prints what the streams carry and counts it. */
class Printer implements StreamListener {
  private zeroNs: number | undefined;
  private readonly startedAt = Date.now();
  readonly counts = new Map<MemoryEventName, number>();
  private total = 0;
  private droppedTotal = 0;
  private readonly pids = new Set<number>();
  /** Event lines not yet written (written once per chunk read: one write per batch, not per line). */
  private pending: string[] = [];
  /** Set by summary(): the output may be closed after it, nothing more is written. */
  private closed = false;

  constructor(private readonly options: WatchSessionOptions) {
    for (const [name, bit] of Object.entries(MemoryEvent)) {
      if (options.events & bit) this.counts.set(name as MemoryEventName, 0);
    }
  }

  private note(line: string, json: Record<string, unknown>): void {
    if (this.closed) return;
    this.flush();
    if (this.options.json) this.options.out.write(`${JSON.stringify(json)}\n`);
    else this.options.err.write(`heaphook watch: ${line}\n`);
  }

  connected(c: WatchConnection): void {
    this.zeroNs ??= c.hello.startNs;
    this.pids.add(c.pid);
  }

  started(c: WatchConnection, start: StreamStart): void {
    const comm = commOf(c.pid);
    if (start.status !== 0) {
      this.note(
        `pid ${c.pid} (${comm}): its memory events could not be installed (status ${start.status}); it runs on, unwatched`,
        { type: 'FAILED', pid: c.pid, comm, status: start.status },
      );
      return;
    }
    this.note(`pid ${c.pid} (${comm}): watching, ${start.mode} mode`, {
      type: 'ATTACHED',
      pid: c.pid,
      comm,
      mode: start.mode,
      ring: start.ringRecords,
    });
  }

  event(c: WatchConnection, record: Parameters<StreamListener['event']>[1]): void {
    const name = eventName(record.type);
    if (name === undefined) return;
    const e = describeEvent(record, c.pid, this.zeroNs ?? c.hello.startNs);
    this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
    // The text's columns are named once, above the first event.
    if (this.total === 0 && !this.options.json) this.pending.push(EVENT_HEADER);
    this.total += 1;
    this.pending.push(this.options.json ? JSON.stringify(e) : formatEventLine(e));
  }

  flush(): void {
    if (this.closed || this.pending.length === 0) return;
    this.options.out.write(`${this.pending.join('\n')}\n`);
    this.pending = [];
  }

  dropped(c: WatchConnection, count: number): void {
    this.droppedTotal += count;
    this.note(
      `pid ${c.pid}: ${count} events dropped (its ring of ${c.start?.ringRecords ?? '?'} events was full; a larger --buffer keeps them)`,
      { type: 'DROPPED', pid: c.pid, count },
    );
  }

  ended(c: WatchConnection, end: StreamEnd): void {
    const hooks =
      end.reason === 'detached' ? (end.restored ? ', hooks removed' : ', hooks kept') : '';
    this.note(
      `pid ${c.pid}: ${end.reason}${hooks}, ${end.recorded} events, ${end.dropped} dropped`,
      {
        type: 'DETACHED',
        pid: c.pid,
        reason: end.reason,
        restored: end.restored,
        events: Number(end.recorded),
        dropped: Number(end.dropped),
      },
    );
  }

  summary(): void {
    this.flush();
    this.closed = true;
    const seconds = (Date.now() - this.startedAt) / 1000;
    const counts = Object.fromEntries(this.counts);
    if (this.options.json) {
      this.options.out.write(
        `${JSON.stringify({
          type: 'SUMMARY',
          processes: this.pids.size,
          events: this.total,
          seconds,
          dropped: this.droppedTotal,
          counts,
        })}\n`,
      );
      return;
    }
    const n = this.pids.size;
    this.options.err.write(
      `heaphook watch: ${n} process${n === 1 ? '' : 'es'}, ${this.total} events in ${seconds.toFixed(3)} s, ${this.droppedTotal} dropped\n` +
        `  ${[...this.counts].map(([name, count]) => `${name} ${count}`).join(', ')}\n`,
    );
  }
}

/** A timeout to race against: unref'd, so a race already won does not hold the process open. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Resolves on the first of SIGINT / SIGTERM / SIGHUP (handlers removed by the returned stop). */
function onInterrupt(action: (signal: NodeJS.Signals) => void): () => void {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const s of signals) process.on(s, action);
  return () => {
    for (const s of signals) process.off(s, action);
  };
}

/** Detaches every connection and waits for their END while their events still come (at most
 * quietMs without a byte). */
async function detachAndSettle(server: WatchServer, quietMs: number): Promise<boolean> {
  server.stopAccepting();
  server.detachAll();
  return server.settledUnlessQuiet(quietMs);
}

/**
 * `heaphook watch -- COMMAND...`: runs the command with libheaphook_ucm.so preloaded and the
 * socket in HEAPHOOK_MEM_WATCH_SOCKET; every process of it that execs (children too) streams
 * its events. Returns the command's exit status.
 */
export async function watchCommand(
  command: string,
  args: readonly string[],
  options: WatchSessionOptions,
): Promise<number> {
  const printer = new Printer(options);
  const server = await WatchServer.listen({
    events: options.events,
    ringRecords: options.ringRecords,
    listener: printer,
  });
  try {
    const existing = (process.env.LD_PRELOAD ?? '').split(/[\s:]+/).filter((p) => p !== '');
    const library = libraryPath();
    const child = spawn(command, [...args], {
      stdio: 'inherit',
      env: {
        ...process.env,
        LD_PRELOAD: [library, ...existing.filter((p) => p !== library)].join(':'),
        HEAPHOOK_MEM_WATCH_SOCKET: server.socketPath,
      },
    });
    const stopSignals = onInterrupt((signal) => child.kill(signal));
    // The duration counts from the first process's attach, as with -p: a command slow to
    // start (a loaded machine, a big loader) is watched for as long as one quick to start.
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    if (options.durationMs !== undefined) {
      const durationMs = options.durationMs;
      void server.firstStart.then(() => {
        if (!ended) timer = setTimeout(() => void detachAndSettle(server, 10_000), durationMs);
      });
    }
    const status = await new Promise<number>((resolve) => {
      child.on('error', (error: NodeJS.ErrnoException) => {
        options.err.write(`heaphook watch: cannot run ${command}: ${error.message}\n`);
        resolve(error.code === 'ENOENT' ? 127 : 126);
      });
      child.on('close', (code, signal) => resolve(exitStatusOf(code, signal)));
    });
    ended = true;
    if (timer !== undefined) clearTimeout(timer);
    stopSignals();
    // Descendants that outlive the command: a moment to end on their own, then detached.
    const alone = await Promise.race([
      server.settled().then(() => true),
      sleep(1000).then(() => false),
    ]);
    if (!alone) await detachAndSettle(server, 10_000);
    printer.summary();
    return status;
  } finally {
    server.close();
  }
}

function uidGidOf(pid: number): { uid: number; gid: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    const gid = /^Gid:\s+(\d+)/m.exec(status)?.[1];
    return uid !== undefined && gid !== undefined
      ? { uid: Number(uid), gid: Number(gid) }
      : undefined;
  } catch {
    return undefined;
  }
}

const startErrors: Readonly<Record<number, string>> = {
  16: 'it is already being watched (another heaphook watch is attached, or still detaching): detach that one first',
  11: 'the library could not create its thread there',
  2: "it cannot reach the watcher's socket (another mount namespace or chroot?)",
  13: "it may not connect to the watcher's socket (permission denied)",
  111: "the watcher's socket refused the connection",
};

/**
 * `heaphook watch -p PID`: injects libheaphook_ucm.so into the process, has it stream its
 * events, and detaches (hooks removed, the library's thread ended) at the duration's end, on
 * Ctrl-C, or when the process exits. Refusals of the injector pass through with their exit
 * status.
 */
export async function watchPid(pid: number, options: WatchSessionOptions): Promise<number> {
  const printer = new Printer(options);
  const owner = process.getuid?.() === 0 ? uidGidOf(pid) : undefined;
  const server = await WatchServer.listen({
    events: options.events,
    ringRecords: options.ringRecords,
    listener: printer,
    owner: owner !== undefined && owner.uid !== 0 ? owner : undefined,
  });
  const library = libraryPath();
  try {
    let result: number;
    try {
      result = await injectCall({
        pid,
        library,
        symbol: 'heaphook_ucm_stream_start',
        argument: server.socketPath,
      });
    } catch (error) {
      // The injector's refusal: its one line and its exit status, named as this command's.
      if (error instanceof InjectRefusal) {
        throw new HeaphookError(error.message, {
          exitStatus: error.exitCode,
          namesCommand: true,
        });
      }
      throw error;
    }
    if (result !== 0) {
      const why = startErrors[-result] ?? `heaphook_ucm_stream_start returned ${result}`;
      throw new HeaphookError(`pid ${pid} cannot be watched: ${why}`, {
        exitStatus: EXIT_NOT_WATCHED,
        namesCommand: true,
      });
    }
    const connection = await server.started(pid, 15_000);
    if (connection === undefined) {
      await injectCall({ pid, library, symbol: 'heaphook_ucm_stream_stop' }).catch(() => undefined);
      throw new HeaphookError(
        `pid ${pid} did not connect within 15 s (is it stopped, or stuck in the loader?)`,
        { exitStatus: EXIT_NOT_WATCHED, namesCommand: true },
      );
    }
    // Ctrl-C is the ordinary way to end a watch: it detaches, and the exit status is 0.
    await new Promise<void>((resolve) => {
      const stopSignals = onInterrupt(finish);
      const timer =
        options.durationMs !== undefined ? setTimeout(finish, options.durationMs) : undefined;
      void connection.ended.then(finish);
      function finish(): void {
        stopSignals();
        if (timer !== undefined) clearTimeout(timer);
        resolve();
      }
    });
    if (connection.end === undefined) {
      connection.detach();
      // The events already in its ring and the socket come first, then END: waited for while
      // they still come (a busy target under load sends for seconds), given up after 10 s
      // without a byte.
      if (!(await connection.endsUnlessQuiet(10_000))) {
        // The thread did not answer the half-close: ask through the injector as well.
        await injectCall({ pid, library, symbol: 'heaphook_ucm_stream_stop' }).catch(
          () => undefined,
        );
        await connection.endsUnlessQuiet(5_000);
      }
    }
    printer.summary();
    return connection.start?.status === 0 ? 0 : EXIT_NOT_WATCHED;
  } finally {
    server.close();
  }
}
