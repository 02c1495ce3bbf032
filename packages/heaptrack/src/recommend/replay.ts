/**
 * Replays a heaplog's allocation sequence through real TLSF heaps (the @heaphook/tlsf addon,
 * the same C code as libheaphook_tlsf.so).
 *
 * One pass over the log drives several heaps at once, each a single pool of a candidate size
 * that never grows (`additionalPoolSize: 0`): a candidate fails at the first allocation its
 * pool cannot serve, which is exactly where libheaphook_tlsf.so with that INITIAL_MEMPOOL_SIZE
 * (and HEAPHOOK_TLSF_THREAD_HEAPS=0, one shared heap) would have grown. The events of each
 * decoded batch become TlsfHeap.replay operations on slot-numbered blocks (OpEncoder), and
 * every heap replays the batch in one call. Memory: the log is streamed; a pass keeps one map
 * entry per live block (log address -> slot), each heap one pointer per slot.
 */
import { ReplayOp, TlsfHeap } from '@heaphook/tlsf';

import { decodeLogBatches } from '../decoder.js';
import type { EndRecord, EventRecord, ProcessRecord } from '../records.js';

/** Page size assumed for valloc/pvalloc (the log does not record it; x86-64 Linux). */
export const PAGE_SIZE = 4096;
const DEFAULT_ALIGN = 16;
const BLOCK_OVERHEAD = 8;
const BLOCK_MIN = 32;

/** One allocation as the backend receives it: bytes and alignment (1 = default). */
export interface Request {
  readonly size: number;
  readonly align: number;
}

/** What the core hands the backend for an allocating event (see core/native/interpose.c). */
export function requestOf(e: EventRecord): Request {
  const bytes = e.op === 'calloc' || e.op === 'reallocarray' ? e.count * e.size : e.size;
  const size = Math.max(1, bytes);
  switch (e.op) {
    case 'valloc':
      return { size, align: PAGE_SIZE };
    case 'pvalloc':
      return { size: Math.ceil(size / PAGE_SIZE) * PAGE_SIZE, align: PAGE_SIZE };
    case 'posix_memalign':
    case 'memalign':
    case 'aligned_alloc': {
      if (e.align <= DEFAULT_ALIGN) return { size, align: 1 };
      // memalign rounds an alignment that is not a power of two up to the next one.
      return { size, align: 2 ** Math.ceil(Math.log2(e.align)) };
    }
    default:
      return { size, align: 1 };
  }
}

/** Bytes a used block of this request takes in a TLSF pool at least (head included). */
export function footprint(r: Request): number {
  return Math.max(BLOCK_MIN, Math.ceil((r.size + BLOCK_OVERHEAD) / DEFAULT_ALIGN) * DEFAULT_ALIGN);
}

/** The heap operations of a log, in log order, as a replay applies them. */
export interface ReplaySink {
  alloc(ptr: number, r: Request): void;
  free(ptr: number): void;
  /** A realloc of the live block oldPtr to r.size. The result is known by its log address
   * newPtr at once, or, when the realloc moved the block (`split`), from the thread's next
   * realloc_done (`placeMoved`). */
  realloc(oldPtr: number, newPtr: number, r: Request, tid: number, split: boolean): void;
  /** tid's moved block now lives at its new address. */
  placeMoved(tid: number): void;
}

/** What a pass learns about the log besides the events. */
export interface LogFacts {
  process?: ProcessRecord;
  end?: EndRecord;
  events: number;
  threads: Set<number>;
}

/** Feeds one event to a sink (failed calls and frees of NULL are skipped: they reach no heap). */
export function feed(sink: ReplaySink, e: EventRecord): void {
  switch (e.op) {
    case 'free':
      if (e.ptr !== 0) sink.free(e.ptr);
      return;
    case 'realloc':
    case 'reallocarray': {
      const r = requestOf(e);
      const bytes = e.op === 'reallocarray' ? e.count * e.size : e.size;
      if (e.ptr === 0 && bytes > 0) return; // failed: the old block stays
      if (e.oldPtr === 0) {
        if (e.ptr !== 0) sink.alloc(e.ptr, r); // realloc(NULL, n) = malloc(n)
        return;
      }
      if (e.ptr === 0) {
        sink.free(e.oldPtr); // realloc(p, 0) frees p
        return;
      }
      sink.realloc(e.oldPtr, e.ptr, r, e.tid, e.split);
      return;
    }
    case 'realloc_done':
      sink.placeMoved(e.tid);
      return;
    default:
      if (e.ptr !== 0) sink.alloc(e.ptr, requestOf(e));
  }
}

/** Peak live bytes (asked for) and the peak of their TLSF footprints, over the log. */
export class PeakTally implements ReplaySink {
  private readonly live = new Map<number, { bytes: number; foot: number }>();
  private readonly moving = new Map<number, { ptr: number; bytes: number; foot: number }>();
  liveBytes = 0;
  liveFoot = 0;
  peakBytes = 0;
  peakFootprint = 0;
  largestRequest = 0;
  largestAlign = 1;

  private add(ptr: number, v: { bytes: number; foot: number }): void {
    const old = this.live.get(ptr);
    if (old !== undefined) this.sub(old);
    this.live.set(ptr, v);
    this.liveBytes += v.bytes;
    this.liveFoot += v.foot;
    if (this.liveBytes > this.peakBytes) this.peakBytes = this.liveBytes;
    if (this.liveFoot > this.peakFootprint) this.peakFootprint = this.liveFoot;
  }
  private sub(v: { bytes: number; foot: number }): void {
    this.liveBytes -= v.bytes;
    this.liveFoot -= v.foot;
  }
  private note(r: Request): { bytes: number; foot: number } {
    this.largestRequest = Math.max(this.largestRequest, r.size);
    this.largestAlign = Math.max(this.largestAlign, r.align);
    return { bytes: r.size, foot: footprint(r) };
  }
  alloc(ptr: number, r: Request): void {
    this.add(ptr, this.note(r));
  }
  free(ptr: number): void {
    const v = this.live.get(ptr);
    if (v === undefined) return; // allocated before the log began
    this.live.delete(ptr);
    this.sub(v);
  }
  realloc(oldPtr: number, newPtr: number, r: Request, tid: number, split: boolean): void {
    this.free(oldPtr);
    const v = this.note(r);
    if (split) this.moving.set(tid, { ptr: newPtr, ...v });
    else this.add(newPtr, v);
  }
  placeMoved(tid: number): void {
    const v = this.moving.get(tid);
    if (v === undefined) return;
    this.moving.delete(tid);
    this.add(v.ptr, { bytes: v.bytes, foot: v.foot });
  }
}

/**
 * Turns the events of a log into TlsfHeap.replay operations: blocks are named by slots (one
 * per live block, reused), shared by every candidate heap of a pass, so each heap replays a
 * batch of the log in one call.
 */
export class OpEncoder implements ReplaySink {
  ops = new Float64Array(4 * 4096);
  /** Event number (1-based, in the log) of each operation. */
  opEvents = new Float64Array(4096);
  count = 0;
  event = 0;
  private readonly slots = new Map<number, number>();
  private readonly freeSlots: number[] = [];
  private nextSlot = 0;
  /** Moved reallocs waiting for their realloc_done: tid -> [log address, slot]. */
  private readonly moving = new Map<number, [number, number]>();

  /** Starts a new batch (the live blocks stay). */
  reset(): void {
    this.count = 0;
  }

  private emit(op: number, slot: number, size: number, arg: number): void {
    if (this.count === this.opEvents.length) {
      const ops = new Float64Array(this.ops.length * 2);
      ops.set(this.ops);
      this.ops = ops;
      const events = new Float64Array(this.opEvents.length * 2);
      events.set(this.opEvents);
      this.opEvents = events;
    }
    const at = this.count * 4;
    this.ops[at] = op;
    this.ops[at + 1] = slot;
    this.ops[at + 2] = size;
    this.ops[at + 3] = arg;
    this.opEvents[this.count++] = this.event;
  }

  private acquire(): number {
    return this.freeSlots.pop() ?? this.nextSlot++;
  }

  /** Names the block in `slot` by the log address ptr (a block still named so is freed). */
  private bind(ptr: number, slot: number): void {
    const old = this.slots.get(ptr);
    if (old !== undefined) {
      this.emit(ReplayOp.FREE, old, 0, 0); // the log saw this address freed late
      this.freeSlots.push(old);
    }
    this.slots.set(ptr, slot);
  }

  alloc(ptr: number, r: Request): void {
    const old = this.slots.get(ptr);
    if (old !== undefined) {
      this.emit(ReplayOp.FREE, old, 0, 0);
      this.freeSlots.push(old);
      this.slots.delete(ptr);
    }
    const slot = this.acquire();
    this.emit(ReplayOp.ALLOC, slot, r.size, r.align);
    this.slots.set(ptr, slot);
  }

  free(ptr: number): void {
    const slot = this.slots.get(ptr);
    if (slot === undefined) return; // allocated before the log began
    this.slots.delete(ptr);
    this.emit(ReplayOp.FREE, slot, 0, 0);
    this.freeSlots.push(slot);
  }

  realloc(oldPtr: number, newPtr: number, r: Request, tid: number, split: boolean): void {
    const slot = this.slots.get(oldPtr);
    const to = this.acquire();
    if (slot === undefined) {
      this.emit(ReplayOp.ALLOC, to, r.size, 1); // a block from before the log: count the new one
    } else {
      this.slots.delete(oldPtr);
      this.emit(ReplayOp.REALLOC, slot, r.size, to);
      this.freeSlots.push(slot);
    }
    if (split) this.moving.set(tid, [newPtr, to]);
    else this.bind(newPtr, to);
  }

  placeMoved(tid: number): void {
    const m = this.moving.get(tid);
    if (m === undefined) return;
    this.moving.delete(tid);
    this.bind(m[0], m[1]);
  }
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

  /** Replays a batch of operations (stops for good at the first it cannot serve). */
  run(encoder: OpEncoder): void {
    if (this.failed || encoder.count === 0) return;
    const at = this.heap.replay(encoder.ops, encoder.count);
    if (at >= 0) this.failedAt = encoder.opEvents[at];
  }

  /** Releases the heap's memory. */
  destroy(): void {
    this.heap.destroy();
  }
}

/**
 * One pass over the log: every event goes to every sink and, batch by batch, to every
 * candidate heap (those that failed stop). Reading stops early when every candidate failed
 * and no facts are wanted.
 */
export async function replayPass(
  path: string,
  sinks: readonly ReplaySink[],
  candidates: readonly CandidateHeap[],
  facts?: LogFacts,
  onProgress?: (events: number) => void,
): Promise<void> {
  const encoder = new OpEncoder();
  const all = candidates.length > 0 ? [...sinks, encoder] : sinks;
  let events = 0;
  for await (const batch of decodeLogBatches(path)) {
    encoder.reset();
    for (const r of batch) {
      if (r.type === 'event') {
        if (r.op !== 'realloc_done') encoder.event = ++events;
        if (facts !== undefined) facts.threads.add(r.tid);
        for (const s of all) feed(s, r);
      } else if (facts !== undefined) {
        if (r.type === 'process') facts.process ??= r;
        else if (r.type === 'end') facts.end = r;
      }
    }
    for (const c of candidates) c.run(encoder);
    onProgress?.(events);
    if (facts === undefined && candidates.length > 0 && candidates.every((c) => c.failed)) break;
  }
  if (facts !== undefined) facts.events = events;
}
