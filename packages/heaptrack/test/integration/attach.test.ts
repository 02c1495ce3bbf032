/**
 * attach() / detach(): the tracer installed into a running process without LD_PRELOAD (GOT
 * patching), and taken out again. Node programs trace their own native allocations between
 * the two calls; a C program attaches and detaches while other threads allocate, and forks.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { describe, expect, it } from 'vitest';

import { decodeLog, report, type EventRecord, type LogRecord } from '../../src/index.js';
import { packageDir, release, scratch, tracer } from '../helpers.js';

const entry = join(packageDir, 'dist', 'index.js');
const slowFree = join(release, 'hh_test_slow_free.so');

async function recordsOf(log: string): Promise<LogRecord[]> {
  const out: LogRecord[] = [];
  for await (const r of decodeLog(log)) out.push(r);
  return out;
}

const events = (records: LogRecord[]): EventRecord[] =>
  records.filter((r): r is EventRecord => r.type === 'event');

/** Bytes a call asked for (calloc: count × size). */
const bytesOf = (e: EventRecord): number => (e.op === 'calloc' ? e.count! * e.size! : e.size!);

/**
 * Runs a CommonJS script with node (in dir, under packages/heaptrack/test/tmp, so that
 * require('@heaphook/heaptrack') resolves to this package); its last stdout line is JSON.
 */
function runNode(
  dir: string,
  script: string,
  env: NodeJS.ProcessEnv = {},
  nodeArgs: string[] = [],
) {
  const file = join(dir, 'script.cjs');
  writeFileSync(file, script);
  const r = spawnSync(process.execPath, [...nodeArgs, file], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, ...env },
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
}

describe("require('@heaphook/heaptrack').attach() / detach() in node", () => {
  it("records mapped memory from ucm-hooks' events: a 64 MiB Buffer (glibc malloc's own mmap) and a WebAssembly memory", async () => {
    const dir = scratch('attach-vm');
    const out = runNode(
      dir,
      `
      const { attach, detach } = require('@heaphook/heaptrack');
      attach({ outputDir: 'logs' });
      const big = Buffer.alloc(64 * 1024 * 1024);      // glibc's malloc serves it with mmap
      big[0] = 1;
      const memory = new WebAssembly.Memory({ initial: 160 }); // V8 reserves its range
      const done = detach();
      const later = Buffer.alloc(48 * 1024 * 1024);    // after: not recorded
      console.log(JSON.stringify({ done: done.path, sizes: [big.length, memory.buffer.byteLength, later.length] }));
      `,
    );
    const records = await recordsOf(out.done as string);
    expect(records.find((r) => r.type === 'process')).toMatchObject({ vmEvents: true });
    const mapped = records.filter((r) => r.type === 'vm' && r.kind === 'mapped');
    const sizes = mapped.map((r) => (r as { size: number }).size);
    // the Buffer's chunk: 64 MiB plus glibc's header, rounded to pages
    expect(sizes).toContain(64 * 1024 * 1024 + 4096);
    expect(sizes.some((size) => size >= 160 * 65536)).toBe(true);
    expect(sizes.some((size) => size > 48 * 1024 * 1024 && size < 49 * 1024 * 1024)).toBe(false);
  });

  it('HEAPHOOK_TRACE_VM=no: attach() records no mapped memory', async () => {
    const dir = scratch('attach-vm-no');
    const out = runNode(
      dir,
      `
      const { attach, detach } = require('@heaphook/heaptrack');
      attach({ outputDir: 'logs' });
      const big = Buffer.alloc(64 * 1024 * 1024);
      const done = detach();
      console.log(JSON.stringify({ done: done.path, size: big.length }));
      `,
      { HEAPHOOK_TRACE_VM: 'no' },
    );
    const records = await recordsOf(out.done as string);
    expect(records.filter((r) => r.type === 'vm')).toEqual([]);
  });

  it('traces every Buffer allocated between the two calls and nothing after; the report reads the log', async () => {
    const dir = scratch('attach-buffers');
    const out = runNode(
      dir,
      `
      const { attach, detach } = require('@heaphook/heaptrack');
      const keep = [];
      const started = attach({ outputDir: 'logs' });
      for (let i = 0; i < 2000; i++) {
        const b = Buffer.alloc(65536);                  // zero-filled: calloc(65536, 1)
        if (i % 2 === 0) keep.push(b);
      }
      const done = detach();
      for (let i = 0; i < 50; i++) keep.push(Buffer.alloc(77777)); // after: not traced
      console.log(JSON.stringify({ started: started.path, done: done.path, kept: keep.length }));
      `,
    );
    expect(out.started).toBe(out.done);
    const log = out.done as string;
    expect(log).toMatch(/logs\/heaplog\.\d+\.log$/);
    const records = await recordsOf(log);
    const ev = events(records);
    const allocs = ev.filter((e) => e.op !== 'free' && e.op !== 'realloc_done');
    // every Buffer of the loop is a native allocation of exactly its size, none missing
    expect(allocs.filter((e) => bytesOf(e) === 65536).length).toBeGreaterThanOrEqual(2000);
    expect(allocs.some((e) => bytesOf(e) === 77777)).toBe(false);
    expect(records.find((r) => r.type === 'end')).toMatchObject({ reason: 'detach', dropped: 0 });

    const { json, error } = await report(log, { symbolize: false });
    expect(error).toBeUndefined();
    expect(json.end).toBe('detach');
    expect(json.allocations).toBe(allocs.length - ev.filter((e) => e.op === 'realloc').length);
    // the 1,000 kept Buffers are live when tracing stops
    expect(json.peakHeapBytes).toBeGreaterThanOrEqual(1000 * 65536);
    expect(json.neverFreedBytes).toBeGreaterThanOrEqual(1000 * 65536);
  });

  it('frees of blocks allocated before the attach are counted apart and leave the figures alone', async () => {
    const dir = scratch('attach-prefree');
    const out = runNode(
      dir,
      `
      const { attach, detach } = require('@heaphook/heaptrack');
      let before = [];
      for (let i = 0; i < 500; i++) before.push(Buffer.alloc(100000, 1)); // not traced
      const keep = [];
      attach({ outputDir: 'logs' });
      before = null;
      globalThis.gc();                                    // the 500 are freed while attached
      for (let i = 0; i < 1000; i++) keep.push(Buffer.alloc(65536, 1));
      setTimeout(() => {
        globalThis.gc();
        const { path } = detach();
        console.log(JSON.stringify({ path, kept: keep.length }));
      }, 50);
      `,
      {},
      ['--expose-gc'],
    );
    const log = out.path as string;
    const ev = events(await recordsOf(log));
    const allocated = new Set(ev.filter((e) => e.op !== 'free').map((e) => e.ptr));
    const foreign = ev.filter((e) => e.op === 'free' && !allocated.has(e.ptr));
    expect(foreign.length).toBeGreaterThanOrEqual(500);

    const { json, error } = await report(log, { symbolize: false });
    expect(error).toBeUndefined();
    // The log began with an attach (PROCESS flag ATTACHED): its unknown frees are blocks of
    // before the attach, counted apart, not as frees outside the log.
    expect(json.freedBeforeAttach).toBeGreaterThanOrEqual(500);
    expect(json.unknownFrees).toBe(0);
    // the log's own blocks: the kept 1,000 are live at the end, nothing went below zero
    expect(json.neverFreedBytes).toBeGreaterThanOrEqual(1000 * 65536);
    expect(json.peakHeapBytes).toBeGreaterThanOrEqual(json.neverFreedBytes);
    expect(json.peakHeapBytes).toBeLessThanOrEqual(json.allocatedBytes);
    const text = (await report(log, { symbolize: false })).text;
    expect(text).toMatch(/freed, allocated before attach \(left out of the figures\): [\d,]+/);
  });

  it('attach after detach writes a second complete log; a log file can be named; calls out of turn say what to do', async () => {
    const dir = scratch('attach-twice');
    const out = runNode(
      dir,
      `
      const { attach, detach } = require('@heaphook/heaptrack');
      const errors = [];
      const tryIt = (f) => { try { f(); } catch (e) { errors.push(e.message); } };
      tryIt(() => detach());
      const a = attach({ outputDir: 'logs' });
      tryIt(() => attach({ outputDir: 'logs' }));
      Buffer.alloc(111111, 1);
      detach();
      const b = attach({ outputDir: 'logs' });
      Buffer.alloc(123456, 1);
      detach();
      tryIt(() => attach({ outputDir: 'logs', path: 'x.log' }));
      tryIt(() => attach({ path: 'logs' }));
      const c = attach({ path: 'named/run.log' });
      Buffer.alloc(133333, 1);
      detach();
      console.log(JSON.stringify({ a: a.path, b: b.path, c: c.path, errors }));
      `,
    );
    expect(out.b).toMatch(/heaplog\.\d+\.1\.log$/);
    expect(out.c).toBe(resolve(dir, 'named', 'run.log'));
    const sizes = [111111, 123456, 133333];
    for (const [i, log] of [out.a, out.b, out.c].entries()) {
      const records = await recordsOf(log as string);
      expect(records.find((r) => r.type === 'end')).toMatchObject({ reason: 'detach' });
      const bytes = new Set(events(records).map(bytesOf));
      // each log has its own Buffer and neither of the others'
      expect(sizes.map((s) => bytes.has(s))).toEqual(sizes.map((_, k) => k === i));
      expect((await report(log as string, { symbolize: false })).error).toBeUndefined();
    }
    expect(out.errors).toEqual([
      'not attached: call attach() first',
      expect.stringMatching(/^already attached \(writing .*\): call detach\(\) first$/),
      'attach({ outputDir, path }): give one of them, not both',
      expect.stringMatching(/names a folder: use attach\(\{ outputDir \}\) for a folder/),
    ]);
  });

  it('worker threads allocating while the main thread attaches and detaches: no crash, complete logs', async () => {
    const dir = scratch('attach-workers');
    const out = runNode(
      dir,
      `
      const { Worker } = require('node:worker_threads');
      const { attach, detach } = require('@heaphook/heaptrack');
      // The workers allocate on a timer all along (attach and detach race with them), and
      // each attached window also waits for one batch from each worker, so that their
      // allocations are in every log however slowly a loaded machine schedules them.
      const code = 'const { parentPort } = require("node:worker_threads"); let n = 0;' +
        'const batch = () => { for (let i = 0; i < 200; i++) n += Buffer.alloc(8192 + i, 1).length; };' +
        'const t = setInterval(batch, 1);' +
        'parentPort.on("message", (m) => { if (m === "batch") { batch(); parentPort.postMessage("done"); return; }' +
        ' clearInterval(t); parentPort.postMessage(n); });';
      const workers = [0, 1].map(() => new Worker(code, { eval: true }));
      const ask = (w, m) => new Promise((r) => { w.once('message', r); w.postMessage(m); });
      const logs = [];
      (async () => {
        await Promise.all(workers.map((w) => ask(w, 'batch'))); // both running
        for (let c = 0; c < 5; c++) {
          logs.push(attach({ outputDir: 'logs' }).path);
          await Promise.all(workers.map((w) => ask(w, 'batch')));
          await new Promise((r) => setTimeout(r, 30));
          detach();
          await new Promise((r) => setTimeout(r, 10));
        }
        const totals = await Promise.all(workers.map((w) => ask(w, 'stop')));
        await Promise.all(workers.map((w) => w.terminate()));
        console.log(JSON.stringify({ logs, totals }));
      })();
      `,
    );
    const logs = out.logs as string[];
    expect(logs).toHaveLength(5);
    for (const log of logs) {
      const records = await recordsOf(log);
      expect(records.find((r) => r.type === 'end')).toMatchObject({ reason: 'detach' });
      const threads = new Set(events(records).map((e) => e.tid));
      expect(threads.size).toBeGreaterThanOrEqual(2); // the workers' allocations are in it
      expect((await report(log, { symbolize: false })).error).toBeUndefined();
    }
  });

  it('refuses when the tracer is preloaded: tracing is already on for the whole process', () => {
    const dir = scratch('attach-preloaded');
    const out = runNode(
      dir,
      `
      const { attach } = require('@heaphook/heaptrack');
      let message = '';
      try { attach(); } catch (e) { message = e.message; }
      console.log(JSON.stringify({ message }));
      `,
      { LD_PRELOAD: tracer, HEAPHOOK_LOG_DIR: dir, HEAPHOOK_LEAK_CHECK: '0' },
    );
    expect(out.message).toMatch(
      /is preloaded into this process \(LD_PRELOAD\): tracing is already on/,
    );
  });

  it("works from CommonJS (require('@heaphook/heaptrack'), no flag) and from ESM (import)", async () => {
    const dir = scratch('attach-modules');
    const script = (load: string) =>
      `${load}
      const a = attach({ outputDir: 'logs' });
      const b = Buffer.alloc(99999, 1);
      console.log(JSON.stringify({ path: detach().path, n: b.length }));`;
    writeFileSync(
      join(dir, 'cjs.cjs'),
      script("const { attach, detach } = require('@heaphook/heaptrack');"),
    );
    writeFileSync(
      join(dir, 'esm.mjs'),
      script("import { attach, detach } from '@heaphook/heaptrack';"),
    );
    for (const file of ['cjs.cjs', 'esm.mjs']) {
      const r = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      const { path } = JSON.parse(r.stdout) as { path: string };
      expect(events(await recordsOf(path)).some((e) => e.size === 99999)).toBe(true);
    }
  });
});

describe('heaphook_heaptrack_attach / _detach from C', () => {
  it('ten attach/detach cycles while four threads allocate, with a fork: one complete log per cycle, exact markers', async () => {
    const dir = scratch('attach-native');
    const r = spawnSync(join(release, 'hh_test_attach'), [tracer, dir, '10'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { cycles: number; child: number; marker: number };
    expect(out).toEqual({ cycles: 10, child: 0, marker: 3 });
    const pid = String(r.pid);
    const logs = readdirSync(dir).filter((f) => f.startsWith(`heaplog.${pid}.`));
    expect(logs).toHaveLength(10);
    for (const log of logs) {
      const records = await recordsOf(join(dir, log));
      const ev = events(records);
      // the main thread's markers of this cycle, exactly; never the size made while detached
      expect(ev.filter((e) => e.op === 'malloc' && e.size === 777777)).toHaveLength(3);
      expect(ev.some((e) => e.size === 777778)).toBe(false);
      expect(records.find((r) => r.type === 'end')).toMatchObject({ reason: 'detach' });
    }
    // the child forked while attached traced itself into a log of its own
    const child = readdirSync(dir).filter((f) => !f.startsWith(`heaplog.${pid}.`));
    expect(child).toHaveLength(1);
    const childRecords = await recordsOf(join(dir, child[0]!));
    const childEvents = events(childRecords);
    for (let size = 100; size < 200; size++) {
      expect(childEvents.filter((e) => e.op === 'malloc' && e.size === size)).toHaveLength(1);
    }
    expect(childRecords.find((r) => r.type === 'end')).toMatchObject({ reason: 'exit' });
  });

  it('forks again and again while another thread attaches and detaches twenty times: no deadlock, each log exact', async () => {
    const dir = scratch('attach-forks');
    const r = spawnSync(join(release, 'hh_test_attach'), [tracer, dir, 'forkattach', '20'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(
      r.signal,
      `killed by ${r.signal} (SIGTERM: hung until the timeout)\n${r.stderr}`,
    ).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { cycles: number; forks: number; children_ok: number };
    expect(out.cycles).toBe(20);
    expect(out.children_ok).toBe(out.forks);
    const pid = String(r.pid);
    const own = readdirSync(dir).filter((f) => f.startsWith(`heaplog.${pid}.`));
    expect(own).toHaveLength(20);
    for (const log of own) {
      expect((await recordsOf(join(dir, log))).find((x) => x.type === 'end')).toMatchObject({
        reason: 'detach',
      });
    }
    // a child forked while attached traces itself: each of its 100 calls exactly once
    const children = readdirSync(dir).filter((f) => !f.startsWith(`heaplog.${pid}.`));
    expect(children.length).toBeLessThanOrEqual(out.forks);
    for (const log of children) {
      const records = await recordsOf(join(dir, log));
      const ev = events(records).filter(
        (e) => e.op === 'malloc' && e.size! >= 100 && e.size! < 200,
      );
      expect(ev.map((e) => e.size).sort((a, b) => a! - b!)).toEqual(
        Array.from({ length: 100 }, (_, i) => 100 + i),
      );
      expect(records.find((x) => x.type === 'end')).toMatchObject({ reason: 'exit' });
    }
  });

  it('a call inside a hook when detach comes (a free held 300 ms) is waited for: the calls after it are in the log', async () => {
    const dir = scratch('attach-inflight');
    const log = join(dir, 'inflight.log');
    const r = spawnSync(join(release, 'hh_test_attach'), [tracer, log, 'inflight'], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, LD_PRELOAD: slowFree },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ inflight: 1, marker: 3 });
    const records = await recordsOf(log);
    const ev = events(records);
    // the markers were reserved after the held free and published before it
    expect(ev.filter((e) => e.op === 'malloc' && e.size === 777777)).toHaveLength(3);
    const allocated = new Set(ev.filter((e) => e.op !== 'free').map((e) => e.ptr));
    // the held free (of a block allocated before the attach) is in too, and nothing dropped
    expect(ev.filter((e) => e.op === 'free' && !allocated.has(e.ptr))).toHaveLength(1);
    expect(records.find((r) => r.type === 'end')).toMatchObject({ reason: 'detach', dropped: 0 });
  });
});
