#!/usr/bin/env node
// Measures the collector's cost of an idle traced program and its event-to-log latency
// (README, "Collector": the figures before and after the sleep handshake).
//
//   node scripts/collector-idle.mjs [--runs N] [BIN_DIR ...]
//
// Each BIN_DIR holds heaphook-heaptrack-collector and libheaphook_heaptrack.so (default:
// build/Release); runs are interleaved across them. One run: the collector (--record) traces
// build/Release/hh_test_idle, which allocates one block every 800 ms (longer than the writer's
// 500 ms block interval, so each event is written as soon as the collector reads it) 10 times,
// then idles 2.6 s. Latency: from the program's "event k" line to the log file's growth
// (polled every millisecond). Switches: the collector's voluntary context switches over 2 s of
// the final idle period. Prints one line per run and the medians per BIN_DIR.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const release = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'build', 'Release');
const args = process.argv.slice(2);
let runs = 3;
if (args[0] === '--runs') {
  runs = Number(args[1]);
  args.splice(0, 2);
}
const bins = args.length > 0 ? args : [release];
const EVENTS = 10;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function switches(pid) {
  let total = 0;
  for (const t of readdirSync(`/proc/${pid}/task`))
    total += Number(
      /^voluntary_ctxt_switches:\s*(\d+)/m.exec(
        readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8'),
      )[1],
    );
  return total;
}

function lines(child, onLine) {
  let buf = '';
  child.stdout.setEncoding('utf8').on('data', (c) => {
    const at = performance.now();
    buf += c;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      onLine(buf.slice(0, nl), at);
      buf = buf.slice(nl + 1);
    }
  });
}

async function once(bin) {
  const dir = mkdtempSync(join(tmpdir(), 'collector-idle-'));
  const collector = spawn(
    join(bin, 'heaphook-heaptrack-collector'),
    ['--record', '--dir', dir, '--quiet'],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  let socket, log;
  lines(collector, (l) => {
    socket ??= /^socket (\S+)$/.exec(l)?.[1];
    log ??= /^log \d+ (\S+)$/.exec(l)?.[1];
  });
  while (socket === undefined) await sleep(1);
  const program = spawn(join(release, 'hh_test_idle'), [String(EVENTS), '800', '2600'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      LD_PRELOAD: join(bin, 'libheaphook_heaptrack.so'),
      HEAPHOOK_COLLECTOR: socket,
    },
  });
  const said = [];
  lines(program, (l, at) => {
    if (l.startsWith('event ')) said.push(at);
  });
  const ended = new Promise((r) => program.on('close', r));
  while (log === undefined) await sleep(1);
  await sleep(400);
  // growths of the log: after each event's line, the first size change
  const grew = [];
  let size = statSync(log).size;
  while (grew.length < EVENTS) {
    const now = statSync(log).size;
    if (now !== size) {
      size = now;
      if (said.length > grew.length) grew.push(performance.now());
    }
    await sleep(1);
  }
  const latency = grew.map((g, k) => g - said[k]);
  await sleep(300);
  const before = switches(collector.pid);
  await sleep(2000);
  const idle = switches(collector.pid) - before;
  await ended;
  collector.stdin.end();
  await new Promise((r) => collector.on('close', r));
  rmSync(dir, { recursive: true, force: true });
  return { latency: median(latency), idle };
}

const results = new Map(bins.map((b) => [b, []]));
for (let r = 0; r < runs; r++) {
  for (const bin of bins) {
    const m = await once(bin);
    results.get(bin).push(m);
    console.log(
      `${bin}: median event-to-log ${m.latency.toFixed(1)} ms, ${m.idle} switches in 2 s idle`,
    );
  }
}
for (const [bin, ms] of results)
  console.log(
    `${bin}: over ${ms.length} runs: event-to-log median ${median(ms.map((m) => m.latency)).toFixed(1)} ms, ` +
      `idle switches median ${median(ms.map((m) => m.idle))} in 2 s`,
  );
