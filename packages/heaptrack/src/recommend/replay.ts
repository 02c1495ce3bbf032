/**
 * Replays a heaplog's allocation sequence through real TLSF heaps (the @heaphook/tlsf addon,
 * the same C code as libheaphook_tlsf.so).
 *
 * One pass over the log drives several heaps at once, each a single pool of a candidate size
 * that never grows (`additionalPoolSize: 0`): a candidate fails at the first allocation its
 * pool cannot serve, which is exactly where libheaphook_tlsf.so with that INITIAL_MEMPOOL_SIZE
 * (and HEAPHOOK_TLSF_THREAD_HEAPS=0, one shared heap) would have grown. The one replay
 * (native/analyze/scan.h, "allocation sequence") turns the events of each block into
 * TlsfHeap.replay operations on slot-numbered blocks, and every heap replays the block in one
 * call: no JavaScript per event. Memory: the log is streamed; the replay keeps one table entry
 * per live block (log address -> slot), each heap one pointer per slot.
 */
import { ReplayOp, TlsfHeap } from '@heaphook/tlsf';

import { heaplogAddon, newScanner, replayLog, totalsOf } from '../decode/replay.js';
import { OPS, type EndRecord, type EventRecord, type ProcessRecord } from '../decode/records.js';

/** Page size assumed for valloc/pvalloc (the log does not record it; x86-64 Linux). */
export const PAGE_SIZE = 4096;

/** One allocation as the backend receives it: bytes and alignment (1 = default). */
export interface Request {
  readonly size: number;
  readonly align: number;
}

/** What the core hands the backend for an allocating event (see core/native/interpose.c):
 * the replay's own rule (native/analyze/sequence.c, request_size and request_align). */
export function requestOf(e: EventRecord): Request {
  return heaplogAddon().requestOf(OPS.indexOf(e.op), e.size, e.count, e.align);
}

/** Bytes a used block of this request takes in a TLSF pool at least (head included). */
export function footprint(r: Request): number {
  return heaplogAddon().footprintOf(r.size);
}

/** What a pass learns about the log besides the events. */
export interface LogFacts {
  process?: ProcessRecord;
  end?: EndRecord;
  events: number;
  /** Threads that called the allocator. */
  threads: number;
}

/** Peaks of a log's live blocks, kept by a pass that is asked to. */
export interface PeakFigures {
  /** Peak of the live bytes asked for, and of their TLSF footprints. */
  readonly peakBytes: number;
  readonly peakFootprint: number;
  readonly largestRequest: number;
  readonly largestAlign: number;
}

/** A heap of one candidate pool size, fed the log until it cannot serve a request. */
export class CandidateHeap {
  readonly heap: TlsfHeap;
  /** Event number (1-based) of the first request the pool could not serve. */
  failedAt: number | undefined;

  constructor(readonly poolSize: number) {
    this.heap = new TlsfHeap({
      initialPoolSize: poolSize,
      additionalPoolSize: 0,
      maxPoolSize: poolSize + 2 * PAGE_SIZE,
    });
  }

  get failed(): boolean {
    return this.failedAt !== undefined;
  }

  /** The highest end (offset + bytes asked for) of any block this heap handed out: in a pool
   * too large to fill, how far into it the log reached. */
  get highWater(): number {
    return this.heap.stats().highWater;
  }

  /** Replays a batch of operations, `events` the event number of each (stops for good at the
   * first it cannot serve). */
  run(ops: Float64Array, events: Float64Array): void {
    if (this.failed || events.length === 0) return;
    const at = this.heap.replay(ops, events.length);
    if (at >= 0) this.failedAt = events[at];
  }

  /** Releases the heap's memory. */
  destroy(): void {
    this.heap.destroy();
  }
}

/**
 * One pass over the log: the one replay (src/decode/replay.ts) turns its events into the
 * allocation sequence, block by block, which every candidate heap replays (those that failed
 * stop); with `tally` it keeps the peaks too. Reading stops early when every candidate failed
 * and neither facts nor a tally are wanted.
 */
export async function replayPass(
  path: string,
  candidates: readonly CandidateHeap[],
  facts?: LogFacts,
  onProgress?: (events: number) => void,
  tally = false,
): Promise<PeakFigures> {
  const scanner = newScanner(2, 1);
  scanner.startSequence(tally, ReplayOp.ALLOC, ReplayOp.FREE, ReplayOp.REALLOC);
  const wanted = facts !== undefined || tally;
  await replayLog(
    path,
    scanner,
    (r) => {
      if (facts === undefined) return;
      if (r.type === 'process') facts.process ??= r;
      else if (r.type === 'end') facts.end = r;
    },
    {
      onBlock: (events) => {
        const { ops, events: opEvents } = scanner.takeSequence();
        for (const c of candidates) c.run(ops, opEvents);
        onProgress?.(events);
        return wanted || candidates.length === 0 || !candidates.every((c) => c.failed);
      },
    },
  );
  const { threads, ...figures } = scanner.sequenceFigures();
  if (facts !== undefined) {
    facts.events = totalsOf(scanner.result().totals).events;
    facts.threads = threads;
  }
  return figures;
}
