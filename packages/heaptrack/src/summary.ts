/**
 * A first pass over a heaplog: calls per function, peak and final live heap, leaked blocks
 * by allocation stack. It replays the events the way the allocator saw them: a moved realloc
 * ends the old block at the realloc and starts the new one at its realloc_done; frees of
 * blocks the log never saw allocated (inherited across fork, unsampled, allocated before the
 * tracer started) are counted and otherwise ignored, so they do not distort the figures.
 */
import { decodeLogBatches, type DecodeOptions } from './decoder.js';
import {
  OPS,
  type EndRecord,
  type EventRecord,
  type ModuleRecord,
  type Op,
  type ProcessRecord,
  type StackNodeRecord,
} from './records.js';

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
  readonly leaks: LiveBlock[];
  readonly leakSites: LeakSite[];
  /** Frees of blocks not allocated in this log. */
  readonly unknownFrees: number;
  /** Allocations returning an address the log already had live (should be 0). */
  readonly anomalies: number;
  readonly failedCalls: number;
}

/** Follows the live heap event by event. */
export class HeapReplay {
  readonly live = new Map<number, LiveBlock>();
  readonly calls = Object.fromEntries(OPS.map((op) => [op, 0])) as Record<Op, number>;
  events = 0;
  liveBytes = 0;
  peakBytes = 0;
  peakTime = 0;
  allocatedBytes = 0;
  unknownFrees = 0;
  anomalies = 0;
  failedCalls = 0;
  private readonly pending = new Map<number, LiveBlock>();

  private add(block: LiveBlock): void {
    const previous = this.live.get(block.ptr);
    if (previous !== undefined) {
      this.anomalies++;
      this.liveBytes -= previous.weight;
    }
    this.live.set(block.ptr, block);
    this.liveBytes += block.weight;
    this.allocatedBytes += block.weight;
    if (this.liveBytes > this.peakBytes) {
      this.peakBytes = this.liveBytes;
      this.peakTime = block.time;
    }
  }

  private remove(ptr: number): void {
    const block = this.live.get(ptr);
    if (block === undefined) {
      this.unknownFrees++;
      return;
    }
    this.live.delete(ptr);
    this.liveBytes -= block.weight;
  }

  apply(e: EventRecord): void {
    this.calls[e.op]++;
    if (e.op !== 'realloc_done') this.events++;
    const bytes = e.op === 'calloc' || e.op === 'reallocarray' ? e.count * e.size : e.size;
    const weight = e.weight ?? bytes;
    switch (e.op) {
      case 'free':
        this.remove(e.ptr);
        return;
      case 'realloc':
      case 'reallocarray': {
        if (e.ptr === 0 && bytes > 0) {
          this.failedCalls++;
          return; // failed: the old block stays
        }
        if (e.oldPtr !== 0) this.remove(e.oldPtr);
        if (e.ptr === 0 || weight === 0) return; // realloc(p, 0) freed it, or not sampled
        const block = { ptr: e.ptr, size: bytes, weight, stack: e.stack, time: e.time, op: e.op };
        if (e.split) this.pending.set(e.tid, block);
        else this.add(block);
        return;
      }
      case 'realloc_done': {
        const moved = this.pending.get(e.tid);
        if (moved !== undefined) {
          this.pending.delete(e.tid);
          this.add({ ...moved, time: e.time });
        }
        return;
      }
      default:
        if (e.ptr === 0) {
          this.failedCalls++;
          return;
        }
        this.add({ ptr: e.ptr, size: bytes, weight, stack: e.stack, time: e.time, op: e.op });
    }
  }
}

export async function summarize(path: string, options: DecodeOptions = {}): Promise<Summary> {
  const replay = new HeapReplay();
  const modules: ModuleRecord[] = [];
  const stacks = new Map<number, StackNodeRecord>();
  let process: ProcessRecord | undefined;
  let end: EndRecord | undefined;
  for await (const batch of decodeLogBatches(path, options)) {
    for (const r of batch) {
      switch (r.type) {
        case 'event':
          replay.apply(r);
          break;
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
        default:
          break;
      }
    }
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
    leaks,
    leakSites: [...sites.entries()]
      .map(([stack, s]) => ({ stack, ...s }))
      .sort((a, b) => b.bytes - a.bytes),
    unknownFrees: replay.unknownFrees,
    anomalies: replay.anomalies,
    failedCalls: replay.failedCalls,
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
