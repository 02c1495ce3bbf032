/**
 * A first pass over a heaplog: calls per function, peak and final live heap, leaked blocks
 * by allocation stack. It replays the events the way the allocator saw them: a moved realloc
 * ends the old block at the realloc and starts the new one at its realloc_done; frees of
 * blocks the log never saw allocated (inherited across fork, unsampled, allocated before the
 * tracer started) are counted and otherwise ignored, so they do not distort the figures.
 *
 * The replay keeps the live blocks in typed arrays (a hash table from address to slot, one
 * column per field), and summarize feeds it the decoder's columns: no object per event, memory
 * bounded by the live blocks and the distinct stacks.
 */
import type { EventColumns } from './decode/columns.js';
import { NumberTable } from './decode/table.js';
import { decodeLogColumns, type DecodeOptions } from './decoder.js';
import {
  OPS,
  type EndRecord,
  type EventRecord,
  type ModuleRecord,
  type Op,
  type ProcessRecord,
  type StackNodeRecord,
} from './records.js';
import { MappedMemory, type MappedMemorySummary } from './vmmap.js';

export interface LiveBlock {
  readonly ptr: number;
  /** Bytes asked for (count * size for calloc). */
  readonly size: number;
  /** Bytes it stands for: size, or the sampling weight. */
  readonly weight: number;
  readonly stack: number;
  readonly time: number;
  readonly op: Op;
}

export interface LeakSite {
  readonly stack: number;
  readonly blocks: number;
  readonly bytes: number;
}

export interface Summary {
  readonly process?: ProcessRecord;
  readonly end?: EndRecord;
  readonly modules: ModuleRecord[];
  /** Stack nodes by id (the trie), for symbolising. */
  readonly stacks: Map<number, StackNodeRecord>;
  readonly calls: Record<Op, number>;
  /** Events decoded (realloc_done markers not counted). */
  readonly events: number;
  readonly allocatedBytes: number;
  readonly peakBytes: number;
  /** ns since start when the peak was first reached. */
  readonly peakTime: number;
  readonly liveBytes: number;
  /** Most blocks live at once. */
  readonly peakLiveBlocks: number;
  readonly leaks: LiveBlock[];
  readonly leakSites: LeakSite[];
  /** Frees of blocks not allocated in this log. */
  readonly unknownFrees: number;
  /** Allocations returning an address the log already had live (should be 0). */
  readonly anomalies: number;
  readonly failedCalls: number;
  /** Memory the program mapped (VM events), when the log records them. */
  readonly mapped?: MappedMemorySummary;
}

const OP_CODE = new Map<Op, number>(OPS.map((op, i) => [op, i]));
const REALLOC = 2;
const REALLOCARRAY = 3;
const FREE = 4;
const REALLOC_DONE = 10;
const CALLOC = 1;

/** Follows the live heap event by event (apply) or block by block (applyColumns). */
export class HeapReplay {
  readonly calls = Object.fromEntries(OPS.map((op) => [op, 0])) as Record<Op, number>;
  events = 0;
  liveBytes = 0;
  peakBytes = 0;
  peakTime = 0;
  allocatedBytes = 0;
  unknownFrees = 0;
  anomalies = 0;
  failedCalls = 0;
  /** Blocks live now, and the most at once. */
  liveBlocks = 0;
  peakLiveBlocks = 0;
  private readonly pending = new Map<number, LiveBlock>();
  // The live blocks: address -> slot, and the fields of each slot.
  private readonly index = new NumberTable(4096);
  private cap = 0;
  private bPtr: Float64Array = new Float64Array(0);
  private bSize: Float64Array = new Float64Array(0);
  private bWeight: Float64Array = new Float64Array(0);
  private bStack: Float64Array = new Float64Array(0);
  private bTime: Float64Array = new Float64Array(0);
  private bOp: Uint8Array = new Uint8Array(0);
  private freeSlots: Int32Array = new Int32Array(0);
  private freeCount = 0;
  private used = 0; // slots ever handed out
  private snapshot: Map<number, LiveBlock> | undefined;

  /**
   * The live blocks by address. Built on demand from the replay's tables (and cached until the
   * next event): read it after the replay, not per event; liveBlocks is the cheap count.
   */
  get live(): ReadonlyMap<number, LiveBlock> {
    if (this.snapshot === undefined) {
      const map = new Map<number, LiveBlock>();
      this.index.forEach((slot) => {
        const ptr = this.bPtr[slot]!;
        map.set(ptr, {
          ptr,
          size: this.bSize[slot]!,
          weight: this.bWeight[slot]!,
          stack: this.bStack[slot]!,
          time: this.bTime[slot]!,
          op: OPS[this.bOp[slot]!]!,
        });
      });
      this.snapshot = map;
    }
    return this.snapshot;
  }

  private grow(): void {
    const cap = Math.max(1024, this.cap * 2);
    const f = (a: Float64Array): Float64Array => {
      const b = new Float64Array(cap);
      b.set(a);
      return b;
    };
    this.bPtr = f(this.bPtr);
    this.bSize = f(this.bSize);
    this.bWeight = f(this.bWeight);
    this.bStack = f(this.bStack);
    this.bTime = f(this.bTime);
    const op = new Uint8Array(cap);
    op.set(this.bOp);
    this.bOp = op;
    const free = new Int32Array(cap);
    free.set(this.freeSlots.subarray(0, this.freeCount));
    this.freeSlots = free;
    this.cap = cap;
  }

  private add(
    ptr: number,
    size: number,
    weight: number,
    stack: number,
    time: number,
    op: number,
  ): void {
    let slot: number;
    if (this.freeCount > 0) slot = this.freeSlots[--this.freeCount]!;
    else {
      if (this.used === this.cap) this.grow();
      slot = this.used++;
    }
    this.bPtr[slot] = ptr;
    this.bSize[slot] = size;
    this.bWeight[slot] = weight;
    this.bStack[slot] = stack;
    this.bTime[slot] = time;
    this.bOp[slot] = op;
    const previous = this.index.set(ptr, slot);
    if (previous >= 0) {
      this.anomalies++;
      this.liveBytes -= this.bWeight[previous]!;
      this.freeSlots[this.freeCount++] = previous;
    } else if (++this.liveBlocks > this.peakLiveBlocks) {
      this.peakLiveBlocks = this.liveBlocks;
    }
    this.liveBytes += weight;
    this.allocatedBytes += weight;
    if (this.liveBytes > this.peakBytes) {
      this.peakBytes = this.liveBytes;
      this.peakTime = time;
    }
  }

  private remove(ptr: number): void {
    const slot = this.index.delete(ptr);
    if (slot < 0) {
      this.unknownFrees++;
      return;
    }
    this.liveBlocks--;
    this.liveBytes -= this.bWeight[slot]!;
    this.freeSlots[this.freeCount++] = slot;
  }

  /** One event, in log order. */
  private step(
    op: number,
    time: number,
    tid: number,
    stack: number,
    ptr: number,
    oldPtr: number,
    bytes: number,
    weight: number,
    split: boolean,
  ): void {
    switch (op) {
      case FREE:
        this.remove(ptr);
        return;
      case REALLOC:
      case REALLOCARRAY: {
        if (ptr === 0 && bytes > 0) {
          this.failedCalls++;
          return; // failed: the old block stays
        }
        if (oldPtr !== 0) this.remove(oldPtr);
        if (ptr === 0 || weight === 0) return; // realloc(p, 0) freed it, or not sampled
        if (split) {
          this.pending.set(tid, { ptr, size: bytes, weight, stack, time, op: OPS[op]! });
        } else this.add(ptr, bytes, weight, stack, time, op);
        return;
      }
      case REALLOC_DONE: {
        const moved = this.pending.get(tid);
        if (moved !== undefined) {
          this.pending.delete(tid);
          this.add(moved.ptr, moved.size, moved.weight, moved.stack, time, OP_CODE.get(moved.op)!);
        }
        return;
      }
      default:
        if (ptr === 0) {
          this.failedCalls++;
          return;
        }
        this.add(ptr, bytes, weight, stack, time, op);
    }
  }

  apply(e: EventRecord): void {
    this.snapshot = undefined;
    this.calls[e.op]++;
    if (e.op !== 'realloc_done') this.events++;
    const bytes = e.op === 'calloc' || e.op === 'reallocarray' ? e.count * e.size : e.size;
    const weight = e.weight ?? bytes;
    this.step(OP_CODE.get(e.op)!, e.time, e.tid, e.stack, e.ptr, e.oldPtr, bytes, weight, e.split);
  }

  /**
   * The events of a block by columns (decodeLogColumns), in order; `sampling`: EventBatch.sampling.
   * With `from` and `to`, only events [from, to) (a batch's records sit between its events, at
   * EventBatch.recordAt).
   */
  applyColumns(c: EventColumns, sampling: boolean, from = 0, to = c.length): void {
    this.snapshot = undefined;
    const opc = c.op;
    const counts = new Float64Array(OPS.length);
    for (let k = from; k < to; k++) {
      const op = opc[k]!;
      counts[op]!++;
      const ptr = c.ptr[k]!;
      if (op === FREE) {
        this.remove(ptr);
        continue;
      }
      const bytes = op === CALLOC || op === REALLOCARRAY ? c.count[k]! * c.size[k]! : c.size[k]!;
      if (op < REALLOC || op > FREE) {
        // the allocating functions (and realloc_done, handled by step)
        if (op !== REALLOC_DONE) {
          if (ptr === 0) {
            this.failedCalls++;
            continue;
          }
          this.add(ptr, bytes, sampling ? c.weight[k]! : bytes, c.stack[k]!, c.time[k]!, op);
          continue;
        }
      }
      const weight = sampling && op !== REALLOC_DONE ? c.weight[k]! : bytes;
      this.step(
        op,
        c.time[k]!,
        c.tid[k]!,
        c.stack[k]!,
        ptr,
        c.oldPtr[k]!,
        bytes,
        weight,
        c.split[k] !== 0,
      );
    }
    for (let i = 0; i < OPS.length; i++) {
      if (counts[i] === 0) continue;
      this.calls[OPS[i]!] += counts[i]!;
      if (i !== REALLOC_DONE) this.events += counts[i]!;
    }
  }
}

export async function summarize(path: string, options: DecodeOptions = {}): Promise<Summary> {
  const replay = new HeapReplay();
  const modules: ModuleRecord[] = [];
  const stacks = new Map<number, StackNodeRecord>();
  let process: ProcessRecord | undefined;
  let end: EndRecord | undefined;
  const mapped = new MappedMemory({ points: 2 }); // totals only: the summary draws no chart
  for await (const batch of decodeLogColumns(path, { ...options, reuseColumns: true })) {
    for (const r of batch.records) {
      switch (r.type) {
        case 'stack':
          stacks.set(r.id, r);
          break;
        case 'module':
          modules.push(r);
          break;
        case 'process':
          process ??= r;
          break;
        case 'end':
          end = r;
          break;
        case 'vm':
          mapped.add(r);
          break;
        default:
          break;
      }
    }
    replay.applyColumns(batch.events, batch.sampling);
  }
  const leaks = [...replay.live.values()];
  const sites = new Map<number, { blocks: number; bytes: number }>();
  for (const leak of leaks) {
    const site = sites.get(leak.stack) ?? { blocks: 0, bytes: 0 };
    site.blocks++;
    site.bytes += leak.weight;
    sites.set(leak.stack, site);
  }
  return {
    ...(process !== undefined ? { process } : {}),
    ...(end !== undefined ? { end } : {}),
    modules,
    stacks,
    calls: replay.calls,
    events: replay.events,
    allocatedBytes: replay.allocatedBytes,
    peakBytes: replay.peakBytes,
    peakTime: replay.peakTime,
    liveBytes: replay.liveBytes,
    peakLiveBlocks: replay.peakLiveBlocks,
    leaks,
    leakSites: [...sites.entries()]
      .map(([stack, s]) => ({ stack, ...s }))
      .sort((a, b) => b.bytes - a.bytes),
    unknownFrees: replay.unknownFrees,
    anomalies: replay.anomalies,
    failedCalls: replay.failedCalls,
    ...(mapped.seen || process?.vmEvents === true ? { mapped: mapped.finish() } : {}),
  };
}

/** The return addresses of a stack, innermost first. */
export function framesOf(stacks: ReadonlyMap<number, StackNodeRecord>, id: number): number[] {
  const pcs: number[] = [];
  for (let node = stacks.get(id); node !== undefined; node = stacks.get(node.parent)) {
    pcs.push(node.pc);
    if (node.parent === 0 || pcs.length > 4096) break;
  }
  return pcs;
}
