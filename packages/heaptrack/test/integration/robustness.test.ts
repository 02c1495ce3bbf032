/**
 * Crashes, damaged logs and forks: a crashing target keeps every record written before the
 * crash; a truncated or corrupted log names the offset and decodes up to it; forking while
 * other threads allocate never deadlocks and each child gets its own log.
 */
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it, onTestFinished } from 'vitest';

import { spawn, spawnSync } from 'node:child_process';

import { decodeLog, LogFormatError, record, summarize, type LogRecord } from '../../src/index.js';
import { skipOutsideCI } from '@heaphook/core/testing';

import {
  forker,
  heaphookBin,
  logsIn,
  processStates,
  scratch,
  traced,
  withinOrExplain,
  workload,
} from '../helpers.js';

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

/**
 * The promise's value, or a failure naming what was awaited when it takes longer than ms, with
 * states() (what the processes were doing) when given: every wait of these tests is on a
 * condition with such a watchdog, never a bare sleep (the suite runs on loaded 2-core machines).
 */
function within<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
  states?: () => string,
): Promise<T> {
  return withinOrExplain(promise, ms, () =>
    [`waited ${ms / 1000} s for ${what}`, ...(states !== undefined ? [states()] : [])].join('\n'),
  );
}

/** The real CLI, run to its end (60 s watchdog): its status and output. */
async function heaphook(args: readonly string[]) {
  const child = spawn(process.execPath, [heaphookBin, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await within(
    new Promise<number | null>((resolve) => child.on('close', resolve)),
    60_000,
    `heaphook ${args.join(' ')} to end`,
  );
  return { code, stdout, stderr };
}

/** The child processes of pid (started by its main thread, as Node starts them). */
function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter((p) => p.length > 0)
    .map(Number);
}

/** The executable a log's PROCESS record names (undefined while the log has none). */
async function exeOf(log: string): Promise<string | undefined> {
  try {
    for await (const r of decodeLog(log)) if (r.type === 'process') return r.exe;
  } catch {
    // still being written
  }
  return undefined;
}

/** The log on disk holds a malloc event already (false while it has none, or none decodes). */
async function hasMalloc(log: string): Promise<boolean> {
  try {
    for await (const r of decodeLog(log)) if (r.type === 'event' && r.op === 'malloc') return true;
  } catch {
    // still being written: what decodes so far had none
  }
  return false;
}

/** The collector among the children of heaphook record (the other one is the command). */
function collectorOf(cliPid: number): number {
  const children = childrenOf(cliPid);
  const collector = children.find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('heaphook-heapt');
    } catch {
      return false; // gone meanwhile
    }
  });
  if (collector === undefined) throw new Error(`no collector among ${children.join(', ')}`);
  return collector;
}

describe('stopping heaphook record', () => {
  it('Ctrl-C after the command exited stops waiting for what it left running', async () => {
    const dir = scratch('stop');
    const cli = spawn(
      process.execPath,
      [
        heaphookBin,
        'record',
        '-o',
        dir,
        '--no-vm',
        '--',
        '/bin/sh',
        '-c',
        'sleep 300 & echo started',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    let out = '';
    let err = '';
    cli.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    cli.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const exited = new Promise<number | null>((resolve) => cli.on('exit', resolve));
    let sleepPid: number | undefined;
    onTestFinished(() => {
      if (sleepPid !== undefined) process.kill(sleepPid, 'SIGTERM'); // the sleep left behind
      try {
        process.kill(-cli.pid!, 'SIGKILL');
      } catch {
        // all gone
      }
    });
    // Once the shell has exited (record's only child left is the collector) and the sleep it
    // left running is traced (a log of sleep), record waits for the sleep.
    const ready = async (): Promise<boolean> => {
      if (!out.includes('started\n') || childrenOf(cli.pid!).length !== 1) return false;
      for (const log of logsIn(dir)) if ((await exeOf(log))?.endsWith('/sleep')) return true;
      return false;
    };
    await within(
      (async () => {
        while (!(await ready())) await new Promise((resolve) => setTimeout(resolve, 50));
      })(),
      60_000,
      'the shell to exit and the sleep it left to be traced',
    );
    cli.kill('SIGINT'); // record alone, as `kill -INT`: the collector stops
    expect(await within(exited, 60_000, 'heaphook record to end after SIGINT'), err).toBe(0);
    const ends = new Map<string, string | undefined>();
    for (const log of logsIn(dir)) {
      const s = await summarize(log);
      ends.set(s.process!.exe, s.end?.reason);
      if (s.end?.reason === 'collector') sleepPid = s.process!.pid;
    }
    expect(sleepPid, JSON.stringify([...ends])).toBeDefined(); // sleep, still running
    expect(existsSync(`/proc/${sleepPid}`)).toBe(true);
  });
});

/**
 * `heaphook record` (the real CLI) of `sh -c '<outlive program>; echo status=$?<suffix>'` in a
 * process group of its own, as a terminal runs it; a small ring, so the program's threads wait
 * for room in it (lossless mode) whenever the collector does not read. The program allocates
 * until the marker file exists, then enough to fill the ring many times, forks, and prints
 * "done".
 */
function recordOutliver(dir: string, shellPrefix = '', shellSuffix = '') {
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
      `${shellPrefix}${workload} outlive ${marker} 2 200000; echo status=$?${shellSuffix}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  let hasExited = false;
  // what the run said so far and where each of its processes stands (the group: the collector
  // and the command stay in it after heaphook record has exited)
  const states = (): string =>
    `stdout:\n${run.stdout}\nstderr:\n${run.stderr}\n${processStates(cli.pid!, 'group')}`;
  const run = {
    cli,
    marker,
    stdout: '',
    stderr: '',
    get hasExited() {
      return hasExited;
    },
    // 100 s from the start: under the test's own 120 s, so that a hang says where it stood
    exited: within(
      new Promise<number | null>((resolve) => cli.on('exit', resolve)),
      100_000,
      'heaphook record to exit',
      states,
    ),
    // every holder of the pipes gone: the CLI, the collector, the shell and the program
    closed: within(
      new Promise<void>((resolve) => cli.stdout.on('end', resolve)),
      100_000,
      'the program and its tools to close their output',
      states,
    ),
    /** The first match of pattern in what the stream gives; fails once the stream ends without,
     * or after 60 s. */
    until: (stream: 'stdout' | 'stderr', pattern: RegExp) =>
      within(
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
        60_000,
        `${pattern} in ${stream}`,
        states,
      ),
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
  void run.exited.then(() => (hasExited = true)).catch(() => {});
  void run.closed.catch(() => {});
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

describe('the program outlives its collector, or heaphook record', () => {
  it('the collector killed (SIGKILL) mid-run: record waits for the program and returns its status', async () => {
    const dir = scratch('outlive-kill');
    const run = recordOutliver(dir, '', '; echo last line >&2; exit 3');
    const pid = Number((await run.until('stdout', /running pid=(\d+)/))[1]);
    // The collector has written the start of each log (the shell's, the program's) to disk,
    // and the program's mallocs have reached its log (under load the first block may hold
    // only the PROCESS record: the program had not allocated yet when it was written).
    const ownLog = `${dir}/heaplog.${pid}.log`;
    const started = async (): Promise<boolean> => {
      const logs = logsIn(dir);
      if (!logs.includes(ownLog)) return false;
      for (const log of logs) if ((await exeOf(log)) === undefined) return false;
      return hasMalloc(ownLog);
    };
    await within(
      (async () => {
        while (!(await started())) await new Promise((resolve) => setTimeout(resolve, 50));
      })(),
      60_000,
      "the collector to write the first block of each log and the program's first malloc",
    );
    process.kill(collectorOf(run.cli.pid!), 'SIGKILL');
    // record says so, names what stays, and waits: the program is still before its marker
    const said = await run.until(
      'stderr',
      /the collector was killed by SIGKILL; tracing stopped\. (.*)\n/,
    );
    expect(said[1]).toContain(`${dir}/heaplog.${pid}.log`);
    expect(said[1]).toMatch(/The program runs on; waiting for it to end\.$/);
    expect(run.hasExited).toBe(false);
    writeFileSync(run.marker, ''); // now the program fills its ring with no one to read it
    // before: record exited 137 at once and the program ran on, orphaned
    expect(await run.exited, run.stderr).toBe(3); // the program's own status
    await run.closed;
    expect(run.stdout).toContain('done child=0\n');
    expect(run.stdout).toContain('status=0\n');
    // record's last lines come after the program's last one (both on the same stderr)
    const last = run.stderr.indexOf('last line\n');
    expect(last, run.stderr).toBeGreaterThan(-1);
    expect(run.stderr.indexOf('next: npx heaphook report', last), run.stderr).toBeGreaterThan(last);
    const gone = goneLines(run.stderr);
    const own = gone.filter((g) => g.pid === pid);
    expect(own, run.stderr).toHaveLength(1);
    expect(own[0]!.line).toMatch(
      /heaptrack: the collector is gone \(its connection ended: Broken pipe\); tracing stopped, \d+ events lost$/,
    );
    expect(new Set(gone.map((g) => g.pid)).size).toBe(gone.length); // once per process
    // What the collector wrote stays readable: the program's log (the shell's) through the
    // session, and the workload's by its pid; cut where the collector stopped (no END, or
    // a block cut short: status 3), the part before reported.
    for (const args of [[dir], [dir, '--pid', String(pid)]]) {
      const report = await heaphook(['report', ...args]);
      expect([0, 3], report.stderr).toContain(report.code);
      expect(report.stdout).toMatch(/^this run did not end normally: /);
      expect(report.stdout).toMatch(/^process: \d+ /m);
    }
    const workloadReport = await heaphook(['report', dir, '--pid', String(pid), '--json']);
    const json = JSON.parse(workloadReport.stdout) as {
      pid: number;
      end: string | null;
      calls: { malloc: number };
    };
    expect(json.pid).toBe(pid);
    expect(json.end).toBeNull();
    expect(json.calls.malloc).toBeGreaterThan(0);
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

describe('a full disk', () => {
  it('the log ends at the real count, the program runs on to its own status, report DIR works', async (ctx) => {
    // A 2 MiB tmpfs of the test's own: an uncompressed log of 6 M calls fills it early.
    const dir = join(scratch('full-disk'), 'tmpfs');
    mkdirSync(dir);
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir], {
      encoding: 'utf8',
    });
    if (mount.status !== 0) {
      const why = `this test fills a 2 MiB tmpfs it mounts, and mount failed (${mount.stderr.trim() || mount.error?.message}): run it as root`;
      if (skipOutsideCI(why)) return ctx.skip(why);
      throw new Error(why);
    }
    onTestFinished(() => {
      spawnSync('umount', ['-l', dir]);
    });
    const run = await heaphook([
      'record',
      '-o',
      dir,
      '--no-vm',
      '-e',
      'HEAPHOOK_COMPRESS=none',
      '--',
      workload,
      'churn',
      '3000000',
      '3',
    ]);
    // before: record exited 2 (no space for its session manifest, left empty), the program's
    // status lost, and the collector said it wrote 6,000,000 events of a log that held 567,110
    expect(run.code, run.stderr).toBe(3);
    expect(run.stdout).toBe('churned\n'); // the program ran to its end
    const line = new RegExp(
      `heaphook record: cannot write (${dir}/heaplog\\.(\\d+)\\.log): No space left on device; the log ends after (\\d+) events, and process \\2 runs on untraced\n`,
    ).exec(run.stderr);
    expect(line, run.stderr).not.toBeNull();
    const [, log, pid, count] = line!;
    expect(run.stderr).toContain(
      `heaptrack: the collector is gone (it could not write this process's log: No space left on device)`,
    );
    // the count is what the log holds: whole blocks, then END write_error when it fits
    const s = await summarize(log!);
    expect(s.events).toBe(Number(count));
    expect(s.events).toBeGreaterThan(1000);
    expect(s.events).toBeLessThan(6_000_000);
    if (s.end !== undefined)
      expect(s.end).toMatchObject({ reason: 'write_error', events: s.events });
    // the session manifest is whole (written into room reserved before the run), so the
    // folder's report is the program's log, said to be partial
    const files = readdirSync(dir);
    const manifests = files.filter((f) => /^heaphook-session\.\d+\.json$/.test(f));
    expect(manifests).toHaveLength(1);
    expect(files.filter((f) => f.endsWith('.tmp'))).toEqual([]); // the reservation was used
    const session = JSON.parse(readFileSync(join(dir, manifests[0]!), 'utf8')) as object;
    expect(session).toMatchObject({ status: 3, program: `heaplog.${pid}.log` });
    const report = await heaphook(['report', dir]);
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toMatch(
      s.end !== undefined
        ? /^this run did not end normally: a write of the log failed \(a full disk\?\)/
        : /^this run did not end normally: the log has no END record/,
    );
    expect(report.stdout).toContain(`process: ${pid} `);
    expect(report.stdout).toContain(`${s.events.toLocaleString('en-US')} events`);
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
