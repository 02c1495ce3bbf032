// `heaphook record -p PID` / `-n NAME` and `heaphook snapshot`: real targets that run before,
// during and after the attach. A C program that waits for signals (exact counts between attach
// and detach, frees of blocks allocated before the attach counted apart, Ctrl-C detaches),
// python3 and node HTTP services answering a client through five attach/detach cycles, 8
// threads allocating during the attach, a fork during the trace, and the refusals through the
// CLI. Each target goes on working after the detach and exits normally.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  statSync,
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { settledValue, threadNames, unmet } from '@heaphook/core/testing';

import {
  heaphookBin,
  logsIn,
  processStates,
  python3,
  release,
  scratch,
  withinOrExplain,
} from '../helpers.js';

const RUNNING = join(release, 'hh_test_running');

interface Proc {
  readonly child: ChildProcess;
  readonly pid: number;
  out(): string;
  err(): string;
  /** Resolves when stdout (or stderr) holds the text. */
  waitFor(text: string | RegExp, stream?: 'out' | 'err'): Promise<void>;
  readonly ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

function start(
  command: string,
  args: readonly string[],
  cwd?: string,
  env: NodeJS.ProcessEnv = {},
  ownGroup = false,
): Proc {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    detached: ownGroup,
    ...(cwd ? { cwd } : {}),
  });
  started.push(child);
  let out = '';
  let err = '';
  const wake: Array<() => void> = [];
  const poke = (): void => {
    for (const w of wake.splice(0)) w();
  };
  child.stdout!.setEncoding('utf8').on('data', (c: string) => ((out += c), poke()));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => ((err += c), poke()));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on('close', (code, signal) => (poke(), r({ code, signal }))),
  );
  const waitFor = async (text: string | RegExp, stream: 'out' | 'err' = 'out'): Promise<void> => {
    const has = (): boolean => {
      const s = stream === 'out' ? out : err;
      return typeof text === 'string' ? s.includes(text) : text.test(s);
    };
    while (!has()) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${command} ended before printing ${String(text)}: ${out}\n${err}`);
      await new Promise<void>((r) => wake.push(r));
    }
  };
  return { child, pid: child.pid ?? 0, out: () => out, err: () => err, waitFor, ended };
}

function heaphook(args: readonly string[], cwd?: string): Proc {
  return start(process.execPath, [heaphookBin, ...args], cwd);
}

/** The report's JSON of a log. */
function reportJson(log: string): Record<string, unknown> & {
  calls: Record<string, number>;
  freedBeforeAttach: number;
  unknownFrees: number;
  end: string | null;
} {
  const started = Date.now();
  const run = spawnSync(process.execPath, [heaphookBin, 'report', '--json', log], {
    encoding: 'utf8',
    timeout: 50_000,
  });
  expect(
    run.status,
    `heaphook report --json ${log} (${statSync(log).size} bytes): ${String(run.error ?? '')} after ${Date.now() - started} ms\n${run.stderr}`,
  ).toBe(0);
  return JSON.parse(run.stdout);
}

/** `heaphook record -p pid --duration d` into dir: ends by itself, status 0. */
async function recordFor(pid: number, dir: string, duration: string): Promise<void> {
  const recorder = heaphook(['record', '-p', String(pid), '-o', dir, '--duration', duration]);
  const { code } = await withinOrExplain(recorder.ended, 60_000, () =>
    [`heaphook record -p ${pid} has not ended after 60 s:`, recorder.err(), threadStates(pid)].join(
      '\n',
    ),
  );
  expect(code, recorder.err()).toBe(0);
}

/** What each thread of pid is doing, and every heaphook process (for a failure's message). */
function threadStates(pid: number): string {
  const tools = spawnSync(
    'sh',
    ['-c', `ps -eo pid,ppid,stat,wchan:24,args | grep -E 'heaphook|collector' | grep -v grep`],
    { encoding: 'utf8' },
  ).stdout;
  return `${processStates(pid)}${tools}`;
}

/** The reports of the `count` logs in dir: each ended by a detach, with mallocs, and every free
 * of a block the log did not see allocated counted as one of before the attach. */
function detachedLogs(dir: string, count: number): ReturnType<typeof reportJson>[] {
  const logs = logsIn(dir);
  expect(logs).toHaveLength(count);
  return logs.map((log) => {
    const json = reportJson(log);
    expect(json.end).toBe('detach');
    expect(json.calls.malloc).toBeGreaterThan(0);
    expect(json.unknownFrees).toBe(0);
    return json;
  });
}

async function runningTarget(
  threads = 0,
  program = RUNNING,
  env: NodeJS.ProcessEnv = {},
): Promise<Proc> {
  const target = start(program, threads > 0 ? [String(threads)] : [], undefined, env);
  await target.waitFor('ready');
  return target;
}

/** One more round of work after the detach, then SIGTERM: the target must exit 0. */
async function finishesNormally(target: Proc, rounds: number): Promise<void> {
  target.child.kill('SIGUSR1');
  await target.waitFor(`work ${rounds + 1}`);
  target.child.kill('SIGTERM');
  expect(await target.ended).toEqual({ code: 0, signal: null });
  expect(target.out()).toContain('bye');
}

function threadsOf(pid: number): number {
  return readdirSync(`/proc/${pid}/task`).length;
}

/** pid's thread count once a detach's threads have had time to leave (settledValue). */
async function threadsSettleAt(pid: number, expected: number): Promise<number> {
  return await settledValue(() => threadsOf(pid), expected);
}

/** Whether pid has a handler of its own for signal number sig (SigCgt in /proc/pid/status). */
function catches(pid: number, sig: number): boolean {
  const mask = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!;
  return ((BigInt(`0x${mask}`) >> BigInt(sig - 1)) & 1n) === 1n;
}

/** The pids of the collectors serving pid (`heaphook-heaptrack-collector --attach pid`). */
function collectorsFor(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const at = args.indexOf('--attach');
      if (args[0]!.endsWith('collector') && at >= 0 && args[at + 1] === String(pid))
        found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** The scratch folder `heaphook record -p` running as pid made (its owner file names it). */
function scratchFolderOf(pid: number): string | undefined {
  const root = tmpdir();
  return readdirSync(root)
    .filter((name) => name.startsWith('heaphook-attach-'))
    .map((name) => join(root, name))
    .find((folder) => {
      try {
        return readFileSync(join(folder, 'owner'), 'utf8').startsWith(`${pid} `);
      } catch {
        return false;
      }
    });
}

/** `heaphook record -p pid -o dir [extra]`, once it has said it is attached. */
/** Resolves when a heaphook-inject for pid runs (polled: it lives for a few milliseconds). */
/** Until an injector for pid is seen running, or passed() says its moment has gone by (an
 * injector can start and end between two looks at /proc on a loaded machine). */
async function injectorStarted(pid: number, passed: () => boolean = () => false): Promise<void> {
  while (!passed()) {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
        if (args[0]!.endsWith('heaphook-inject') && args[1] === String(pid)) return;
      } catch {
        // gone meanwhile
      }
    }
    await new Promise((r) => setTimeout(r, 1));
  }
}

async function attachedRecorder(pid: number, dir: string, extra: string[] = []): Promise<Proc> {
  const recorder = heaphook(['record', '-p', String(pid), '-o', dir, ...extra]);
  await recorder.waitFor('attached to process', 'err');
  return recorder;
}

/** `heaphook record -p` (no duration) around one round of the target's work, ended by a Ctrl-C
 * (SIGINT to heaphook): the recorder, ended with status 0. */
async function recordOneRound(target: Proc, dir: string, round: number): Promise<Proc> {
  const recorder = await attachedRecorder(target.pid, dir);
  target.child.kill('SIGUSR1');
  await target.waitFor(`work ${round}`);
  recorder.child.kill('SIGINT');
  expect((await recorder.ended).code).toBe(0);
  return recorder;
}

describe('heaphook record -p', () => {
  it('counts exactly between attach and detach; Ctrl-C detaches; frees of earlier blocks apart', async () => {
    const dir = scratch('record-pid');
    const target = await runningTarget();
    expect(threadsOf(target.pid)).toBe(1);
    // While attached: 500 frees of blocks allocated at start, 1000 mallocs, 500 frees.
    const recorder = await recordOneRound(target, dir, 1);
    expect(recorder.err()).toMatch(/wrote .*heaplog\.\d+\.log \(2000 events, detached\)/);
    // Detached: no thread of the library left, the tracer library stays loaded.
    expect(await threadsSettleAt(target.pid, 1)).toBe(1);
    expect(readFileSync(`/proc/${target.pid}/maps`, 'utf8')).toContain('libheaphook_heaptrack.so');
    const [log, ...others] = logsIn(dir);
    expect(others).toEqual([]);
    const json = reportJson(log!);
    expect(json.calls).toEqual({ malloc: 1000, free: 1000 });
    expect(json.freedBeforeAttach).toBe(500);
    expect(json.unknownFrees).toBe(0);
    expect(json.end).toBe('detach');
    expect(json).toMatchObject({ allocatedBytes: 599_500, peakHeapBytes: 300_000 });
    const text = spawnSync(process.execPath, [heaphookBin, 'report', log!], { encoding: 'utf8' });
    expect(text.stdout).toContain('freed, allocated before attach (left out of the figures): 500');

    // Attached again: the next round is exact too (the GOTs were restored and patched again).
    const again = await attachedRecorder(target.pid, dir, ['--duration', '60s']);
    target.child.kill('SIGUSR1');
    await target.waitFor('work 2');
    again.child.kill('SIGTERM');
    expect((await again.ended).code).toBe(0);
    const second = logsIn(dir).find((l) => l !== log)!;
    const json2 = reportJson(second);
    // The 500 blocks kept by round 1 were allocated before this attach.
    expect(json2.calls).toEqual({ malloc: 1000, free: 1000 });
    expect(json2.freedBeforeAttach).toBe(500);
    expect(await threadsSettleAt(target.pid, 1)).toBe(1);
    await finishesNormally(target, 2);
  });

  it('a target started with HEAPHOOK_LEAK_SIGNAL: the leak-check thread runs while attached, and the detach ends it and gives the signal back', async () => {
    const dir = scratch('record-leak-signal');
    // SIGRTMIN is 34 with glibc (it keeps two real-time signals for itself).
    const RTMIN = 34;
    const target = await runningTarget(0, RUNNING, { HEAPHOOK_LEAK_SIGNAL: 'RTMIN' });
    expect([threadsOf(target.pid), catches(target.pid, RTMIN)]).toEqual([1, false]);
    const recorder = await attachedRecorder(target.pid, dir);
    // Attached: the leak-check thread waits for the signal, whose handler is the tracer's, and
    // the collector's watch for the collector to hang up.
    expect([threadsOf(target.pid), catches(target.pid, RTMIN)]).toEqual([3, true]);
    expect(threadNames(target.pid)).toContain('heaphook-watch');
    target.child.kill('SIGUSR1');
    await target.waitFor('work 1');
    recorder.child.kill('SIGINT');
    expect((await recorder.ended).code, recorder.err()).toBe(0);
    // Detached: no thread of the library left, the signal's disposition the program's again.
    expect(
      await settledValue(() => [threadsOf(target.pid), catches(target.pid, RTMIN)], [1, false]),
    ).toEqual([1, false]);
    expect(reportJson(logsIn(dir)[0]!).calls).toEqual({ malloc: 1000, free: 1000 });
    // A second attach and detach (a new pipe and thread) leaves nothing behind either.
    await recordOneRound(target, dir, 2);
    expect(
      await settledValue(() => [threadsOf(target.pid), catches(target.pid, RTMIN)], [1, false]),
    ).toEqual([1, false]);
    await finishesNormally(target, 2);
  });

  it("keeps no copy of the process's stderr after the detach", async () => {
    const dir = scratch('record-stderr');
    const target = await runningTarget();
    // The descriptors of the process that are its stderr (a pipe to this test).
    const stderrCopies = (): number => {
      const fds = `/proc/${target.pid}/fd`;
      const stderr = readlinkSync(`${fds}/2`);
      return readdirSync(fds).filter((fd) => readlinkSync(`${fds}/${fd}`) === stderr).length;
    };
    const recorder = await attachedRecorder(target.pid, dir);
    expect(stderrCopies(), 'while attached, the tracer reports through a copy').toBe(2);
    recorder.child.kill('SIGINT');
    expect((await recorder.ended).code, recorder.err()).toBe(0);
    expect(stderrCopies(), 'after the detach only descriptor 2').toBe(1);
    // Attached again, the copy reports again: the collector's death is said on the stderr.
    const again = await attachedRecorder(target.pid, dir);
    process.kill(collectorsFor(target.pid)[0]!, 'SIGKILL');
    await target.waitFor('detached (the collector is gone)', 'err');
    await again.ended;
    expect(await settledValue(stderrCopies, 1)).toBe(1);
    await finishesNormally(target, 0);
  });

  it('--duration ends the recording by itself', async () => {
    const dir = scratch('record-duration');
    const target = await runningTarget();
    await recordFor(target.pid, dir, '300ms');
    // An idle target: an empty log that ends with the detach.
    expect(reportJson(logsIn(dir)[0]!)).toMatchObject({ end: 'detach', calls: {} });
    await finishesNormally(target, 0);
  });

  it("root traces another user's process (the collector accepts it, writes the log itself)", async (ctx) => {
    // root: the target runs as nobody
    const why = unmet('root', 'setpriv');
    if (why !== undefined) ctx.skip(why);
    const dir = scratch('record-nobody');
    const target = start('setpriv', [
      '--reuid=nobody',
      '--regid=nogroup',
      '--clear-groups',
      RUNNING,
    ]);
    await target.waitFor('ready');
    await recordOneRound(target, dir, 1);
    const json = reportJson(join(dir, `heaplog.${target.pid}.log`));
    expect(json.calls).toEqual({ malloc: 1000, free: 1000 });
    expect(json.end).toBe('detach');
    await finishesNormally(target, 1);
  });

  it('ends by itself when the process exits while traced (its log ends with the exit)', async () => {
    const dir = scratch('record-exit');
    const target = await runningTarget();
    const recorder = await attachedRecorder(target.pid, dir);
    target.child.kill('SIGUSR1');
    await target.waitFor('work 1');
    target.child.kill('SIGTERM');
    expect(await target.ended).toEqual({ code: 0, signal: null });
    expect((await recorder.ended).code).toBe(0);
    expect(recorder.err()).toContain('the process exited');
    const json = reportJson(join(dir, `heaplog.${target.pid}.log`));
    // The work, then the exit path: the 500 blocks kept are freed before it ends.
    expect(json.calls).toEqual({ malloc: 1000, free: 1500 });
    expect(json.freedBeforeAttach).toBe(500);
    expect(json.end).toBe('exit');
  });

  it('attaches while 8 threads allocate', async () => {
    const dir = scratch('record-threads');
    const target = await runningTarget(8);
    for (let cycle = 0; cycle < 3; cycle++) await recordFor(target.pid, dir, '200ms');
    // detachedLogs: a free of a block the log did not see allocated (one a thread allocated
    // before the attach) is never an unknown free. Blocks allocated while the GOTs were being
    // restored (free last) are live at the end of the log.
    for (const json of detachedLogs(dir, 3)) expect(json.calls.malloc).toBeGreaterThan(1000);
    expect(await threadsSettleAt(target.pid, 9)).toBe(9);
    await finishesNormally(target, 0);
  });

  it('SIGKILL of heaphook record: its collector ends the log, the process detaches itself and runs on, and a new record -p is accepted', async () => {
    const dir = scratch('record-killed');
    const target = await runningTarget(8);
    const recorder = await attachedRecorder(target.pid, dir);
    const folder = scratchFolderOf(recorder.pid);
    expect(folder, 'the run names itself the owner of its scratch folder').toBeDefined();
    expect(collectorsFor(target.pid)).toHaveLength(1);
    recorder.child.kill('SIGKILL'); // as timeout -s KILL, a cancelled job or the OOM killer
    await recorder.ended;
    // Its lifeline ended: the collector ends the log (reason collector) and exits; the
    // process sees its connection end and detaches itself (its watch thread ends too).
    await withinOrExplain(
      target.waitFor('detached (the collector is gone)', 'err'),
      20_000,
      () => `the process did not detach itself:\n${target.err()}\n${threadStates(target.pid)}`,
    );
    expect(await settledValue(() => collectorsFor(target.pid).length, 0)).toBe(0);
    expect(await threadsSettleAt(target.pid, 9)).toBe(9);
    const [log] = logsIn(dir);
    const json = reportJson(log!);
    expect(json.end).toBe('collector');
    expect(json.calls.malloc).toBeGreaterThan(0);
    // Nothing stays traced: a new attach is accepted, and it removes the killed run's folder.
    const again = scratch('record-killed-again');
    await recordFor(target.pid, again, '200ms');
    expect(detachedLogs(again, 1)[0]!.calls.malloc).toBeGreaterThan(1000);
    expect(existsSync(folder!), `${folder} of the killed run is removed`).toBe(false);
    await finishesNormally(target, 0);
  });

  it('SIGKILL of the collector alone: record -p says so and names the unfinished log, exits 1 at once, and the process detaches itself and runs on', async () => {
    const dir = scratch('collector-killed');
    const target = await runningTarget(8);
    const recorder = await attachedRecorder(target.pid, dir); // no duration: until stopped
    const [collector] = collectorsFor(target.pid);
    expect(collector, 'a collector serves the process').toBeDefined();
    // Killed once it has written some events.
    const written = (): boolean => logsIn(dir).some((log) => statSync(log).size >= 64 * 1024);
    expect(await settledValue(written, true, 20_000), 'the collector writes the log').toBe(true);
    process.kill(collector!, 'SIGKILL');
    const { code } = await withinOrExplain(
      recorder.ended,
      20_000,
      () => `record -p went on after its collector died:\n${recorder.err()}`,
    );
    expect(code, recorder.err()).toBe(1);
    const [log] = logsIn(dir);
    expect(recorder.err()).toContain(
      `the collector for process ${target.pid} was killed by SIGKILL; tracing stopped and the process detached itself (it runs on). What it wrote is kept, unfinished: ${log}`,
    );
    await withinOrExplain(
      target.waitFor('detached (the collector is gone)', 'err'),
      20_000,
      () => `the process did not detach itself:\n${target.err()}\n${threadStates(target.pid)}`,
    );
    expect(await threadsSettleAt(target.pid, 9)).toBe(9);
    // What the collector wrote is still read: the log has no END, its events are counted.
    const json = reportJson(log!);
    expect(json.end).toBeNull();
    expect(json.calls.malloc).toBeGreaterThan(0);
    const again = scratch('collector-killed-again');
    await recordFor(target.pid, again, '200ms');
    expect(detachedLogs(again, 1)[0]!.calls.malloc).toBeGreaterThan(1000);
    await finishesNormally(target, 0);
  });

  it('SIGKILL of heaphook record and its injector inside the attach call, while tracing and inside the detach: the target survives each, and a record -p after them is exact', async () => {
    const dir = scratch('record-kill-loop');
    const target = await runningTarget(8);
    // Counted from the injector's start (inside the attach call: 0, 5, 20 ms), and from the
    // "attached" line: tracing, and from 500 ms (--duration's end) inside the detach. A run that
    // ended before its moment is a complete one. (The injector killed at each step of its own
    // session is inject.test.ts's.)
    const moments = [
      ...[0, 5, 20].map((ms) => ({ from: 'injector', ms })),
      ...[0, 350, 520, 650].map((ms) => ({ from: 'attached', ms })),
    ];
    for (const { from, ms } of moments) {
      const recorder = start(
        process.execPath,
        [heaphookBin, 'record', '-p', String(target.pid), '-o', dir, '--duration', '500ms'],
        undefined,
        {},
        true,
      );
      let kills: string[] = [];
      const explain = (): string =>
        `a SIGKILL ${ms} ms from ${from} of record -p (${kills.join(', ')}):\n${recorder.err()}\n${target.err()}\n${threadStates(target.pid)}`;
      if (from === 'attached')
        await withinOrExplain(recorder.waitFor('attached to process', 'err'), 60_000, explain);
      else
        await withinOrExplain(
          injectorStarted(target.pid, () => recorder.err().includes('attached to process')),
          60_000,
          explain,
        );
      await new Promise((r) => setTimeout(r, ms));
      // Its process group (the CLI and the injector); the CLI itself too, in case it has not
      // made its group yet (setsid right after the fork).
      kills = [-recorder.pid, recorder.pid].map((p) => {
        try {
          process.kill(p, 'SIGKILL');
          return `kill ${p}: sent`;
        } catch (error) {
          return `kill ${p}: ${(error as NodeJS.ErrnoException).code}`; // ended already
        }
      });
      // its stderr closes when the collector, which shares it, has ended too
      await withinOrExplain(recorder.ended, 60_000, explain);
      // Nothing stays: the collector ends (its lifeline), the process detaches itself.
      expect(await settledValue(() => collectorsFor(target.pid).length, 0, 20_000), explain()).toBe(
        0,
      );
      expect(
        await settledValue(() => threadNames(target.pid).includes('heaphook-watch'), false, 20_000),
        explain(),
      ).toBe(false);
      expect(target.child.exitCode, explain()).toBeNull();
    }
    expect(await threadsSettleAt(target.pid, 9)).toBe(9);
    const after = scratch('record-kill-loop-after');
    await recordFor(target.pid, after, '200ms');
    expect(detachedLogs(after, 1)[0]!.calls.malloc).toBeGreaterThan(1000);
    await finishesNormally(target, 0);
  });

  it("a fork during the trace gets its own log (the child's exit ends it)", async () => {
    const dir = scratch('record-fork');
    const target = await runningTarget();
    const recorder = await attachedRecorder(target.pid, dir);
    target.child.kill('SIGUSR2');
    await target.waitFor('forked');
    const child = Number(/forked (\d+)/.exec(target.out())![1]);
    recorder.child.kill('SIGINT');
    expect((await recorder.ended).code).toBe(0);
    const childLog = join(dir, `heaplog.${child}.log`);
    expect(existsSync(childLog)).toBe(true);
    const json = reportJson(childLog);
    expect(json.calls).toEqual({ malloc: 100, free: 100 });
    expect(json.end).toBe('exit');
    expect(reportJson(join(dir, `heaplog.${target.pid}.log`)).end).toBe('detach');
    await finishesNormally(target, 0);
  });

  it('-n NAME attaches to every process of that program', async () => {
    const dir = scratch('record-name');
    // A name of this test's own: another run of the suite on the machine has hh_test_running
    // processes too, and -n would attach to them.
    const name = `running-${process.pid}`;
    const program = join(dir, name);
    copyFileSync(RUNNING, program);
    chmodSync(program, 0o755);
    const first = await runningTarget(0, program);
    const second = await runningTarget(0, program);
    const recorder = heaphook(['record', '-n', name, '-o', dir, '--duration', '300ms']);
    expect((await recorder.ended).code).toBe(0);
    expect(recorder.err()).toContain(`attached to processes ${first.pid}, ${second.pid}`);
    expect(logsIn(dir).map((l) => reportJson(l).end)).toEqual(['detach', 'detach']);
    await finishesNormally(first, 0);
    await finishesNormally(second, 0);
  });

  it('refusals: one line and the injector exit code, the target untouched', async () => {
    // the highest pid this kernel gives (pid_max - 1 and down) that no process has
    let free = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')) - 1;
    while (existsSync(`/proc/${free}`)) free--;
    const none = spawnSync(process.execPath, [heaphookBin, 'record', '-p', String(free)], {
      encoding: 'utf8',
    });
    expect(none.status).toBe(10);
    expect(none.stderr.trim().split('\n')).toEqual([
      `heaphook record: no process with pid ${free}`,
    ]);
    const named = spawnSync(
      process.execPath,
      [heaphookBin, 'record', '-n', 'no-such-program-xyz'],
      { encoding: 'utf8' },
    );
    expect(named.status).toBe(10);
    expect(named.stderr).toContain('no running process is named no-such-program-xyz');
    // Already traced by heaphook: the second recorder is refused, the first goes on.
    const dir = scratch('record-twice');
    const target = await runningTarget();
    const recorder = await attachedRecorder(target.pid, dir);
    const twice = spawnSync(
      process.execPath,
      [heaphookBin, 'record', '-p', String(target.pid), '-o', dir],
      { encoding: 'utf8' },
    );
    expect(twice.status).toBe(14);
    expect(twice.stderr).toContain('is traced by heaphook already');
    target.child.kill('SIGUSR1');
    await target.waitFor('work 1');
    recorder.child.kill('SIGINT');
    expect((await recorder.ended).code).toBe(0);
    // The work, plus at most the one malloc/free pair the refused injection's own dlopen made
    // in the target while it was traced (glibc's dlopen of a library loaded already).
    const { calls } = reportJson(join(dir, `heaplog.${target.pid}.log`));
    expect(calls.malloc).toBe(calls.free);
    expect([1000, 1001]).toContain(calls.malloc);
    await finishesNormally(target, 1);
  });
});

// A service that keeps answering a client during five attach/detach cycles.
const PYTHON_SERVER = `
import http.server, json, signal, sys, threading
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        n = int(self.path.strip('/'))
        body = json.dumps({"n": n, "squares": sum(i * i for i in range(n)), "text": "x" * (n % 977)}).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.shutdown).start())
print('ready', server.server_address[1], flush=True)
server.serve_forever()
print('bye', flush=True)
`;

const NODE_SERVER = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  const n = Number(req.url.slice(1));
  let squares = 0;
  for (let i = 0; i < n; i++) squares += i * i;
  const body = JSON.stringify({ n, squares, text: 'x'.repeat(n % 977) });
  res.writeHead(200, { 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
});
// One string: console.log colours a number argument when FORCE_COLOR is set (nx sets it for
// its tasks), and "ready \x1b[33m4242\x1b[39m" would never match the test's /ready \d+/.
server.listen(0, '127.0.0.1', () => console.log(\`ready \${server.address().port}\`));
process.on('SIGTERM', () => server.close(() => { console.log('bye'); process.exit(0); }));
`;

function expected(n: number): { n: number; squares: number; text: string } {
  let squares = 0;
  for (let i = 0; i < n; i++) squares += i * i;
  return { n, squares, text: 'x'.repeat(n % 977) };
}

describe('services keep serving through five attach/detach cycles', () => {
  for (const [name, command, script] of [
    ['python3', python3, PYTHON_SERVER],
    ['node', process.execPath, NODE_SERVER],
  ] as const) {
    it(name, async () => {
      const dir = scratch(`record-${name}`);
      const file = join(dir, name === 'node' ? 'server.cjs' : 'server.py');
      writeFileSync(file, script);
      const server = start(command, [file]);
      // the whole line: with PYTHONUNBUFFERED=1, print() writes its pieces one by one
      await withinOrExplain(server.waitFor(/ready \d+\n/), 30_000, () => `${name} did not start`);
      const port = Number(/ready (\d+)/.exec(server.out())![1]);
      let answers = 0;
      let wrong: string[] = [];
      let asking = true;
      const client = (async () => {
        for (let n = 1; asking; n = (n * 7 + 3) % 5000) {
          const reply = await withinOrExplain(
            fetch(`http://127.0.0.1:${port}/${n}`).then((r) => r.json() as Promise<unknown>),
            30_000,
            () => `the ${name} service did not answer /${n} in 30 s:\n${threadStates(server.pid)}`,
          );
          const got = reply;
          if (JSON.stringify(got) !== JSON.stringify(expected(n)))
            wrong.push(`${n}: ${JSON.stringify(got).slice(0, 80)}`);
          answers++;
        }
      })();
      for (let cycle = 0; cycle < 5; cycle++) {
        const before = answers;
        await recordFor(server.pid, dir, '400ms');
        // The service answered while attached.
        expect(answers).toBeGreaterThan(before);
      }
      const afterCycles = answers;
      await new Promise((r) => setTimeout(r, 200));
      asking = false;
      await client;
      expect(answers).toBeGreaterThan(afterCycles);
      expect(wrong).toEqual([]);
      detachedLogs(dir, 5);
      server.child.kill('SIGTERM');
      const ended = await withinOrExplain(server.ended, 30_000, () =>
        [
          `the ${name} service did not exit within 30 s of SIGTERM:`,
          server.out(),
          server.err(),
          threadStates(server.pid),
        ].join('\n'),
      );
      expect(ended).toEqual({ code: 0, signal: null });
      expect(server.out()).toContain('bye');
      wrong = [];
    });
  }
});

describe('heaphook snapshot', () => {
  const pprof = (file: string, sampleIndex: string): string => {
    const run = spawnSync(
      'go',
      ['tool', 'pprof', '-top', '-unit=B', '-symbolize=none', `-sample_index=${sampleIndex}`, file],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(run.error, 'go (tools/install-system-packages.sh: golang-go)').toBeUndefined();
    expect(run.status, run.stderr).toBe(0);
    return run.stdout;
  };

  it('writes the heap since the attach: in use, allocated and the peak by stack; then detaches', async () => {
    const dir = scratch('snapshot');
    const target = await runningTarget();
    const file = join(dir, 'heap.pb.gz');
    const snap = heaphook(['snapshot', String(target.pid), '-o', file, '--duration', '2s']);
    // The attach is done when the log exists.
    while (!existsSync(join(dir, `heaplog.${target.pid}.log`)))
      await new Promise((r) => setTimeout(r, 20));
    target.child.kill('SIGUSR1');
    await target.waitFor('work 1');
    expect((await snap.ended).code, snap.err()).toBe(0);
    // It says where the trace behind the profile went, and what reads it.
    const log = join(dir, `heaplog.${target.pid}.log`);
    expect(snap.err()).toContain(
      `heaphook snapshot: the trace it was made from is ${log} (heaphook report ${log} reads it; delete it when done)\n`,
    );
    // 1000 blocks of 100 + i bytes; the odd ones (300,000 bytes) still live, and the peak.
    expect(pprof(file, 'alloc_space')).toMatch(/^ +599500B +100% +100% +599500B +100% +main$/m);
    expect(pprof(file, 'inuse_space')).toMatch(/^ +300000B +100% +100% +300000B +100% +main$/m);
    expect(pprof(file, 'peak_space')).toMatch(/^ +300000B +100% +100% +300000B +100% +main$/m);
    expect(await threadsSettleAt(target.pid, 1)).toBe(1);
    await finishesNormally(target, 1);
  });

  it('a collector killed while tracing: snapshot fails naming it, and still writes the heap up to then', async () => {
    const dir = scratch('snapshot-collector-killed');
    const target = await runningTarget();
    const file = join(dir, 'heap.pb.gz');
    const snap = heaphook(['snapshot', String(target.pid), '-o', file, '--duration', '60s']);
    while (!existsSync(join(dir, `heaplog.${target.pid}.log`)))
      await new Promise((r) => setTimeout(r, 20));
    target.child.kill('SIGUSR1');
    await target.waitFor('work 1');
    const [collector] = collectorsFor(target.pid);
    process.kill(collector!, 'SIGKILL');
    const { code } = await withinOrExplain(
      snap.ended,
      20_000,
      () => `snapshot went on after its collector died:\n${snap.err()}`,
    );
    expect(code, snap.err()).toBe(1);
    expect(snap.err()).toContain(
      `the collector for process ${target.pid} was killed by SIGKILL while tracing: ${file} holds the heap up to then`,
    );
    expect(existsSync(file), 'the snapshot of what was written').toBe(true);
    await target.waitFor('detached (the collector is gone)', 'err');
    await finishesNormally(target, 1);
  });

  it('--every writes one snapshot per period until Ctrl-C', async () => {
    const dir = scratch('snapshot-every');
    const target = await runningTarget();
    const file = join(dir, 'heap.pb.gz');
    const snap = heaphook(['snapshot', String(target.pid), '-o', file, '--every', '300ms']);
    await snap.waitFor('heap.1.pb.gz', 'err');
    target.child.kill('SIGUSR1');
    await target.waitFor('work 1');
    await snap.waitFor('heap.3.pb.gz', 'err');
    snap.child.kill('SIGINT');
    expect((await snap.ended).code, snap.err()).toBe(0);
    const written = readdirSync(dir).filter((f) => /^heap\.\d+\.pb\.gz$/.test(f)).length;
    expect(written).toBeGreaterThanOrEqual(4); // the periods, then the one at the detach
    // Each covers the time since the attach: the last one has the round of work.
    expect(pprof(join(dir, `heap.${written}.pb.gz`), 'alloc_space')).toMatch(
      /^ +599500B +100% +100% +599500B +100% +main$/m,
    );
    await finishesNormally(target, 1);
  });
});
