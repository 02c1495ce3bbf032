/**
 * The test oracle of the allocation sequence (native/analyze/sequence.c):
 * the events of a log, from the decoder's columns (decodeLogColumns), turned one at a time into the
 * TlsfHeap.replay operations recommend hands the TLSF heaps. Tests compare its operations and
 * peaks with the native replay's. Not part of the package.
 */
import { ReplayOp } from '@heaphook/tlsf';

import type { EventColumns } from '../../src/decode/columns.js';
import { decodeLogColumns } from '../../src/decode/events.js';
import { NumberTable } from './table.js';
import { OPS } from '../../src/decode/records.js';

/** Page size assumed for valloc/pvalloc (the log does not record it; x86-64 Linux). */
const PAGE_SIZE = 4096;
const DEFAULT_ALIGN = 16;
const BLOCK_OVERHEAD = 8;
const BLOCK_MIN = 32;

/** Operation codes of the event columns (the index of the function in OPS). */
const OP = {
  calloc: OPS.indexOf('calloc'),
  realloc: OPS.indexOf('realloc'),
  reallocarray: OPS.indexOf('reallocarray'),
  free: OPS.indexOf('free'),
  posixMemalign: OPS.indexOf('posix_memalign'),
  memalign: OPS.indexOf('memalign'),
  alignedAlloc: OPS.indexOf('aligned_alloc'),
  valloc: OPS.indexOf('valloc'),
  pvalloc: OPS.indexOf('pvalloc'),
  reallocDone: 10, // the second half of a realloc that moved its block (no function of OPS)
} as const;

/** Bytes asked for by an event of operation `op` (calloc and reallocarray: count * size). */
function bytesOf(op: number, size: number, count: number): number {
  return op === OP.calloc || op === OP.reallocarray ? count * size : size;
}

/** What the core hands the backend for an allocating event (see core/native/interpose.c), as
 * two numbers: the size (requestSize) and the alignment (requestAlign, 1 = default). */
function requestSize(op: number, size: number, count: number): number {
  const bytes = Math.max(1, bytesOf(op, size, count));
  return op === OP.pvalloc ? Math.ceil(bytes / PAGE_SIZE) * PAGE_SIZE : bytes;
}

function requestAlign(op: number, align: number): number {
  if (op === OP.valloc || op === OP.pvalloc) return PAGE_SIZE;
  if (op === OP.posixMemalign || op === OP.memalign || op === OP.alignedAlloc) {
    if (align <= DEFAULT_ALIGN) return 1;
    // memalign rounds an alignment that is not a power of two up to the next one.
    return 2 ** Math.ceil(Math.log2(align));
  }
  return 1;
}

function footprintOf(size: number): number {
  return Math.max(BLOCK_MIN, Math.ceil((size + BLOCK_OVERHEAD) / DEFAULT_ALIGN) * DEFAULT_ALIGN);
}

/** Peaks of a log's live blocks, kept by an OpEncoder that is asked to. */
export interface PeakFigures {
  /** Peak of the live bytes asked for, and of their TLSF footprints. */
  readonly peakBytes: number;
  readonly peakFootprint: number;
  readonly largestRequest: number;
  readonly largestAlign: number;
}

/**
 * Turns the events of a log into TlsfHeap.replay operations: blocks are named by slots (one
 * per live block, reused), shared by every candidate heap of a pass, so each heap replays a
 * block of the log in one call. With `tally`, it also follows the live bytes and footprints
 * (per slot) and their peaks. Failed calls and frees of NULL reach no heap and are skipped.
 */
export class OpEncoder implements PeakFigures {
  ops = new Float64Array(4 * 4096);
  /** Event number (1-based, in the log) of each operation. */
  opEvents = new Float64Array(4096);
  count = 0;
  /** Events seen (realloc_done, the second half of a moved realloc, is not counted). */
  events = 0;
  private readonly slots = new NumberTable(1024);
  private freeSlots = new Float64Array(1024);
  private freeCount = 0;
  private nextSlot = 0;
  /** Moved reallocs waiting for their realloc_done: tid -> [log address, slot]. */
  private readonly moving = new Map<number, [number, number]>();
  /** The tally, per slot: bytes asked for and footprint (0 while not counted). */
  private slotBytes = new Float64Array(1024);
  private slotFoot = new Float64Array(1024);
  private liveBytes = 0;
  private liveFoot = 0;
  peakBytes = 0;
  peakFootprint = 0;
  largestRequest = 0;
  largestAlign = 1;

  constructor(private readonly tally: boolean) {}

  /** Starts a new batch of operations (the live blocks stay). */
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
    this.opEvents[this.count++] = this.events;
  }

  private acquire(): number {
    if (this.freeCount > 0) return this.freeSlots[--this.freeCount]!;
    const slot = this.nextSlot++;
    if (slot === this.slotBytes.length) {
      const bytes = new Float64Array(slot * 2);
      bytes.set(this.slotBytes);
      this.slotBytes = bytes;
      const foot = new Float64Array(slot * 2);
      foot.set(this.slotFoot);
      this.slotFoot = foot;
    }
    return slot;
  }

  /** The block in `slot` is gone: its slot is free, its bytes no longer live. */
  private release(slot: number): void {
    if (this.freeCount === this.freeSlots.length) {
      const grown = new Float64Array(this.freeCount * 2);
      grown.set(this.freeSlots);
      this.freeSlots = grown;
    }
    this.freeSlots[this.freeCount++] = slot;
    this.liveBytes -= this.slotBytes[slot]!;
    this.liveFoot -= this.slotFoot[slot]!;
    this.slotBytes[slot] = 0;
    this.slotFoot[slot] = 0;
  }

  /** Notes the request of the block in `slot`; it counts as live when `live`. */
  private note(slot: number, size: number, align: number, live: boolean): void {
    if (!this.tally) return;
    if (size > this.largestRequest) this.largestRequest = size;
    if (align > this.largestAlign) this.largestAlign = align;
    this.slotBytes[slot] = size;
    this.slotFoot[slot] = footprintOf(size);
    if (live) this.countLive(slot);
  }

  /** The block in `slot` (noted) becomes live. */
  private countLive(slot: number): void {
    this.liveBytes += this.slotBytes[slot]!;
    this.liveFoot += this.slotFoot[slot]!;
    if (this.liveBytes > this.peakBytes) this.peakBytes = this.liveBytes;
    if (this.liveFoot > this.peakFootprint) this.peakFootprint = this.liveFoot;
  }

  /** Names the block in `slot` by the log address ptr (a block still named so is freed). */
  private bind(ptr: number, slot: number): void {
    const old = this.slots.set(ptr, slot);
    if (old >= 0) {
      this.emit(ReplayOp.FREE, old, 0, 0); // the log saw this address freed late
      this.release(old);
    }
  }

  private alloc(ptr: number, size: number, align: number): void {
    const old = this.slots.delete(ptr);
    if (old >= 0) {
      this.emit(ReplayOp.FREE, old, 0, 0); // the log saw this address freed late
      this.release(old);
    }
    const slot = this.acquire();
    this.emit(ReplayOp.ALLOC, slot, size, align);
    this.slots.set(ptr, slot);
    this.note(slot, size, align, true);
  }

  private free(ptr: number): void {
    const slot = this.slots.delete(ptr);
    if (slot < 0) return; // allocated before the log began
    this.emit(ReplayOp.FREE, slot, 0, 0);
    this.release(slot);
  }

  private realloc(oldPtr: number, newPtr: number, size: number, tid: number, split: boolean): void {
    const slot = this.slots.delete(oldPtr);
    const to = this.acquire(); // before the old slot is released: the block moves between two
    if (slot < 0) {
      this.emit(ReplayOp.ALLOC, to, size, 1); // a block from before the log: count the new one
    } else {
      this.emit(ReplayOp.REALLOC, slot, size, to);
      this.release(slot);
    }
    this.note(to, size, 1, false);
    if (split) {
      this.moving.set(tid, [newPtr, to]); // counted from its realloc_done
    } else {
      this.bind(newPtr, to);
      if (this.tally) this.countLive(to);
    }
  }

  private placeMoved(tid: number): void {
    const m = this.moving.get(tid);
    if (m === undefined) return;
    this.moving.delete(tid);
    this.bind(m[0], m[1]);
    if (this.tally) this.countLive(m[1]);
  }

  /** Encodes events [0, c.length) of a block; `threads` collects their threads. */
  encode(c: EventColumns, threads?: Set<number>): void {
    const { op: ops, ptr, old: oldPtr, size, count, align, tid, split } = c;
    let lastTid = -1;
    for (let i = 0; i < c.length; i++) {
      const op = ops[i]!;
      if (threads !== undefined && tid[i] !== lastTid) {
        lastTid = tid[i]!;
        threads.add(lastTid);
      }
      if (op === OP.reallocDone) {
        this.placeMoved(tid[i]!);
        continue;
      }
      this.events++;
      const p = ptr[i]!;
      if (op === OP.free) {
        if (p !== 0) this.free(p);
      } else if (op === OP.realloc || op === OP.reallocarray) {
        const bytes = bytesOf(op, size[i]!, count[i]!);
        const old = oldPtr[i]!;
        if (p === 0 && bytes > 0) continue; // failed: the old block stays
        if (old === 0) {
          if (p !== 0) this.alloc(p, requestSize(op, size[i]!, count[i]!), 1); // = malloc(n)
        } else if (p === 0) {
          this.free(old); // realloc(p, 0) frees p
        } else {
          this.realloc(old, p, requestSize(op, size[i]!, count[i]!), tid[i]!, split[i] === 1);
        }
      } else if (p !== 0) {
        this.alloc(p, requestSize(op, size[i]!, count[i]!), requestAlign(op, align[i]!));
      }
    }
  }
}

/** The whole log's sequence: operations (4 numbers each), the event number of each, peaks. */
export async function oracleSequence(
  path: string,
): Promise<{ ops: number[]; events: number[]; figures: PeakFigures; threads: number }> {
  const encoder = new OpEncoder(true);
  const threads = new Set<number>();
  const ops: number[] = [];
  const events: number[] = [];
  for await (const batch of decodeLogColumns(path, { reuseColumns: true })) {
    encoder.reset();
    encoder.encode(batch.events, threads);
    for (let i = 0; i < encoder.count; i++) {
      for (let j = 0; j < 4; j++) ops.push(encoder.ops[4 * i + j]!);
      events.push(encoder.opEvents[i]!);
    }
  }
  const { peakBytes, peakFootprint, largestRequest, largestAlign } = encoder;
  return {
    ops,
    events,
    figures: { peakBytes, peakFootprint, largestRequest, largestAlign },
    threads: threads.size,
  };
}
