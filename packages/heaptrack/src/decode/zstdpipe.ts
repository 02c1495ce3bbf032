/**
 * zstd decompression by the `zstd` program (Debian package zstd) in a child process: the log's
 * zstd bytes go to its stdin block after block, the raw payloads come back on its stdout in
 * order. It runs on another core beside the decoder and is ~15x faster than fzstd (pure
 * JavaScript), which stays the fallback when no `zstd` is on PATH.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

import { MAX_BLOCK_PAYLOAD, MAX_ZSTD_WINDOW } from './format.generated.js';

/**
 * Decompressed bytes held before zstd's output is paused: more than any block (a read never
 * waits on a paused pipe), and a bound on memory whatever the input decompresses to.
 */
const HIGH_WATER = 2 * MAX_BLOCK_PAYLOAD + 1024 * 1024;

let found: string | null | undefined;

/** The `zstd` program on PATH, or undefined. */
export function zstdProgram(): string | undefined {
  if (found === undefined) {
    found = null;
    for (const dir of (process.env.PATH ?? '').split(delimiter)) {
      const p = join(dir, 'zstd');
      if (dir !== '' && existsSync(p)) {
        found = p;
        break;
      }
    }
  }
  return found ?? undefined;
}

export class ZstdPipe {
  private readonly child: ChildProcess;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private ended = false;
  private stderr = '';
  private wake: (() => void) | undefined;

  constructor(program: string) {
    // --memory: zstd refuses a frame whose window is larger (ZstdStreamGuard checks it first).
    const args = ['-d', '-c', '-q', `--memory=${MAX_ZSTD_WINDOW / 1024}KB`];
    this.child = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out = this.child.stdout!;
    out.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.buffered += d.length;
      // Backpressure: zstd waits on a full pipe instead of filling our memory.
      if (this.buffered >= HIGH_WATER) out.pause();
      this.notify();
    });
    out.on('end', () => {
      this.ended = true;
      this.notify();
    });
    this.child.stderr!.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString('utf8')).slice(-2000);
    });
    this.child.on('error', (e) => {
      this.stderr += e.message;
      this.ended = true;
      this.notify();
    });
    // zstd exits early on damage: what it did not read is of no use.
    this.child.stdin!.on('error', () => {});
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Queues compressed bytes (the caller bounds how far it writes ahead of its reads). */
  write(data: Uint8Array): void {
    if (!this.child.stdin!.destroyed) this.child.stdin!.write(data);
  }

  /** No more input: zstd writes out the rest. */
  end(): void {
    this.child.stdin!.end();
  }

  /** The next `n` decompressed bytes; throws when zstd ends before giving them. */
  async read(n: number): Promise<Buffer> {
    while (this.buffered < n && !this.ended) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
    if (this.buffered < n) {
      const why = this.stderr.trim().split('\n').at(-1) ?? '';
      throw new RangeError(`${this.buffered} bytes decompressed of ${n}${why ? `: ${why}` : ''}`);
    }
    let out: Buffer;
    const first = this.chunks[0]!;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let at = 0;
      while (at < n) {
        const c = this.chunks[0]!;
        const take = Math.min(c.length, n - at);
        c.copy(out, at, 0, take);
        at += take;
        if (take === c.length) this.chunks.shift();
        else this.chunks[0] = c.subarray(take);
      }
    }
    this.buffered -= n;
    if (this.buffered < HIGH_WATER) this.child.stdout!.resume();
    return out;
  }

  /**
   * After the last block: whether zstd gives more than the blocks announced (damage: a block
   * produced more than its length). Waits for its end or the first extra byte, no longer.
   */
  async producesMore(): Promise<boolean> {
    this.child.stdout!.resume();
    while (this.buffered === 0 && !this.ended) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
    return this.buffered > 0;
  }

  /** Stops the child (when the caller stops early). */
  close(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill();
  }
}
