// Drives test/native/ucm_watch_target.c (a process that answers signals on stdout) and collects
// what a watcher receives from it.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { heaphookBin, settledValue, threadNames } from '@heaphook/core/testing';

import { eventName } from '../../src/stream/protocol.js';
import type { RawRecord } from '../../src/stream/protocol.js';
import type {
  StreamEnd,
  StreamListener,
  StreamStart,
  WatchConnection,
} from '../../src/stream/server.js';

export const release = (name: string): string =>
  fileURLToPath(new URL(`../../build/Release/${name}`, import.meta.url));

/** The sequence's events for N (see ucm_watch_target.c). */
/** Whether pid still runs the stream's thread (heaphook-watch), once it has had time to leave:
 * the thread ends just after it has sent END and closed the connection, so the watcher can be
 * gone before it is. */
export async function watchThreadRemains(pid: number): Promise<boolean> {
  return await settledValue(() => threadNames(pid).includes('heaphook-watch'), false);
}

export function expectedCounts(n: number): Record<string, number> {
  return {
    MMAP: n,
    MUNMAP: n,
    MREMAP: 1,
    MADVISE: 1,
    SBRK: 3,
    BRK: 1,
    SHMAT: 1,
    SHMDT: 1,
    VM_MAPPED: n + 3,
    VM_UNMAPPED: n + 4,
  };
}

/** This process's environment without LD_PRELOAD and heaphook's variables. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k !== 'LD_PRELOAD' && !k.startsWith('HEAPHOOK_')) env[k] = v;
  }
  return env;
}

/** The python3 interpreter itself, not a version manager's shim script in front of it. */
export function pythonExecutable(): string {
  return spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
    encoding: 'utf8',
  }).stdout.trim();
}

export class Target {
  readonly child: ChildProcessWithoutNullStreams;
  readonly lines: string[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[], env: NodeJS.ProcessEnv = {}) {
    this.child = spawn(release('ucm_watch_target'), [...args], { env: { ...cleanEnv(), ...env } });
    let partial = '';
    this.child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      partial += chunk;
      const parts = partial.split('\n');
      partial = parts.pop()!;
      this.lines.push(...parts);
    });
    this.child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.exited = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** The first line matching pattern from index `from` on; its index. */
  async line(
    pattern: RegExp,
    from = 0,
    timeoutMs = 30_000,
  ): Promise<{ text: string; index: number }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (let i = from; i < this.lines.length; i++) {
        if (pattern.test(this.lines[i]!)) return { text: this.lines[i]!, index: i };
      }
      if (Date.now() > deadline) {
        throw new Error(
          `no line ${pattern} from the target (lines: ${JSON.stringify(this.lines)}, stderr: ${this.stderr})`,
        );
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Sends signal and waits for the answer matching pattern (after the lines seen so far). */
  async ask(signal: NodeJS.Signals, pattern: RegExp): Promise<string> {
    const from = this.lines.length;
    this.child.kill(signal);
    return (await this.line(pattern, from)).text;
  }
}

/** Collects what a watcher receives: events counted by name, per connection. */
export class Collector implements StreamListener {
  readonly counts = new Map<number, Record<string, number>>();
  readonly starts = new Map<number, StreamStart>();
  readonly ends: Array<{ pid: number; end: StreamEnd }> = [];
  readonly records: Array<{ pid: number; record: RawRecord }> = [];
  /** Events the targets reported dropped, in DROPPED records. */
  droppedReported = 0;

  started(c: WatchConnection, start: StreamStart): void {
    this.starts.set(c.pid, start);
  }

  event(c: WatchConnection, record: RawRecord): void {
    const counts = this.counts.get(c.pid) ?? {};
    const name = eventName(record.type) ?? `0x${record.type.toString(16)}`;
    counts[name] = (counts[name] ?? 0) + 1;
    this.counts.set(c.pid, counts);
    this.records.push({ pid: c.pid, record });
  }

  dropped(_c: WatchConnection, count: number): void {
    this.droppedReported += count;
  }

  ended(c: WatchConnection, end: StreamEnd): void {
    this.ends.push({ pid: c.pid, end });
  }

  reset(): void {
    this.counts.clear();
    this.records.length = 0;
  }
}

/** The `heaphook` command of this checkout. */
export { heaphookBin };

/** The JSON lines of a `watch --json` output, by their type. */
export function jsonLines(text: string): Array<Record<string, unknown> & { type: string }> {
  return text
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown> & { type: string });
}
