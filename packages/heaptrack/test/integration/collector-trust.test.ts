/**
 * The collector treats every byte from a traced process as hostile, and trusts only what the
 * kernel says of a peer (issue 35, items 3 and 4). Each probe of the issue is a test here:
 * hostile records under `heaphook record` (an EVENT before PROCESS, a 3 GB and a real 8 MB exe
 * path: the collector survives, that log ends with END protocol, record returns the program's
 * status); a `nobody` descendant of a root target connecting to the root `record -p` collector
 * (refused, the collector unaffected); a hello that claims another process's pid (the log and
 * the detach at Ctrl-C use the kernel's pid, the other process is never touched); 8 clients
 * that connect and send nothing (disconnected, the traced program's event count unaffected).
 * The clients are test/native/hostile_client.c; the same input fuzzed under ASan is
 * test/sanitize/collector.test.ts.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { unmet } from '@heaphook/core/testing';

import { decodeLog, summarize, type LogRecord } from '../../src/index.js';
import { heaphookBin, release, scratch } from '../helpers.js';

const HOSTILE = join(release, 'hh_test_hostile');
const COLLECTOR = join(release, 'heaphook-heaptrack-collector');
const EPROTO = 71;

interface Proc {
  readonly child: ChildProcess;
  readonly pid: number;
  out(): string;
  err(): string;
  /** Resolves when stdout (or stderr) holds the text; a watchdog names it after ms. */
  waitFor(text: string | RegExp, stream?: 'out' | 'err', ms?: number): Promise<string>;
  /** Resolves when the process ended; a watchdog names it after ms. */
  ended(ms?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

function start(command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Proc {
  const child = spawn(command, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
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
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on('close', (code, signal) => (poke(), r({ code, signal }))),
  );
  const name = `${command.split('/').pop()} ${args.join(' ')}`.slice(0, 160);
  const waitFor = async (
    text: string | RegExp,
    stream: 'out' | 'err' = 'out',
    ms = 60_000,
  ): Promise<string> => {
    const deadline = Date.now() + ms;
    const found = (): string | undefined => {
      const s = stream === 'out' ? out : err;
      if (typeof text === 'string') return s.includes(text) ? text : undefined;
      return text.exec(s)?.[0];
    };
    for (;;) {
      const hit = found();
      if (hit !== undefined) return hit;
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${name} ended before printing ${String(text)}:\n${out}\n${err}`);
      if (Date.now() > deadline)
        throw new Error(
          `watchdog: ${name} did not print ${String(text)} in ${ms} ms:\n${out}\n${err}`,
        );
      await new Promise<void>((r) => {
        wake.push(r);
        setTimeout(r, 200);
      });
    }
  };
  const ended = (ms = 60_000) =>
    Promise.race([
      closed,
      new Promise<never>((_, reject) =>
        setTimeout(
          () => reject(new Error(`watchdog: ${name} did not end in ${ms} ms:\n${out}\n${err}`)),
          ms,
        ).unref(),
      ),
    ]);
  return { child, pid: child.pid ?? 0, out: () => out, err: () => err, waitFor, ended };
}

async function records(log: string): Promise<LogRecord[]> {
  const out: LogRecord[] = [];
  for await (const r of decodeLog(log)) out.push(r);
  return out;
}

/** `heaphook record -o dir -- sh -c script`, run to its end (watchdog 90 s). */
function recordShell(dir: string, script: string) {
  const run = spawnSync(
    process.execPath,
    [heaphookBin, 'record', '-o', dir, '--', 'sh', '-c', script],
    {
      encoding: 'utf8',
      timeout: 90_000,
    },
  );
  if (run.error !== undefined)
    throw new Error(`watchdog: heaphook record -- sh -c '${script}': ${String(run.error)}`);
  return run;
}

describe('hostile records under heaphook record', () => {
  const probes = [
    [
      'event-first',
      'a 48-byte EVENT record before any PROCESS record',
      'a record before the PROCESS record',
    ],
    [
      'giant-exe',
      'a PROCESS record claiming a 3 GB exe path',
      "a PROCESS record's exe is too long",
    ],
    ['big-exe', 'a PROCESS record with a real 8 MB exe path', "a PROCESS record's exe is too long"],
  ] as const;
  for (const [mode, what, reason] of probes) {
    it(`${what}: that log ends with END protocol, the collector serves on, record returns the program's status`, async () => {
      const dir = scratch(`trust-${mode}`);
      // before: the collector died of SIGFPE (record exited 136) or SIGSEGV, or wrote 5.5 MB
      // past its writer; the program's log was lost.
      const run = recordShell(
        dir,
        `env -u LD_PRELOAD ${HOSTILE} - ${mode}; ${join(release, 'hh_test_workload')} counts; exit 7`,
      );
      expect(run.status, run.stderr).toBe(7);
      expect(run.stdout).toContain(`eof ${EPROTO}`); // the ring was closed with EPROTO
      const line = new RegExp(
        `heaphook record: process (\\d+) broke the collector's protocol \\((.*)\\); its log (\\S+) ends after 0 events`,
      ).exec(run.stderr);
      expect(line, run.stderr).not.toBeNull();
      expect(line![2]).toBe(reason);
      const hostile = await summarize(line![3]!);
      expect(hostile.end?.reason).toBe('protocol');
      // The others were served: the workload's log is whole (it ran after the hostile client).
      // (sh's fork child and env are traced too before hh_test_hostile runs: logs of one pid)
      const logs = readdirSync(dir).filter((f) => /^heaplog\.[\d.]+\.log$/.test(f));
      const summaries = await Promise.all(logs.map((f) => summarize(join(dir, f))));
      expect(summaries.filter((x) => x.end?.reason === 'protocol')).toHaveLength(1);
      const workload = summaries.filter((x) => x.process?.exe.endsWith('/hh_test_workload'));
      expect(workload.map((x) => x.end?.reason)).toEqual(['exit']);
      expect(run.stderr).not.toContain('the collector was killed');
    });
  }
});

/** The collector started by `heaphook record -p` (pid cli): its socket name. */
async function collectorSocketOf(cli: number): Promise<string> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue;
      }
      const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(stat);
      if (m === null || Number(m[2]) !== cli || !m[1]!.startsWith('heaphook-heap')) continue;
      const name = readFileSync('/proc/net/unix', 'utf8')
        .split('\n')
        .map((l) => l.trim().split(/\s+/).pop() ?? '')
        .find((n) => n.startsWith(`@heaphook-${entry}-`));
      if (name !== undefined) return name;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`watchdog: no listening socket of a collector of heaphook record ${cli} in 30 s`);
}

function mapsOf(pid: number): string {
  return readFileSync(`/proc/${pid}/maps`, 'utf8');
}

describe('one trust domain under heaphook record -p', () => {
  it("a hello claiming another process's pid: the log and the detach use the kernel's pid", async () => {
    const dir = scratch('trust-claim');
    const victim = start('sleep', ['120']); // unrelated to the target
    const target = start(HOSTILE, ['target']);
    await target.waitFor('ready');
    const cli = start(process.execPath, [
      heaphookBin,
      'record',
      '-p',
      String(target.pid),
      '-o',
      dir,
    ]);
    await cli.waitFor('attached to process', 'err');
    const socket = await collectorSocketOf(cli.pid);
    target.child.stdin!.write(`${socket} ${victim.pid}\n`);
    const client = Number((await target.waitFor(/spawned \d+/)).split(' ')[1]);
    // The claiming client's log is open under its real pid.
    const log = join(dir, `heaplog.${client}.log`);
    const deadline = Date.now() + 30_000;
    while (!existsSync(log)) {
      if (Date.now() > deadline) throw new Error(`watchdog: no ${log} in 30 s:\n${cli.err()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    cli.child.kill('SIGINT');
    expect((await cli.ended()).code, cli.err()).toBe(0);
    // before: the log was heaplog.<victim>.log and heaphook injected the tracer into the
    // victim to detach it at Ctrl-C.
    expect(existsSync(join(dir, `heaplog.${victim.pid}.log`))).toBe(false);
    expect(mapsOf(victim.pid)).not.toContain('libheaphook_heaptrack');
    const process_ = (await records(log)).find((r) => r.type === 'process');
    expect(process_).toMatchObject({ pid: client });
    target.child.stdin!.end();
    expect((await target.ended()).code).toBe(0);
  });

  it('a nobody descendant of a root target is refused by the root collector, which serves on', async (ctx) => {
    const why = unmet('root', 'setpriv');
    if (why !== undefined) ctx.skip(why);
    const dir = scratch('trust-nobody');
    // The target: a root shell running what it reads (its children are its descendants).
    const target = start('sh', ['-c', 'echo ready; while read -r line; do eval "$line"; done']);
    await target.waitFor('ready');
    const collector = start(COLLECTOR, ['--attach', String(target.pid), '--dir', dir]);
    const socket = (await collector.waitFor(/socket \S+/)).split(' ')[1]!;
    const asNobody = 'setpriv --reuid=nobody --regid=nogroup --clear-groups';
    // before: accepted (a descendant), and its EVENT before PROCESS killed the collector
    target.child.stdin!.write(`${asNobody} ${HOSTILE} ${socket} event-first; echo "nobody $?"\n`);
    await target.waitFor(/nobody \d+/);
    expect(target.out()).toContain('refused');
    // The collector's line comes through another pipe: it may be read after the target's.
    await collector.waitFor(
      /refused a connection from process \d+: it runs as uid 65534 gid 65534, not as the traced process \(uid 0 gid 0\)/,
      'err',
    );
    // A root descendant that breaks the protocol: its log ends, the collector goes on.
    target.child.stdin!.write(`${HOSTILE} ${socket} event-first; echo "root $?"\n`);
    await target.waitFor(/root \d+/);
    expect(target.out()).toContain(`eof ${EPROTO}`);
    target.child.stdin!.write(`${HOSTILE} ${socket} ok; echo "ok $?"\n`);
    await target.waitFor('ok 0');
    await collector.waitFor(/closed \d+ 10 exit /);
    collector.child.kill('SIGTERM');
    expect(await collector.ended()).toEqual({ code: 0, signal: null });
    expect(collector.out().match(/^closed .* protocol /gm)).toHaveLength(1);
    target.child.stdin!.end();
  });
});

describe('clients that connect and send nothing', () => {
  it('8 stalled clients are disconnected and do not slow the traced program', async () => {
    const base = scratch('trust-stall-base');
    const stalled = scratch('trust-stall');
    const countOf = async (dir: string): Promise<number> => {
      const logs = readdirSync(dir).filter((f) => /^heaplog\.\d+\.log$/.test(f));
      expect(logs).toHaveLength(1);
      const s = await summarize(join(dir, logs[0]!));
      return Object.values(s.calls).reduce((a, b) => a + b, 0);
    };
    const runChurn = (dir: string, beside: string) => {
      const run = spawnSync(
        process.execPath,
        [heaphookBin, 'record', '-o', dir, '--', HOSTILE, 'churn', '1500', beside],
        {
          encoding: 'utf8',
          timeout: 120_000,
          env: { ...process.env, HEAPHOOK_BUFFER_SIZE: '64KiB' },
        },
      );
      if (run.error !== undefined)
        throw new Error(`watchdog: heaphook record -- churn (${beside}): ${String(run.error)}`);
      expect(run.status, run.stderr).toBe(0);
      return run;
    };
    runChurn(base, 'true');
    const stallers = Array.from(
      { length: 8 },
      (_, i) => `${HOSTILE} - stall ${stalled}/stall.${i}`,
    );
    const run = runChurn(stalled, stallers.join('; '));
    const [without, withStalls] = [await countOf(base), await countOf(stalled)];
    // before: 8 stalls of 5 s each held the collector while the program waited for room in
    // its ring (22.8 M events fell to 1.37 M)
    expect(
      withStalls,
      `${withStalls} events with 8 stalled clients, ${without} without`,
    ).toBeGreaterThan(without / 4);
    // Each staller was disconnected by the collector (each says so in its file; watchdog 30 s).
    const deadline = Date.now() + 40_000;
    const results = (): string[] =>
      Array.from({ length: 8 }, (_, i) => join(stalled, `stall.${i}`))
        .filter((f) => existsSync(f))
        .map((f) => readFileSync(f, 'utf8').trim())
        .filter((l) => l.length > 0);
    while (results().length < 8) {
      if (Date.now() > deadline)
        throw new Error(`watchdog: ${results().length} of 8 stalled clients reported in 40 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const line of results()) {
      expect(line).toMatch(/^\d+ disconnected$/);
      const pid = line.split(' ')[0];
      expect(run.stderr).toContain(
        `refused a connection from process ${pid}: it sent no whole hello within`,
      );
    }
  });
});
