/**
 * A first look at a heaplog: calls per function, peak and final live heap, never-freed blocks
 * by allocation stack, and what each leak check found. The events are replayed by the one
 * replay (src/decode/replay.ts, native/analyze) the way the allocator saw them: a moved realloc
 * ends the old block at the realloc and starts the new one at its realloc_done; frees of blocks
 * the log never saw allocated (inherited across fork, unsampled, allocated before the tracer
 * started) are counted and otherwise ignored, so they do not distort the figures.
 */
import {
  callsOf,
  newScanner,
  replayLog,
  siteRows,
  totalsOf,
  type ReplayOptions,
  type Scanner,
} from '../decode/replay.js';
import {
  OPS,
  type EndRecord,
  type LeakCheckRecord,
  type ModuleRecord,
  type Op,
  type ProcessRecord,
  type StackNodeRecord,
} from '../decode/records.js';
import { MappedMemory, type MappedMemorySummary } from './vmmap.js';

export interface LiveBlock {
  readonly ptr: number;
  /** Bytes it stands for: the bytes asked for (count * size for calloc), or the sampling
   * weight. */
  readonly weight: number;
  readonly stack: number;
  /** The function that allocated it. */
  readonly op: Op;
}

export interface LeakSite {
  readonly stack: number;
  readonly blocks: number;
  readonly bytes: number;
}

/** A leak check of the log (LEAK / LEAK_CHECK records) and its blocks by allocation stack. */
export interface LeakCheckSummary {
  readonly check: LeakCheckRecord;
  /** The blocks its LEAK records name (stack 0 for one the replay did not hold live). */
  readonly leaked: LeakSite[];
  /** The other blocks live when it ran. */
  readonly reachable: LeakSite[];
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
  /** Blocks live at the end. */
  readonly liveBlocks: number;
  /** Most blocks live at once. */
  readonly peakLiveBlocks: number;
  /** The blocks live at the end (empty when SummaryOptions.leakBlocks is false). */
  readonly leaks: LiveBlock[];
  /** The blocks live at the end by allocation stack, most bytes first. */
  readonly leakSites: LeakSite[];
  readonly leakChecks: LeakCheckSummary[];
  /** Frees of blocks not allocated in this log. */
  readonly unknownFrees: number;
  /** In a log that began with an attach: frees of blocks allocated before it. */
  readonly freedBeforeAttach: number;
  /** Allocations returning an address the log already had live (should be 0). */
  readonly anomalies: number;
  readonly failedCalls: number;
  /** Memory the program mapped (VM events), when the log records them. */
  readonly mapped?: MappedMemorySummary;
}

export interface SummaryOptions extends ReplayOptions {
  /** List every block live at the end in `leaks` (default true); false keeps memory to the
   * sites. */
  readonly leakBlocks?: boolean;
}

const bySize = (a: LeakSite, b: LeakSite): number => b.bytes - a.bytes || b.blocks - a.blocks;

/** The blocks live now by site, less those named in `leaked` (by stack). */
function liveSites(scanner: Scanner, leaked: ReadonlyMap<number, LeakSite>): LeakSite[] {
  const out: LeakSite[] = [];
  for (const s of siteRows(scanner.sites())) {
    const minus = leaked.get(s.stack);
    const blocks = s.liveBlocks - (minus?.blocks ?? 0);
    if (blocks > 0) out.push({ stack: s.stack, blocks, bytes: s.liveBytes - (minus?.bytes ?? 0) });
  }
  return out.sort(bySize);
}

export async function summarize(path: string, options: SummaryOptions = {}): Promise<Summary> {
  const scanner = newScanner(2, 1);
  const modules: ModuleRecord[] = [];
  const stacks = new Map<number, StackNodeRecord>();
  let process: ProcessRecord | undefined;
  let end: EndRecord | undefined;
  const mapped = new MappedMemory({ points: 2 }); // totals only: the summary draws no chart
  const leakChecks: LeakCheckSummary[] = [];
  // The blocks the LEAK records of the next LEAK_CHECK name: by stack, and those live now.
  let leaked = new Map<number, LeakSite>();
  let leakedLive = new Map<number, LeakSite>();
  const addTo = (sites: Map<number, LeakSite>, stack: number, bytes: number): void => {
    const s = sites.get(stack) ?? { stack, blocks: 0, bytes: 0 };
    sites.set(stack, { stack, blocks: s.blocks + 1, bytes: s.bytes + bytes });
  };
  await replayLog(
    path,
    scanner,
    (r) => {
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
        case 'leak': {
          const block = scanner.liveBlock(r.ptr);
          if (block === null) addTo(leaked, 0, r.size);
          else {
            addTo(leaked, block.stack, block.weight);
            addTo(leakedLive, block.stack, block.weight);
          }
          break;
        }
        case 'leak_check':
          leakChecks.push({
            check: r,
            leaked: [...leaked.values()].sort(bySize),
            reachable: liveSites(scanner, leakedLive),
          });
          leaked = new Map();
          leakedLive = new Map();
          break;
        default:
          break;
      }
    },
    options,
  );
  const result = scanner.result();
  const t = totalsOf(result.totals);
  const sites = siteRows(result.sites);
  const leaks: LiveBlock[] = [];
  if (options.leakBlocks !== false) {
    const live = scanner.liveBlocks();
    for (let i = 0; i < live.address.length; i++) {
      leaks.push({
        ptr: live.address[i]!,
        weight: live.weight[i]!,
        stack: sites[live.site[i]!]!.stack,
        op: OPS[live.op[i]!]!,
      });
    }
  }
  let liveBlocks = 0;
  for (const s of sites) liveBlocks += s.liveBlocks;
  return {
    ...(process !== undefined ? { process } : {}),
    ...(end !== undefined ? { end } : {}),
    modules,
    stacks,
    calls: callsOf(result.totals),
    events: t.events,
    allocatedBytes: t.allocatedBytes,
    peakBytes: t.peakBytes,
    peakTime: t.peakTime,
    liveBytes: t.liveBytes,
    liveBlocks,
    peakLiveBlocks: t.peakBlocks,
    leaks,
    leakSites: liveSites(scanner, new Map()),
    leakChecks,
    unknownFrees: t.unknownFrees,
    freedBeforeAttach: t.freedBeforeAttach,
    anomalies: t.anomalies,
    failedCalls: t.failedCalls,
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
