/**
 * The collector sleeps while its traced programs do nothing (issue 42, item 2): it used to poll
 * every 50 ms (about 40 voluntary context switches in 2 s of an idle program); now a round that
 * found every ring empty tells the rings it sleeps (ring.h, the sleep handshake) and waits for a
 * byte with no timeout. The first record after that sends the byte, so an event still reaches
 * the log while the program idles on.
 *
 * The collector is run as `heaphook record` runs it (`--record`, its standard input the
 * lifeline), with one traced program, test/native/idle.c. The measured figures (switches, the
 * event-to-log latency before and after) are in the README, from scripts/collector-idle.mjs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { decodeLog, type LogRecord } from '../../src/index.js';
import { release, scratch, tracer } from '../helpers.js';

const COLLECTOR = join(release, 'heaphook-heaptrack-collector');
const IDLE = join(release, 'hh_test_idle');

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A child whose stdout is kept; waitFor resolves on a line matching re (watchdog 60 s). */
function start(command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(command, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  started.push(child);
  let out = '';
  let err = '';
  const seen: Array<{ line: string; at: number }> = [];
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    const at = performance.now();
    out += c;
    for (const line of c.split('\n')) if (line !== '') seen.push({ line, at });
  });
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const closed = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  const waitFor = async (re: RegExp): Promise<RegExpExecArray> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const hit = re.exec(out);
      if (hit) return hit;
      if (child.exitCode !== null)
        throw new Error(`${command} ended before ${String(re)}:\n${out}\n${err}`);
      if (Date.now() > deadline)
        throw new Error(`watchdog: no ${String(re)} in 60 s:\n${out}\n${err}`);
      await sleep(1);
    }
  };
  return { child, waitFor, closed, seen, out: () => out, err: () => err };
}

/** Voluntary context switches of every thread of a process (/proc/PID/task/.../status). */
function voluntarySwitches(pid: number): number {
  let total = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
    total += Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(status)![1]);
  }
  return total;
}

/** A collector (--record) and one traced hh_test_idle run with args; its log path and pid. */
async function traceIdle(dir: string, args: readonly string[]) {
  const collector = start(COLLECTOR, ['--record', '--dir', dir, '--quiet']);
  const socket = (await collector.waitFor(/^socket (\S+)$/m))[1]!;
  const program = start(IDLE, args, { LD_PRELOAD: tracer, HEAPHOOK_COLLECTOR: socket });
  const pid = Number((await program.waitFor(/^idle (\d+)$/m))[1]);
  const log = (await collector.waitFor(new RegExp(`^log ${pid} (\\S+)$`, 'm')))[1]!;
  return { collector, program, pid, log };
}

/** Ends the run: the program's exit, the lifeline's end, the collector's "closed" line. */
async function finish(run: Awaited<ReturnType<typeof traceIdle>>) {
  expect(await run.program.closed).toBe(0);
  run.collector.child.stdin!.end();
  expect(await run.collector.closed).toBe(0);
  expect(run.collector.out()).toMatch(new RegExp(`^closed ${run.pid} \\d+ exit `, 'm'));
}

/** The sizes of the blocks allocated in the log so far (a block being written is not yet). */
async function logged(log: string): Promise<number[]> {
  try {
    return (await records(log)).flatMap((r) => (r.type === 'event' ? [r.size] : []));
  } catch {
    return [];
  }
}

async function records(log: string): Promise<LogRecord[]> {
  const out: LogRecord[] = [];
  for await (const r of decodeLog(log)) out.push(r);
  return out;
}

describe('the collector of an idle program', () => {
  it('sleeps: at most 10 voluntary context switches in 2 s (it polled every 50 ms: ~40)', async () => {
    const dir = scratch('collector-idle');
    const run = await traceIdle(dir, ['0', '0', '3500']);
    await sleep(600); // its start-up records drained, the first block written
    const before = voluntarySwitches(run.collector.child.pid!);
    await sleep(2000);
    const switches = voluntarySwitches(run.collector.child.pid!) - before;
    console.log(`collector: ${switches} voluntary context switches in 2 s of an idle program`);
    expect(switches).toBeLessThanOrEqual(10);
    await finish(run);
  }, 60_000);

  it('is woken by signals while it sleeps: two stop it, and the idle program runs on', async () => {
    const dir = scratch('collector-idle');
    const run = await traceIdle(dir, ['0', '0', '2500']);
    await sleep(600); // asleep: nothing comes from the program
    run.collector.child.kill('SIGTERM'); // the first is taken as the command's
    await sleep(100);
    run.collector.child.kill('SIGTERM'); // the second stops recording
    await run.collector.waitFor(/^stopped$/m);
    expect(await run.collector.closed).toBe(0);
    expect(run.collector.out()).toMatch(new RegExp(`^closed ${run.pid} \\d+ collector `, 'm'));
    expect(await run.program.closed).toBe(0);
  }, 60_000);

  it('still writes an event that comes after an idle period while the program idles on', async () => {
    const dir = scratch('collector-idle');
    // 4 events 800 ms apart (longer than the collector's 500 ms block interval), then 2 s idle
    const run = await traceIdle(dir, ['4', '800', '2000']);
    const latencies: number[] = [];
    for (let k = 1; k <= 4; k++) {
      await run.program.waitFor(new RegExp(`^event ${k}$`, 'm'));
      const said = run.program.seen.find((s) => s.line === `event ${k}`)!.at;
      // The block with the event is in the log while the program sleeps before its next event.
      while (!(await logged(run.log)).includes(1000 + k)) {
        const next = run.program.seen.some((s) => s.line === `event ${k + 1}`);
        expect(next || run.program.child.exitCode !== null, `event ${k} not in the log`).toBe(
          false,
        );
        await sleep(1);
      }
      latencies.push(performance.now() - said);
    }
    console.log(`event to log: ${latencies.map((l) => l.toFixed(1)).join(', ')} ms`);
    await finish(run);
    const kept = (await records(run.log)).filter(
      (r): r is Extract<LogRecord, { type: 'event' }> =>
        r.type === 'event' && r.size > 1000 && r.size <= 1004,
    );
    expect(kept.map((r) => r.size)).toEqual([1001, 1002, 1003, 1004]);
  }, 60_000);
});
