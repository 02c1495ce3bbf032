/**
 * The one replay (heaplog_addon.node, native/analyze) against its test oracle (test/oracle, the
 * same replay in TypeScript over the decoder's columns), figure for figure: the same report
 * model and the same allocation sequence (recommend's TLSF operations) from logs of every kind
 * (exact counts, edge cases, threads trading blocks with moved reallocs, sampling, durations,
 * leak checks, python3, a forking pipeline) and, on a damaged log, the same error and the same
 * report of the valid part.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

import { describe, expect, it } from 'vitest';

import { ReplayOp } from '@heaphook/tlsf';

import { OPS } from '../../src/decode/records.js';
import {
  heaplogAddon,
  newScanner,
  replayLog,
  SEQUENCE_FIGURES,
  TIMELINE_COLUMNS,
  TIMELINE_FIELDS,
  timelineOf,
  type LiveColumns,
  type ScannerTotals,
  type SiteColumns,
} from '../../src/decode/replay.js';
import { buildReportModel } from '../../src/report/run.js';
import type { ReportModel } from '../../src/report/model.js';
import { logsIn, python3, release, scratch, traced, tracer, workload } from '../helpers.js';
import { damagedInsideBlock } from '../damage.js';
import { oracleReportModel } from '../oracle/report.js';
import { oracleSequence } from '../oracle/sequence.js';

/** The model as plain data: histograms by their rows, stacks and modules by count. */
function comparable(m: ReportModel) {
  return {
    ...m,
    stacks: m.stacks.size,
    modules: m.modules.length,
    sites: m.sites.map(({ epoch: _internal, ...site }) => site),
    threads: undefined, // the oracle does not compute them: test/integration/perfetto.test.ts checks them
    sizeHistogram: m.sizeHistogram.rows(),
    latency: [...m.latency].map(([op, h]) => [op, h.percentiles(), h.coarse()]),
  };
}

async function bothEngines(log: string) {
  const js = await oracleReportModel(log);
  const native = await buildReportModel(log, { progress: false });
  return { js, native };
}

/** The native allocation sequence of a whole log (as recommend's passes take it). */
async function nativeSequence(log: string) {
  const scanner = newScanner(2, 1);
  scanner.startSequence(true, ReplayOp.ALLOC, ReplayOp.FREE, ReplayOp.REALLOC);
  const ops: number[] = [];
  const events: number[] = [];
  await replayLog(log, scanner, () => {}, {
    onBlock: () => {
      const taken = scanner.takeSequence();
      ops.push(...taken.ops);
      events.push(...taken.events);
    },
  });
  const { threads, ...figures } = scanner.sequenceFigures();
  return { ops, events, figures, threads };
}

async function expectSameModel(log: string): Promise<ReportModel> {
  const { js, native } = await bothEngines(log);
  expect(js.error).toBeUndefined();
  expect(native.error).toBeUndefined();
  expect(comparable(native.model)).toEqual(comparable(js.model));
  const [oracle, replayed] = [await oracleSequence(log), await nativeSequence(log)];
  expect(replayed.ops.length).toBe(oracle.ops.length);
  expect(replayed).toEqual(oracle);
  return native.model;
}

function tracedLog(name: string, args: string[], env: Record<string, string> = {}): string {
  const dir = scratch(`native-${name}`);
  const run = traced(dir, workload, args, env);
  expect(run.status, run.stderr).toBe(0);
  return logsIn(dir)[0]!;
}

describe('the one replay', () => {
  it('is built with the package', () => {
    expect(heaplogAddon().Scanner).toBeTypeOf('function');
  });

  it('gives the oracle’s model and allocation sequence on the exact-count workload, with durations', async () => {
    const m = await expectSameModel(tracedLog('counts', ['counts'], { HEAPHOOK_TIMING: '1' }));
    expect(m.events).toBeGreaterThan(1000);
    expect(m.latency.size).toBeGreaterThan(3);
    expect(m.temporaryAllocations).toBeGreaterThan(0);
  });

  it('hands TypeScript its results by name, each figure the declared one', async () => {
    // Every name ScannerTotals, SiteColumns and LiveColumns declare (keyed by their types: a name
    // added on one side only fails here or does not type-check), and nothing else.
    const totals: Record<keyof ScannerTotals, true> = {
      calls: true,
      events: true,
      allocatedBytes: true,
      liveBytes: true,
      peakBytes: true,
      peakTime: true,
      peakBlocks: true,
      peakBlocksTime: true,
      lastTime: true,
      temporary: true,
      unknownFrees: true,
      failedCalls: true,
      anomalies: true,
      freedBeforeAttach: true,
      sizeCounts: true,
      sizeBytes: true,
    };
    const site: Record<keyof SiteColumns, true> = {
      stack: true,
      allocations: true,
      bytes: true,
      liveBlocks: true,
      liveBytes: true,
      peakBytes: true,
      temporary: true,
      lowestLiveAddress: true,
    };
    const live: Record<keyof LiveColumns, true> = {
      address: true,
      weight: true,
      site: true,
      op: true,
    };
    const scanner = newScanner(64, 1e6);
    scanner.startTimeline(8);
    await replayLog(tracedLog('counts', ['counts']), scanner, () => {});
    const r = scanner.result();
    expect(Object.keys(r.totals).sort()).toEqual(Object.keys(totals).sort());
    expect(Object.keys(r.sites).sort()).toEqual(Object.keys(site).sort());
    const blocks = scanner.liveBlocks();
    expect(Object.keys(blocks).sort()).toEqual(Object.keys(live).sort());
    // the workload's seven leaked blocks, each named by its column
    expect(blocks.address.length).toBe(7);
    expect([...blocks.weight].reduce((a, b) => a + b, 0)).toBe(28000);
    expect(r.totals.calls.length).toBe(OPS.length);
    expect(r.totals.events).toBe(
      [...r.totals.calls].reduce((a, b) => a + b, 0) - r.totals.calls[OPS.indexOf('realloc_done')]!,
    );
    // the sequence's figures and the timeline's columns as SEQUENCE_FIGURES and
    // TIMELINE_COLUMNS declare them (scan.h: HH_SCAN_SEQUENCE_FIGURES, HH_TIMELINE_COLUMNS)
    expect(Object.keys(scanner.sequenceFigures()).sort()).toEqual([...SEQUENCE_FIGURES].sort());
    const timeline = scanner.timeline();
    expect(Object.keys(timeline!.cells).sort()).toEqual([...TIMELINE_COLUMNS].sort());
    const cells = timeline!.cells.site.length;
    expect(cells).toBeGreaterThan(0);
    // laid out for the report cell after cell, each column at its declared place
    const laidOut = timelineOf(scanner)!.cells;
    expect(laidOut.length).toBe(cells * TIMELINE_FIELDS);
    TIMELINE_COLUMNS.forEach((name, f) =>
      expect(laidOut.filter((_, i) => i % TIMELINE_FIELDS === f)).toEqual(timeline!.cells[name]),
    );
  });

  it('… on the edge cases (failed calls, every function, aligned blocks), stored uncompressed', async () => {
    const m = await expectSameModel(tracedLog('edges', ['edges'], { HEAPHOOK_COMPRESS: 'none' }));
    expect(m.failedCalls).toBe(5);
  });

  it('… on threads trading blocks, with reallocs that move', async () => {
    const m = await expectSameModel(tracedLog('trade', ['trade', '4', '30000']));
    expect(m.calls.realloc_done).toBeGreaterThan(0);
  });

  it('… on a sampled log (weights)', async () => {
    const m = await expectSameModel(
      tracedLog('sampled', ['churn', '200000'], { HEAPHOOK_SAMPLE_BYTES: '4096' }),
    );
    expect(m.process?.sampling).toBe(true);
  });

  it('… on a log with leak checks', async () => {
    const dir = scratch('native-leaks');
    // hh_test_leaks links the tracer itself (it calls the precise API): no preload.
    const run = traced(dir, join(release, 'hh_test_leaks'), ['scenarios'], {}, []);
    expect(run.status, run.stderr).toBe(0);
    const m = await expectSameModel(logsIn(dir)[0]!);
    expect(m.leaks.source).toBe('leak-check');
    expect(m.leaks.leakedBlocks).toBeGreaterThan(0);
  });

  it('… on 300,000 blocks replaced in random order (addresses reused, moved, retired)', async () => {
    // The native pass keeps its address index without deletions (an entry goes stale when its
    // block ends and is taken over by the next block at that address, or dropped when the index
    // is rebuilt): random replacement reuses some addresses at once and others never, so both
    // kinds of stale entries and many rebuilds happen here.
    const dir = scratch('native-churn');
    const run = traced(dir, join(release, 'hh_test_leaks'), ['churn'], {}, []);
    expect(run.status, run.stderr).toBe(0);
    const m = await expectSameModel(logsIn(dir)[0]!);
    expect(m.calls.free).toBeGreaterThanOrEqual(270_000);
    expect(m.peakLiveBlocks).toBeGreaterThanOrEqual(30_000);
  });

  it('… on python3 and on every log of a forking shell pipeline', async () => {
    const dir = scratch('native-python');
    const py = traced(dir, python3, [
      '-c',
      'import json; print(len(json.dumps([{"k": str(i)} for i in range(20000)])))',
    ]);
    expect(py.status, py.stderr).toBe(0);
    await expectSameModel(logsIn(dir)[0]!);
    const pipe = scratch('native-pipeline');
    const sh = spawnSync('/bin/sh', ['-c', 'seq 1 3000 | sort -r | uniq | wc -l'], {
      cwd: pipe,
      encoding: 'utf8',
      env: { ...process.env, LD_PRELOAD: tracer, HEAPHOOK_LOG_DIR: pipe },
    });
    expect(sh.stdout.trim()).toBe('3000');
    const logs = logsIn(pipe);
    expect(logs.length).toBeGreaterThanOrEqual(4);
    for (const log of logs) await expectSameModel(log);
  });

  it('stops at the same damaged record with the same error, having replayed the same part', async () => {
    const log = tracedLog('damaged', ['counts'], { HEAPHOOK_COMPRESS: 'none' });
    const { bytes, offset: damagedAt } = damagedInsideBlock(log);
    const damaged = join(scratch('native-damaged-copy'), 'heaplog.1.log');
    writeFileSync(damaged, bytes);
    const { js, native } = await bothEngines(damaged);
    expect(js.error?.offset).toBe(damagedAt);
    expect(native.error?.message).toBe(js.error?.message);
    expect(js.model.events).toBeGreaterThan(0);
    expect(comparable(native.model)).toEqual(comparable(js.model));
  });

  it('agrees with the oracle on 100 logs damaged at random (CRC made valid), and never crashes', async () => {
    // Threads trading blocks, and the edge cases (a failed malloc(SIZE_MAX) logs a size above
    // 2^53): damage that turns into huge values must be judged alike by both passes.
    const bases = [
      readFileSync(tracedLog('fuzz', ['trade', '2', '3000'], { HEAPHOOK_COMPRESS: 'none' })),
      readFileSync(tracedLog('fuzz-edges', ['edges'], { HEAPHOOK_COMPRESS: 'none' })),
    ];
    let seed = 20261123; // a fixed sequence of damage
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return Math.floor((seed / 2147483648) * n);
    };
    const dir = scratch('native-fuzz');
    let damaged = 0;
    for (let i = 0; i < 100; i++) {
      const base = bases[i % bases.length]!;
      const blocks: [number, number][] = [];
      for (let at = 16; at + 8 <= base.length; at += 8 + (base.readUInt32LE(at) & 0x3fffffff))
        blocks.push([at, base.readUInt32LE(at) & 0x3fffffff]);
      const bytes = Buffer.from(base);
      const [offset, length] = blocks[random(blocks.length)]!;
      for (let k = 0; k <= random(6); k++) bytes[offset + 8 + random(length)] = random(256);
      bytes.writeUInt32LE(crc32(bytes.subarray(offset + 8, offset + 8 + length)), offset + 4);
      const log = join(dir, `heaplog.${i}.log`);
      writeFileSync(log, bytes);
      const { js, native } = await bothEngines(log);
      expect(native.error?.message, `damage #${i}`).toBe(js.error?.message);
      expect(comparable(native.model), `damage #${i}`).toEqual(comparable(js.model));
      if (js.error !== undefined) damaged++;
    }
    expect(damaged).toBeGreaterThan(50); // most damage is found; the rest changes values only
  });
});
