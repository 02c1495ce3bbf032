/**
 * Perfetto export (heap.perfetto-trace): the run as a Perfetto trace (protobuf, the format
 * ui.perfetto.dev and trace_processor open), one process track with counter tracks under it —
 * heap in use, and mapped memory when the log has memory events — and, per thread, its
 * allocations and allocated bytes over time as two counter tracks under a thread track.
 *
 * The counters come from the report's series (model.series, mapped.series, threads), whose
 * buckets have a width that grows with the run (src/report/series.ts): the heap and mapped
 * counters take each bucket's maximum at its start and its last value at its end, so the peaks
 * the report names are on the track; the thread counters are cumulative (the allocations and
 * bytes up to the end of each bucket). Timestamps are CLOCK_MONOTONIC ns (the process record's
 * start plus the event times), written on Perfetto's default clock for track events.
 *
 * The schema is proto/perfetto_trace.proto: the messages of Perfetto's own that this file
 * writes, with Perfetto's field numbers.
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Type } from 'protobufjs';

import type { ReportModel } from './model.js';
import type { SeriesPoint } from './series.js';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The Perfetto schema heaphook writes (and the tests read the trace back with). */
export const PERFETTO_PROTO = join(packageDir, 'proto', 'perfetto_trace.proto');

/** The packets' one sequence: Perfetto wants a nonzero id per writer. */
const SEQUENCE_ID = 1;
/** TracePacket.sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED on the first packet. */
const SEQ_INCREMENTAL_STATE_CLEARED = 1;
/** TrackEvent.Type.TYPE_COUNTER and CounterDescriptor.Unit values (perfetto_trace.proto). */
const TYPE_COUNTER = 4;
const UNIT_COUNT = 2;
const UNIT_SIZE_BYTES = 3;

/** Track uuids: any 64-bit values unique in the trace; these keep them readable. */
const PROCESS_UUID = 1;
const HEAP_UUID = 2;
const MAPPED_UUID = 3;
const threadUuid = (i: number): number => 1000 + 3 * i;

interface Packet {
  timestamp?: number;
  trustedPacketSequenceId: number;
  sequenceFlags?: number;
  trackDescriptor?: Record<string, unknown>;
  trackEvent?: { type: number; trackUuid: number; counterValue: number };
}

let traceType: Type | undefined;

/** The Trace message type of the schema (parsed once; protobufjs is loaded only then, so the
 * reports that write no trace do not pay for loading it). */
export async function perfettoTraceType(): Promise<Type> {
  if (traceType === undefined) {
    const { default: protobuf } = await import('protobufjs');
    traceType = protobuf.loadSync(PERFETTO_PROTO).lookupType('perfetto.protos.Trace');
  }
  return traceType;
}

/** Counter events of a series: each bucket's maximum at its start, its last value at its end. */
function seriesCounters(
  series: readonly SeriesPoint[],
  endNs: number,
  track: number,
  at: (ns: number) => number,
): Packet[] {
  const out: Packet[] = [];
  series.forEach((p, i) => {
    const next = series[i + 1]?.time ?? Math.max(endNs, p.time + 1);
    out.push(counter(at(p.time), track, p.max));
    // (never after the run's end: a bucket starting at the end has both at its start)
    const lastAt = Math.min(Math.max(p.time + 1, next - 1), Math.max(endNs, p.time));
    if (p.last !== p.max) out.push(counter(at(lastAt), track, p.last));
  });
  return out;
}

function counter(timestamp: number, trackUuid: number, value: number): Packet {
  return {
    timestamp,
    trustedPacketSequenceId: SEQUENCE_ID,
    trackEvent: { type: TYPE_COUNTER, trackUuid, counterValue: Math.round(value) },
  };
}

function descriptor(track: Record<string, unknown>): Packet {
  return { trustedPacketSequenceId: SEQUENCE_ID, trackDescriptor: track };
}

/** The report's run as Perfetto trace bytes. */
export async function perfettoTrace(model: ReportModel): Promise<Uint8Array> {
  const pid = model.process?.pid ?? 0;
  const argv = model.process?.argv ?? [];
  const start = model.process?.monotonicStartNs ?? 0;
  const at = (ns: number): number => start + ns;
  const end = model.lastTimeNs;
  const name = argv[0] ?? `pid ${pid}`;

  const packets: Packet[] = [
    {
      ...descriptor({
        uuid: PROCESS_UUID,
        process: { pid, cmdline: [...argv], processName: name },
      }),
      sequenceFlags: SEQ_INCREMENTAL_STATE_CLEARED,
    },
    descriptor({
      uuid: HEAP_UUID,
      parentUuid: PROCESS_UUID,
      name: 'heap in use',
      description: 'Bytes of the live heap blocks (heaphook heaptrack)',
      counter: { unit: UNIT_SIZE_BYTES },
    }),
  ];
  if (model.mapped !== undefined)
    packets.push(
      descriptor({
        uuid: MAPPED_UUID,
        parentUuid: PROCESS_UUID,
        name: 'mapped memory',
        description: 'Bytes mapped, from the memory events (VM_MAPPED / VM_UNMAPPED)',
        counter: { unit: UNIT_SIZE_BYTES },
      }),
    );
  model.threads.forEach((t, i) => {
    const thread = threadUuid(i);
    const label = t.tid < 0 ? 'other threads' : `thread ${t.tid}`;
    packets.push(
      t.tid < 0
        ? descriptor({ uuid: thread, parentUuid: PROCESS_UUID, name: label })
        : descriptor({ uuid: thread, thread: { pid, tid: t.tid, threadName: label } }),
      descriptor({
        uuid: thread + 1,
        parentUuid: thread,
        name: 'allocations',
        counter: { unit: UNIT_COUNT },
      }),
      descriptor({
        uuid: thread + 2,
        parentUuid: thread,
        name: 'allocated bytes',
        counter: { unit: UNIT_SIZE_BYTES },
      }),
    );
  });

  const events: Packet[] = [
    counter(at(0), HEAP_UUID, 0),
    ...seriesCounters(model.series, end, HEAP_UUID, at),
    // The exact peak, which a bucket's maximum already holds; its time is exact here.
    counter(at(model.peakTimeNs), HEAP_UUID, model.peakHeapBytes),
  ];
  if (model.mapped !== undefined)
    events.push(
      counter(at(0), MAPPED_UUID, 0),
      ...seriesCounters(model.mapped.series, end, MAPPED_UUID, at),
    );
  model.threads.forEach((t, i) => {
    const thread = threadUuid(i);
    let allocations = 0;
    let bytes = 0;
    events.push(counter(at(0), thread + 1, 0), counter(at(0), thread + 2, 0));
    for (const b of t.series) {
      allocations += b.allocations;
      bytes += b.bytes;
      const time = at(Math.max(b.time, Math.min(b.time + t.bucketNs - 1, end)));
      events.push(counter(time, thread + 1, allocations), counter(time, thread + 2, bytes));
    }
  });
  // One sequence, in time order (the order trace_processor prefers; it sorts anyway).
  events.sort((a, b) => a.timestamp! - b.timestamp!);
  packets.push(...events);

  const type = await perfettoTraceType();
  const message = type.fromObject({ packet: packets });
  return type.encode(message).finish();
}
