/**
 * The search for the smallest INITIAL_MEMPOOL_SIZE under which a log's replay never needs the
 * pool to grow, and the recommendation built on it.
 *
 * 1. A first pass reads the log's facts (process, sampling, dropped events, threads) and the
 *    peak live bytes, and from the peak of the blocks' TLSF footprints a lower bound: no pool
 *    smaller than that footprint plus the pool's own bookkeeping can serve the log. The same
 *    pass replays the log into a pool too large to fill (64 GiB of address space): how far
 *    into it the blocks reached is the prior, the first guess of the minimum.
 * 2. A pass replays pools from 1% below the prior to 4% above it at once (1% apart). If none
 *    serves, exponential search upwards; then binary search, CANDIDATES points per pass,
 *    between the largest pool that failed and the smallest that served, until the gap is below
 *    max(4 KiB, 1% of the size): precise enough under a 25% margin and 1 MiB rounding.
 * 3. The recommended size (minimum + margin, rounded up) is replayed to confirm it: every pass
 *    of step 2 replays the recommendations its sizes would lead to as well, so this costs no
 *    pass of its own unless the rounding lands on a pool that fails.
 */
import { HeaphookError } from '@heaphook/core';
import { TlsfHeap } from '@heaphook/tlsf';

import { EXIT_DAMAGED_LOG, LogFormatError } from '../decode/decoder.js';
import { CandidateHeap, replayPass, type LogFacts, type PeakFigures } from './replay.js';

/** Pools replayed side by side in one pass over the log. */
export const CANDIDATES = 6;
/** Smallest pool the backend accepts (INITIAL_MEMPOOL_SIZE below 4096 is refused). */
export const AREA_MIN = 4096;
const MIB = 1024 * 1024;
/** The largest pool searched (address space only: pages are touched where blocks are). */
const POOL_MAX = 2 ** 36;
/** The pool of the first pass, too large to fill: how far the log reaches into it. */
const PRIOR_POOL = 2 ** 36;

export interface RecommendOptions {
  /** Percent added to the replayed minimum (default 25). */
  readonly marginPercent?: number;
  /** The recommended sizes are rounded up to a multiple of this (default 1 MiB). */
  readonly roundTo?: number;
  /** Called after each batch of each pass with the pass number and events read. */
  readonly onProgress?: (pass: number, events: number, totalEvents: number | undefined) => void;
}

export interface Recommendation {
  readonly log: string;
  /** The recorded command line (ProcessRecord argv), and the executable. */
  readonly argv: readonly string[];
  readonly exe: string;
  readonly pid: number;
  readonly events: number;
  /** Distinct threads that called the allocator. */
  readonly threads: number;
  /** Peak of the live bytes the program asked for. */
  readonly peakLiveBytes: number;
  /** Peak of the live blocks' TLSF footprints (heads and 16-byte rounding). */
  readonly peakFootprintBytes: number;
  /** The search's lower bound: peak footprint plus the pool's bookkeeping. */
  readonly lowerBound: number;
  /** Smallest pool (within `precision`) that served the whole log without growing. */
  readonly replayedMinimum: number;
  /** The search's first guess: how far the log reached into a pool too large to fill. */
  readonly prior: number;
  /** The largest pool found too small (the minimum lies in (this, replayedMinimum]). */
  readonly largestFailing: number;
  readonly precision: number;
  readonly marginPercent: number;
  readonly roundTo: number;
  readonly initialPoolSize: number;
  readonly additionalPoolSize: number;
  /** initialPoolSize / peakLiveBytes. */
  readonly ratioToPeak: number;
  /** Passes over the log, and pools replayed in all. */
  readonly passes: number;
  readonly replays: number;
  readonly largestRequest: number;
  /** Environment of the recommendation, in order (INITIAL, ADDITIONAL, THREAD_HEAPS). */
  readonly env: Readonly<Record<string, string>>;
  /** Things the user should know (fork child, no END record ...). */
  readonly notes: readonly string[];
}

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

/** Sizes for one pass: `count` points in (lo, hi], spread evenly, multiples of 16. */
function spread(lo: number, hi: number, count: number): number[] {
  const out = new Set<number>();
  for (let i = 1; i <= count; i++) {
    out.add(Math.max(AREA_MIN, roundUp(lo + ((hi - lo) * i) / count, 16)));
  }
  return [...out].filter((s) => s > lo).sort((a, b) => a - b);
}

async function pass(
  path: string,
  sizes: readonly number[],
  passNo: number,
  total: number,
  options: RecommendOptions,
): Promise<Map<number, boolean>> {
  const heaps = sizes.map((s) => new CandidateHeap(s));
  try {
    await replayPass(path, heaps, undefined, (n) => options.onProgress?.(passNo, n, total));
    return new Map(heaps.map((h) => [h.poolSize, !h.failed]));
  } finally {
    for (const h of heaps) h.destroy();
  }
}

function userError(path: string, error: unknown): never {
  if (error instanceof LogFormatError) {
    throw new HeaphookError(
      `${error.message}. heaphook recommend needs the whole log (the part it cannot read may hold the peak), so a truncated or corrupt log cannot be replayed; ` +
        'record the program again and let it exit normally.',
      { exitStatus: EXIT_DAMAGED_LOG },
    );
  }
  throw error;
}

/** Replays the log and recommends the TLSF pool sizes (see the module comment). */
export async function recommend(
  path: string,
  options: RecommendOptions = {},
): Promise<Recommendation> {
  const marginPercent = options.marginPercent ?? 25;
  const roundTo = options.roundTo ?? MIB;
  if (!Number.isFinite(marginPercent) || marginPercent < 0) {
    throw new HeaphookError(`--margin: a percentage of at least 0, got ${marginPercent}`);
  }
  try {
    return await run(path, marginPercent, roundTo, options);
  } catch (error) {
    return userError(path, error);
  }
}

async function run(
  path: string,
  marginPercent: number,
  roundTo: number,
  options: RecommendOptions,
): Promise<Recommendation> {
  // 1. Facts and the lower bound.
  const facts: LogFacts = { events: 0, threads: 0 };
  const big = new CandidateHeap(PRIOR_POOL);
  let highWater: number;
  let tally: PeakFigures;
  try {
    tally = await replayPass(
      path,
      [big],
      facts,
      (n) => options.onProgress?.(1, n, undefined),
      true,
    );
    highWater = big.highWater;
  } finally {
    big.destroy();
  }
  const p = facts.process;
  if (p === undefined) {
    throw new HeaphookError(`${path}: the log has no PROCESS record; record the program again`);
  }
  if (p.sampling || p.sampleBytes > 0) {
    throw new HeaphookError(
      `${path} was recorded with sampling (HEAPHOOK_SAMPLE_BYTES=${p.sampleBytes}): it holds ` +
        'only some of the allocations, so the pool they need cannot be replayed. Record the ' +
        'program again without HEAPHOOK_SAMPLE_BYTES.',
    );
  }
  if (facts.end !== undefined && facts.end.dropped > 0) {
    throw new HeaphookError(
      `${path} lost ${facts.end.dropped} records (HEAPHOOK_ON_FULL=drop): it cannot be ` +
        'replayed exactly. Record the program again with the default lossless mode.',
    );
  }
  const notes: string[] = [];
  if (p.forkChild) {
    notes.push(
      "this process is a fork child: its pool starts as a copy of its parent's at the fork, " +
        "whose live blocks are not in this log; add the parent's live bytes at the fork.",
    );
  }
  if (facts.end === undefined) {
    notes.push('the log has no END record (the program crashed?): replayed up to its last event');
  }
  const total = facts.events;
  const lowerBound = Math.max(
    AREA_MIN,
    roundUp(tally.peakFootprint + TlsfHeap.poolOverhead + TlsfHeap.blockOverhead, 16),
  );

  if (big.failed) {
    throw new HeaphookError(`${path}: no pool up to ${PRIOR_POOL} bytes serves this log`);
  }

  // 2. Search. The pools are bracketed by lo (too small: below the bound, or failed) and hi
  // (the smallest that served). Every pass also replays the recommendation each size of the
  // pass would lead to, so the last pass usually confirms it too.
  const recommendationFor = (size: number): number =>
    Math.max(AREA_MIN, roundUp(size * (1 + marginPercent / 100), roundTo));
  const confirmed = new Map<number, boolean>();
  let passNo = 1;
  let replays = 0;
  let lo = lowerBound - 16;
  let hi = 0;
  const probe = async (sizes: readonly number[]): Promise<void> => {
    const recs = [...sizes, ...(hi > 0 ? [hi] : [])].map(recommendationFor);
    const all = [...new Set([...sizes, ...recs])]
      .filter((s) => !confirmed.has(s))
      .sort((a, b) => a - b);
    passNo++;
    replays += all.length;
    const served = await pass(path, all, passNo, total, options);
    for (const [size, ok] of served) confirmed.set(size, ok);
    for (const size of [...sizes].sort((a, b) => a - b)) {
      if (size <= lo || (hi > 0 && size >= hi)) continue;
      if (confirmed.get(size) === true) {
        hi = size;
        break;
      }
      lo = size;
    }
  };
  // First, around the prior: in a pool too large to fill, the log reached highWater bytes
  // into it; a pool that serves is usually that plus the rounding of the largest requests
  // (TLSF rounds a search up to its size class: at most 1/32 of the request).
  const prior = Math.max(lowerBound, roundUp(highWater + TlsfHeap.poolOverhead, 16));
  // Pools from 1% below the prior (should the prior itself serve) to 4% above it.
  const step = (prior * 0.04 + 8192) / (CANDIDATES - 1);
  const around = [Math.max(lowerBound, roundUp(prior * 0.99, 16))];
  for (let i = 0; i < CANDIDATES; i++) around.push(roundUp(prior + i * step, 16));
  await probe([...new Set(around)]);
  // Then upwards, geometrically, until a pool serves.
  let factor = 1.25;
  while (hi === 0) {
    if (lo > POOL_MAX) {
      throw new HeaphookError(`${path}: no pool up to ${POOL_MAX} bytes serves this log`);
    }
    const sizes: number[] = [];
    for (let i = 1, s = lo; i <= CANDIDATES / 2; i++) sizes.push((s = roundUp(s * factor, 16)));
    await probe(sizes);
    factor = Math.min(factor * factor, 4);
  }
  // Then the bracket, narrowed CANDIDATES points at a time.
  const precisionOf = (size: number): number => Math.max(AREA_MIN, roundUp(size / 100, 16));
  while (hi - lo > precisionOf(hi)) {
    const sizes = spread(lo, hi, CANDIDATES + 1).filter((s) => s < hi);
    if (sizes.length === 0) break;
    await probe(sizes);
  }
  const replayedMinimum = hi;

  // 3. Margin and rounding; the replay of the result (usually done by the last pass).
  let initial = recommendationFor(replayedMinimum);
  while (confirmed.get(initial) !== true) {
    if (!confirmed.has(initial)) {
      const sizes = [initial, initial + roundTo, initial + 2 * roundTo];
      passNo++;
      replays += sizes.length;
      for (const [size, ok] of await pass(path, sizes, passNo, total, options)) {
        confirmed.set(size, ok);
      }
    }
    // TLSF is not strictly monotone in the pool size: take the next step that serves.
    if (confirmed.get(initial) !== true) initial += roundTo;
  }
  const largestNeed = tally.largestRequest + tally.largestAlign + 64;
  const additional = Math.max(AREA_MIN, roundUp(Math.max(initial / 4, largestNeed), roundTo));
  return {
    log: path,
    argv: p.argv,
    exe: p.exe,
    pid: p.pid,
    events: total,
    threads: facts.threads,
    peakLiveBytes: tally.peakBytes,
    peakFootprintBytes: tally.peakFootprint,
    lowerBound,
    replayedMinimum,
    largestFailing: lo,
    precision: precisionOf(hi),
    prior,
    marginPercent,
    roundTo,
    initialPoolSize: initial,
    additionalPoolSize: additional,
    ratioToPeak: tally.peakBytes > 0 ? initial / tally.peakBytes : 0,
    passes: passNo,
    replays,
    largestRequest: tally.largestRequest,
    env: {
      INITIAL_MEMPOOL_SIZE: String(initial),
      ADDITIONAL_MEMPOOL_SIZE: String(additional),
      HEAPHOOK_TLSF_THREAD_HEAPS: '0',
    },
    notes,
  };
}
