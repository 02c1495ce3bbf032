/**
 * What the report calls leaked. Until a log holds leak checks, leaked = never freed and
 * nothing is known to be reachable at exit. With a leak check (the latest one counts), leaked
 * = the blocks its LEAK records name (sizes and stacks from their allocation events) and the
 * reachable figures come from its LEAK_CHECK record.
 */
import type { LeakCheckRecord } from '../decode/records.js';

export interface LeakedBlock {
  readonly ptr: number;
  /** Bytes (the sampling weight in sampled logs). */
  readonly bytes: number;
  /** Allocation stack; 0 when unknown. */
  readonly stack: number;
  /** With a timeline: the start (ns) of the bucket it was allocated in, as the bucket was when
   * the leak check ran (buckets widen later; a time stays true). */
  readonly bucketStartNs?: number;
}

export interface LeakCheck {
  readonly record: LeakCheckRecord;
  /** The blocks its LEAK records named. */
  readonly blocks: readonly LeakedBlock[];
}

export interface LeakSiteTotal {
  readonly stack: number;
  readonly blocks: number;
  readonly bytes: number;
}

export interface LeakVerdict {
  /** 'never-freed' without leak-check records, else 'leak-check'. */
  readonly source: 'never-freed' | 'leak-check';
  readonly leakedBlocks: number;
  readonly leakedBytes: number;
  /** By allocation stack, most bytes first. */
  readonly sites: readonly LeakSiteTotal[];
  readonly reachableAtExitBlocks: number;
  readonly reachableAtExitBytes: number;
}

/** Totals by allocation stack of `blocks`, in the order each stack is first met. */
export function totalsBySite(blocks: readonly LeakedBlock[]): LeakSiteTotal[] {
  const bySite = new Map<number, { stack: number; blocks: number; bytes: number }>();
  for (const b of blocks) {
    const site = bySite.get(b.stack) ?? { stack: b.stack, blocks: 0, bytes: 0 };
    site.blocks++;
    site.bytes += b.bytes;
    bySite.set(b.stack, site);
  }
  return [...bySite.values()];
}

/**
 * The verdict: with a leak check, its blocks; else the never-freed blocks, given as totals by
 * site (in the order of each site's lowest address, so that equal sites list the same way from
 * run to run).
 */
export function leakVerdict(
  neverFreed: readonly LeakSiteTotal[],
  latestCheck: LeakCheck | undefined,
): LeakVerdict {
  const sites = latestCheck === undefined ? neverFreed : totalsBySite(latestCheck.blocks);
  let blocks = 0;
  let bytes = 0;
  for (const s of sites) {
    blocks += s.blocks;
    bytes += s.bytes;
  }
  return {
    source: latestCheck === undefined ? 'never-freed' : 'leak-check',
    leakedBlocks: blocks,
    leakedBytes: bytes,
    sites: [...sites]
      .map(({ stack, blocks, bytes }) => ({ stack, blocks, bytes }))
      .sort((a, b) => b.bytes - a.bytes || b.blocks - a.blocks),
    reachableAtExitBlocks: latestCheck?.record.reachableBlocks ?? 0,
    reachableAtExitBytes: latestCheck?.record.reachableBytes ?? 0,
  };
}
