/**
 * The Perfetto export (issue 29, item 3): `report -o DIR` writes heap.perfetto-trace, a Perfetto
 * trace whose counter tracks are the heap in use, the mapped memory and each thread's
 * allocations, read back here with Perfetto's schema (proto/perfetto_trace.proto) and checked
 * against programs whose figures are known.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { memoryEventsLibrary, report, type ReportModel } from '../../src/index.js';
import { perfettoTraceType } from '../../src/report/perfetto.js';
import { logsIn, python3, release, scratch, traced, tracer, workload } from '../helpers.js';

interface Packet {
  timestamp?: number;
  trustedPacketSequenceId?: number;
  sequenceFlags?: number;
  trackDescriptor?: {
    uuid: number;
    parentUuid?: number;
    name?: string;
    process?: { pid: number; cmdline: string[]; processName: string };
    thread?: { pid: number; tid: number; threadName: string };
    counter?: { unit: string };
  };
  trackEvent?: { type: string; trackUuid: number; counterValue: number };
}

/** The trace's packets as plain objects (64-bit fields as numbers, enums by name). */
async function readTrace(file: string): Promise<{ packets: Packet[]; bytes: Uint8Array }> {
  const bytes = readFileSync(file);
  const type = await perfettoTraceType();
  const message = type.decode(bytes);
  // Every field is one the schema knows: re-encoding gives the very same bytes.
  expect(Buffer.from(type.encode(message).finish()).equals(bytes)).toBe(true);
  const trace = type.toObject(message, { longs: Number, enums: String }) as { packet: Packet[] };
  return { packets: trace.packet, bytes };
}

/** The values of the counter track named `name` under `parent`, in time order. */
function counterValues(packets: Packet[], parent: number, name: string): [number, number][] {
  const track = packets.find(
    (p) => p.trackDescriptor?.parentUuid === parent && p.trackDescriptor.name === name,
  )?.trackDescriptor;
  expect(track, `a counter track "${name}"`).toBeDefined();
  return packets
    .filter((p) => p.trackEvent?.trackUuid === track!.uuid)
    .map((p) => [p.timestamp!, p.trackEvent!.counterValue]);
}

/** Every allocation of the run (the sites' successful ones) is some thread's. */
function expectEveryAllocationInAThread(model: ReportModel): void {
  const sum = <T>(rows: readonly T[], f: (row: T) => number) => rows.reduce((n, r) => n + f(r), 0);
  expect(sum(model.threads, (t) => t.allocations)).toBe(sum(model.sites, (s) => s.allocations));
  expect(sum(model.threads, (t) => t.bytes)).toBe(model.allocatedBytes);
}

async function reportOf(dir: string) {
  const out = join(dir, 'out');
  const result = await report(logsIn(dir)[0]!, { outputDir: out, symbolize: false });
  expect(result.error).toBeUndefined();
  return { model: result.model, trace: await readTrace(join(out, 'heap.perfetto-trace')) };
}

describe('the Perfetto trace', () => {
  it('has a thread track per thread with its exact allocations and bytes, and the heap as a counter', async () => {
    const dir = scratch('perfetto-threads');
    // 3 threads, each 1,000 malloc + free pairs of (i % 256) + 1 bytes: 125,716 bytes a thread.
    const run = traced(dir, workload, ['threads', '3', '1000']);
    expect(run.status, run.stderr).toBe(0);
    const { model, trace } = await reportOf(dir);
    const { packets } = trace;

    expect(packets[0]!.sequenceFlags).toBe(1);
    expect(packets.every((p) => p.trustedPacketSequenceId === 1)).toBe(true);
    const processTrack = packets[0]!.trackDescriptor!;
    expect(processTrack.process?.pid).toBe(model.process!.pid);
    expect(processTrack.process?.cmdline[0]).toBe(workload);

    const threads = packets.flatMap((p) =>
      p.trackDescriptor?.thread !== undefined ? [p.trackDescriptor] : [],
    );
    const workers = threads.filter((t) => t.thread!.tid !== model.process!.pid);
    expect(workers).toHaveLength(3);
    for (const w of workers) {
      expect(w.thread!.pid).toBe(model.process!.pid);
      const allocations = counterValues(packets, w.uuid, 'allocations');
      const bytes = counterValues(packets, w.uuid, 'allocated bytes');
      expect(allocations.at(-1)![1]).toBe(1000);
      expect(bytes.at(-1)![1]).toBe(125_716);
      // cumulative: never decreasing
      for (let i = 1; i < bytes.length; i++)
        expect(bytes[i]![1]).toBeGreaterThanOrEqual(bytes[i - 1]![1]);
    }
    expectEveryAllocationInAThread(model);

    const heap = counterValues(packets, processTrack.uuid, 'heap in use');
    expect(Math.max(...heap.map(([, v]) => v))).toBe(model.peakHeapBytes);
    const start = model.process!.monotonicStartNs;
    for (const [t] of heap) {
      expect(t).toBeGreaterThanOrEqual(start);
      expect(t).toBeLessThanOrEqual(start + model.lastTimeNs);
    }
    // The events are in time order.
    const times = packets.flatMap((p) => (p.trackEvent !== undefined ? [p.timestamp!] : []));
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it('has the mapped memory as a counter track when ucm-hooks recorded memory events', async () => {
    const dir = scratch('perfetto-mapped');
    const run = traced(dir, join(release, 'hh_test_mapper'), [], {}, [
      memoryEventsLibrary(true)!,
      tracer,
    ]);
    expect(run.status, run.stderr).toBe(0);
    const { model, trace } = await reportOf(dir);
    const mapped = counterValues(trace.packets, 1, 'mapped memory');
    expect(model.mapped).toBeDefined();
    expect(Math.max(...mapped.map(([, v]) => v))).toBe(model.mapped!.peakBytes);
    expect(mapped.at(-1)![1]).toBe(model.mapped!.finalBytes);
  });

  it('sums the threads beyond the first 64 into one track, losing no allocation', async () => {
    const dir = scratch('perfetto-many-threads');
    const program = [
      'import threading',
      'def work(): [bytearray(100) for _ in range(50)]',
      'ts = [threading.Thread(target=work) for _ in range(80)]',
      'for t in ts: t.start()',
      'for t in ts: t.join()',
    ].join('\n');
    const run = traced(dir, python3, ['-c', program]);
    expect(run.status, run.stderr).toBe(0);
    const { model, trace } = await reportOf(dir);
    expect(model.threads.length).toBe(65);
    expect(model.threads.at(-1)!.tid).toBe(-1);
    expect(model.threads.slice(0, 64).every((t) => t.tid > 0)).toBe(true);
    expectEveryAllocationInAThread(model);
    const others = trace.packets.find((p) => p.trackDescriptor?.name === 'other threads');
    expect(others?.trackDescriptor?.parentUuid).toBe(1);
    const total = counterValues(trace.packets, others!.trackDescriptor!.uuid, 'allocations');
    expect(total.at(-1)![1]).toBe(model.threads.at(-1)!.allocations);
  });
});
