/**
 * Crashes, damaged logs and forks: a crashing target keeps every record written before the
 * crash; a truncated or corrupted log names the offset and decodes up to it; forking while
 * other threads allocate never deadlocks and each child gets its own log.
 */
import { copyFileSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it, onTestFinished } from 'vitest';

import { spawn } from 'node:child_process';

import {
  collectorPath,
  decodeLog,
  LogFormatError,
  record,
  summarize,
  type LogRecord,
} from '../src/index.js';
import { forker, heaphookBin, logsIn, scratch, tracer, traced, workload } from './helpers.js';

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

/**
 * `heaphook record` (the real CLI) of `sh -c '<outlive program>; echo status=$?'` in a process
 * group of its own, as a terminal runs it; a small ring, so the program's threads wait for room
 * in it (lossless mode) whenever the collector does not read. The program allocates until the
 * marker file exists, then enough to fill the ring many times, forks, and prints "done".
 */
function recordOutliver(dir: string, shellPrefix = '') {
  const marker = join(dir, 'marker');
  const cli = spawn(
    process.execPath,
    [
      heaphookBin,
      'record',
      '-o',
      dir,
      '--no-vm',
      '-e',
      'HEAPHOOK_BUFFER_SIZE=64KiB',
      '--',
      '/bin/sh',
      '-c',
      `${shellPrefix}${workload} outlive ${marker} 2 200000; echo status=$?`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  const run = {
    cli,
    marker,
    stdout: '',
    stderr: '',
    exited: new Promise<number | null>((resolve) => cli.on('exit', resolve)),
    // every holder of the pipes gone: the CLI, the collector, the shell and the program
    closed: new Promise<void>((resolve) => cli.stdout.on('end', resolve)),
    /** The first match of pattern in what the stream gives; fails once the stream ends without. */
    until: (stream: 'stdout' | 'stderr', pattern: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        const look = () => {
          const m = pattern.exec(run[stream]);
          if (m !== null) resolve(m);
          else if (cli[stream].readableEnded)
            reject(new Error(`no ${pattern} in ${stream}: ${run[stream]}`));
          else cli[stream].once('data', () => setImmediate(look));
        };
        cli[stream].once('end', () => setImmediate(look));
        look();
      }),
    /** SIGINT to the whole group, as a terminal's Ctrl-C. */
    ctrlC: () => process.kill(-cli.pid!, 'SIGINT'),
    cleanup: () => {
      try {
        process.kill(-cli.pid!, 'SIGKILL');
      } catch {
        // all gone
      }
    },
  };
  cli.stdout.setEncoding('utf8').on('data', (chunk: string) => (run.stdout += chunk));
  cli.stderr.setEncoding('utf8').on('data', (chunk: string) => (run.stderr += chunk));
  onTestFinished(run.cleanup); // also after a timeout: the program would spin on
  return run;
}

/** The "collector is gone" lines of stderr, by the pid that wrote each. */
function goneLines(stderr: string): { pid: number; line: string }[] {
  return stderr
    .split('\n')
    .filter((line) => line.includes('the collector is gone'))
    .map((line) => ({ pid: Number(/^heaphook\[(\d+)\]/.exec(line)?.[1]), line }));
}

async function logOf(dir: string, pid: number) {
  for (const log of logsIn(dir)) {
    const s = await summarize(log);
    if (s.process?.pid === pid) return s;
  }
  throw new Error(`no log of ${pid} in ${dir}`);
}

describe('the program outlives heaphook record', () => {
  it('the collector killed (SIGKILL) mid-run: the program ends with its own status, one line', async () => {
    const dir = scratch('outlive-kill');
    const run = recordOutliver(dir);
    const pid = Number((await run.until('stdout', /running pid=(\d+)/))[1]);
    const children = readFileSync(`/proc/${run.cli.pid}/task/${run.cli.pid}/children`, 'utf8');
    const collector = Number(children.trim().split(/\s+/)[0]);
    process.kill(collector, 'SIGKILL');
    expect(await run.exited).toBe(137); // heaphook record: its collector died of SIGKILL
    writeFileSync(run.marker, ''); // now the program fills its ring with no one to read it
    await run.closed;
    // before: the program died of SIGPIPE at its next wake-up byte (status=141)
    expect(run.stdout).toContain('done child=0\n');
    expect(run.stdout).toContain('status=0\n');
    const gone = goneLines(run.stderr);
    const own = gone.filter((g) => g.pid === pid);
    expect(own, run.stderr).toHaveLength(1);
    expect(own[0]!.line).toMatch(
      /heaptrack: the collector is gone \(its connection ended: Broken pipe\); tracing stopped, \d+ events lost$/,
    );
    expect(new Set(gone.map((g) => g.pid)).size).toBe(gone.length); // once per process
  });

  it('one Ctrl-C that the command ignores: recording goes on to the end', async () => {
    const dir = scratch('outlive-ctrlc');
    const run = recordOutliver(dir, "trap '' INT; ");
    const pid = Number((await run.until('stdout', /running pid=(\d+)/))[1]);
    run.ctrlC();
    // before: heaphook record relayed the press, the collector counted two and stopped
    await run.until('stderr', /the signal went to the command; another one stops recording/);
    writeFileSync(run.marker, '');
    expect(await run.exited, run.stderr).toBe(0);
    await run.closed;
    expect(run.stdout).toContain('status=0\n');
    expect(goneLines(run.stderr)).toEqual([]);
    const s = await logOf(dir, pid);
    expect(s.end?.reason).toBe('exit');
    expect(s.end?.dropped).toBe(0);
  });

  it('two Ctrl-C: the logs are closed (END collector), the program runs on to its own status', async () => {
    const dir = scratch('outlive-ctrlc2');
    const run = recordOutliver(dir, "trap '' INT; ");
    const pid = Number((await run.until('stdout', /running pid=(\d+)/))[1]);
    run.ctrlC();
    await run.until('stderr', /the signal went to the command/);
    run.ctrlC();
    expect(await run.exited).toBe(130);
    writeFileSync(run.marker, '');
    await run.closed;
    // before: the program died of SIGPIPE once the collector had exited (status=141)
    expect(run.stdout).toContain('done child=0\n');
    expect(run.stdout).toContain('status=0\n');
    const own = goneLines(run.stderr).filter((g) => g.pid === pid);
    expect(own, run.stderr).toHaveLength(1);
    expect(own[0]!.line).toMatch(
      /the collector is gone \(heaphook record stopped recording this process\); tracing stopped, \d+ events lost$/,
    );
    const s = await logOf(dir, pid);
    expect(s.end?.reason).toBe('collector');
  });
});

describe('a program that closes descriptors it does not know about (standalone)', () => {
  // The tracer's descriptors sit at 200 and above: the drain's wake-up socket pair first
  // (200, 201), then the log. Closing 3..200 closes the drain's end only: a pipe in its place
  // raised SIGPIPE in the program at the next wake-up (status 141).
  for (const last of [200, 201]) {
    it(`closing 3..${last}, then allocating: the program is unharmed and every call is logged`, async () => {
      const dir = scratch(`close-fds-${last}`);
      const run = traced(dir, workload, ['close_fds', String(last)]);
      expect(run.signal).toBeNull();
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).toBe('closed and allocated\n');
      const logs = logsIn(dir);
      expect(logs).toHaveLength(1);
      const s = await summarize(logs[0]!);
      expect(s.calls.malloc).toBeGreaterThanOrEqual(400000);
      expect(s.end?.reason).toBe('exit');
    });
  }
});

describe('damaged logs', () => {
  async function goodLog(compress = 'none'): Promise<string> {
    const dir = scratch('damage');
    // Enough rounds that a cut at 60-70 % of the file lands inside a block, with whole blocks
    // before it: blocks are cut by their raw size, so 200,000 rounds (about 400,000 events)
    // give a dozen blocks, stored or deflated (38 KB deflated); zstd's blocks are one stream
    // that compresses so well (16 KB) that 70 % of the file is still the first blocks, so
    // its log gets three times the rounds. (It had 3,000,000 for both codecs: 160 s of the
    // suite, most of it comparing millions of decoded records.)
    const run = traced(dir, workload, ['churn', compress === 'zstd' ? '600000' : '200000'], {
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
    expect(result.stdout, result.stderr).toBe('children ok: 20\n');
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
    expect(run.stdout, run.stderr).toBe('children ok: 20\n');
    const logs = logsIn(dir);
    expect(logs).toHaveLength(21);
    for (const log of logs) {
      const s = await summarize(log);
      expect(s.end?.reason).toBe('exit');
    }
  });
});
