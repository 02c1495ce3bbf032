/**
 * Crashes, damaged logs and forks: a crashing target keeps every record written before the
 * crash; a truncated or corrupted log names the offset and decodes up to it; forking while
 * other threads allocate never deadlocks and each child gets its own log.
 */
import { copyFileSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { spawn } from 'node:child_process';

import {
  collectorPath,
  decodeLog,
  LogFormatError,
  record,
  summarize,
  type LogRecord,
} from '../src/index.js';
import { forker, logsIn, scratch, tracer, traced, workload } from './helpers.js';

async function decodeAll(path: string): Promise<{ records: LogRecord[]; error?: unknown }> {
  const records: LogRecord[] = [];
  try {
    for await (const r of decodeLog(path)) records.push(r);
    return { records };
  } catch (error) {
    return { records, error };
  }
}

/**
 * Decodes a copy of the log cut to `length` bytes. A cut that falls exactly between two blocks
 * leaves a shorter log that is whole (what a process killed between two blocks leaves: no
 * error), so then the copy is cut one byte further, into the next block's header: a cut that
 * is always damage, wherever the blocks of this particular run happen to end.
 */
async function decodeCut(log: string, length: number) {
  const cut = `${log}.cut`;
  copyFileSync(log, cut);
  truncateSync(cut, length);
  const partial = await decodeAll(cut);
  if (partial.error !== undefined) return partial;
  copyFileSync(log, cut);
  truncateSync(cut, length + 1);
  return decodeAll(cut);
}

describe('a crashing target', () => {
  const ends = [
    ['segv', 128 + 11, 'SIGSEGV'],
    ['abort', 128 + 6, 'abort()'],
    ['handler', 3, '_exit from a signal handler'],
  ] as const;
  for (const [how, status, label] of ends) {
    it(`${label} under heaphook record leaves a log that decodes up to the crash`, async () => {
      const dir = scratch(`crash-${how}`);
      const result = await record(workload, ['crash', how], {
        outputDir: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      expect(result.status).toBe(status);
      expect(result.logs).toHaveLength(1);
      expect(result.logs[0]!.reason).toBe('lost');
      const s = await summarize(result.logs[0]!.path);
      expect(s.calls.malloc).toBe(100);
      expect(s.liveBytes).toBe(2400);
      expect(s.end?.reason).toBe('lost');
      expect(s.leakSites).toHaveLength(1);
    });
  }
});

describe('a target that ends through _exit, standalone', () => {
  /** Runs the test workload standalone with args; it must end with status and leave one log. */
  async function onlyLog(name: string, args: string[], status: number) {
    const dir = scratch(name);
    const run = traced(dir, workload, args);
    expect(run.status, run.stderr).toBe(status);
    const logs = logsIn(dir);
    expect(logs).toHaveLength(1); // a vfork child that never execs writes no log of its own
    return summarize(logs[0]!);
  }

  it('_exit from a signal handler: the log is finished, every record in it', async () => {
    const s = await onlyLog('exit-handler-standalone', ['crash', 'handler'], 3);
    expect(s.calls.malloc).toBe(100);
    expect(s.liveBytes).toBe(2400);
    expect(s.end?.reason).toBe('lost'); // ended without its exit path, nothing missing
  });

  it('_exit while four threads allocate: the log ends cleanly, every published call decodes', async () => {
    const s = await onlyLog('exit-busy-standalone', ['exit_busy', '4'], 7);
    expect(s.anomalies).toBe(0);
    expect(s.calls.malloc).toBeGreaterThanOrEqual(4 * 1000);
    expect(s.end?.reason).toBe('lost');
  });

  it("vfork children leaving through _exit leave the parent's log alone", async () => {
    const s = await onlyLog('vfork-exit-standalone', ['vfork'], 0);
    expect(s.calls.malloc).toBe(1000);
    expect(s.calls.free).toBe(1000);
    expect(s.end?.reason).toBe('exit');
  });

  it("forked children ending in _exit while the parent's threads allocate: each log complete", async () => {
    const dir = scratch('fork-exit-standalone');
    const run = traced(dir, forker, ['10', '3', '_exit']);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('children ok: 10\n');
    const logs = logsIn(dir);
    expect(logs).toHaveLength(11);
    let children = 0;
    for (const log of logs) {
      const s = await summarize(log);
      expect(s.anomalies).toBe(0);
      if (s.process?.forkChild === true) {
        children++;
        // child_work's 10 malloc + free pairs; _exit runs no exit path, so nothing else
        expect(s.calls.malloc).toBe(10);
        expect(s.calls.free).toBe(10);
        expect(s.end?.reason).toBe('lost');
      } else {
        expect(s.end?.reason).toBe('exit');
      }
    }
    expect(children).toBe(10);
  });
});

describe('stopping heaphook record', () => {
  it('Ctrl-C after the command exited stops waiting for what it left running', async () => {
    const dir = scratch('stop');
    const manifest = join(dir, 'logs.tsv');
    const collector = spawn(
      collectorPath(),
      [
        '--dir',
        dir,
        '--preload',
        tracer,
        '--manifest',
        manifest,
        '--quiet',
        '--',
        '/bin/sh',
        '-c',
        'sleep 20 & echo started',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    collector.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(out).toBe('started\n');
    const t0 = Date.now();
    collector.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => collector.on('exit', resolve));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(code).toBe(0); // the command's own status
    const lines = readFileSync(manifest, 'utf8').trim().split('\n');
    expect(lines.some((l) => l.endsWith('\tcollector'))).toBe(true); // sleep, still running
    for (const line of lines) await summarize(line.split('\t')[0]!);
    for (const line of lines.filter((l) => l.endsWith('\tcollector'))) {
      try {
        process.kill(Number(line.split('\t')[1]), 'SIGTERM'); // the sleep left behind
      } catch {
        // already gone
      }
    }
  });
});

describe('damaged logs', () => {
  async function goodLog(compress = 'none'): Promise<string> {
    const dir = scratch('damage');
    // Stored blocks (or many events): the log has many blocks.
    const run = traced(dir, workload, ['churn', compress === 'none' ? '200000' : '3000000'], {
      HEAPHOOK_STACKS: '0',
      HEAPHOOK_COMPRESS: compress,
    });
    expect(run.status, run.stderr).toBe(0);
    return logsIn(dir)[0]!;
  }

  it('a truncated log names the offset and everything before it decodes', async () => {
    const log = await goodLog();
    const whole = await decodeAll(log);
    expect(whole.error).toBeUndefined();
    const size = statSync(log).size;
    const partial = await decodeCut(log, Math.floor(size * 0.6));
    expect(partial.error).toBeInstanceOf(LogFormatError);
    const error = partial.error as LogFormatError;
    expect(error.message).toMatch(/truncated/);
    expect(error.message).toContain(`byte offset ${error.offset}`);
    expect(error.offset).toBeLessThanOrEqual(Math.floor(size * 0.6));
    expect(error.offset).toBeGreaterThan(size * 0.3);
    // Every record before the damage is the same as in the whole log.
    expect(partial.records.length).toBeGreaterThan(whole.records.length * 0.3);
    expect(partial.records).toEqual(whole.records.slice(0, partial.records.length));
  });

  for (const codec of ['deflate', 'zstd']) {
    it(`a ${codec} log cut short decodes up to the cut`, async () => {
      const log = await goodLog(codec);
      const whole = await decodeAll(log);
      expect(whole.error).toBeUndefined();
      const partial = await decodeCut(log, Math.floor(statSync(log).size * 0.7));
      expect((partial.error as LogFormatError).message).toMatch(/truncated.*byte offset \d+/);
      expect(partial.records.length).toBeGreaterThan(0);
      expect(partial.records).toEqual(whole.records.slice(0, partial.records.length));
    });
  }

  it('a corrupted byte is caught by the block CRC, with its block offset', async () => {
    const log = await goodLog();
    const whole = await decodeAll(log);
    const bytes = readFileSync(log);
    const at = Math.floor(bytes.length / 2);
    bytes[at] = bytes[at]! ^ 0x5a;
    const bad = log + '.bad';
    writeFileSync(bad, bytes);
    const partial = await decodeAll(bad);
    expect(partial.error).toBeInstanceOf(LogFormatError);
    const error = partial.error as LogFormatError;
    expect(error.message).toMatch(/CRC-32 mismatch/);
    expect(error.offset).toBeLessThanOrEqual(at);
    expect(partial.records).toEqual(whole.records.slice(0, partial.records.length));
    expect(partial.records.length).toBeGreaterThan(0);
  });

  it('a file that is not a heaplog says so', async () => {
    const dir = scratch('notalog');
    const path = join(dir, 'heaplog.1.log');
    writeFileSync(path, 'hello, this is not a log at all');
    const result = await decodeAll(path);
    expect((result.error as Error).message).toMatch(/not a heaplog/);
  });
});

describe('fork', () => {
  it('forking while other threads allocate: no deadlock, a log per child (record)', async () => {
    const dir = scratch('fork');
    const result = await record(forker, ['20', '3'], {
      outputDir: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe('children ok: 20\n');
    expect(result.logs).toHaveLength(21);
    let children = 0;
    for (const log of result.logs) {
      const s = await summarize(log.path);
      expect(s.anomalies).toBe(0);
      if (s.process?.forkChild === true) {
        children++;
        // child_work: 10 malloc + free pairs (exit may add libc's own calls)
        expect(s.calls.malloc).toBeGreaterThanOrEqual(10);
        expect(s.calls.free).toBeGreaterThanOrEqual(10);
      }
    }
    expect(children).toBe(20);
  });

  it('forking while other threads allocate: standalone', async () => {
    const dir = scratch('fork-standalone');
    const run = traced(dir, forker, ['20', '3']);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('children ok: 20\n');
    const logs = logsIn(dir);
    expect(logs).toHaveLength(21);
    for (const log of logs) {
      const s = await summarize(log);
      expect(s.end?.reason).toBe('exit');
    }
  });
});
