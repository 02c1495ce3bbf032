/** The machine-readable summary (`heaphook report --json`, summary.json); README documents it. */
import type { Op } from '../decode/records.js';
import { formatFrame } from './symbolize.js';
import type { Percentiles } from './histogram.js';
import { topSites, type ReportModel, type SiteStats } from './model.js';
import type { StackNames } from './symbols.js';
import type { MappedMemorySummary } from './vmmap.js';

export interface JsonSite {
  readonly allocations: number;
  readonly bytes: number;
  /** Live bytes of the site at the heap's peak. */
  readonly peakBytes: number;
  /** Still live at the end of the log. */
  readonly liveBlocks: number;
  readonly liveBytes: number;
  readonly temporary: number;
  /** Symbolised frames, innermost first: `function (file:line) [module+0xoffset]`. */
  readonly stack: string[];
}

export interface JsonLeakSite {
  readonly blocks: number;
  readonly bytes: number;
  readonly stack: string[];
}

/** Memory the program mapped (VM_MAPPED / VM_UNMAPPED from ucm-hooks), when recorded: the
 * model's figures (src/report/vmmap.ts documents each), and the stacks that mapped the most bytes. */
export type JsonMappedMemory = Omit<MappedMemorySummary, 'series' | 'sites'> & {
  readonly topSites: { mappings: number; bytes: number; stack: string[] }[];
};

export interface ReportJson {
  readonly log: string;
  readonly pid: number | null;
  readonly argv: string[];
  readonly events: number;
  readonly allocations: number;
  readonly frees: number;
  readonly reallocs: number;
  readonly calls: Partial<Record<Op, number>>;
  readonly allocatedBytes: number;
  readonly peakHeapBytes: number;
  readonly peakTimeNs: number;
  readonly peakLiveBlocks: number;
  readonly peakLiveBlocksTimeNs: number;
  readonly durationNs: number;
  readonly leakSource: 'never-freed' | 'leak-check';
  readonly leakedBytes: number;
  readonly leakedBlocks: number;
  readonly leakSites: JsonLeakSite[];
  readonly neverFreedBytes: number;
  readonly neverFreedBlocks: number;
  readonly reachableAtExitBlocks: number;
  readonly reachableAtExitBytes: number;
  readonly temporaryAllocations: number;
  readonly topSites: JsonSite[];
  readonly topSitesByCount: JsonSite[];
  readonly topSitesByBytes: JsonSite[];
  readonly sizeHistogram: { from: number; to: number; count: number; bytes: number }[];
  readonly latency: Partial<Record<Op, Percentiles>>;
  readonly dropped: number;
  readonly unknownFrees: number;
  /** Frees of blocks allocated before the attach (a log that began with one), else 0. */
  readonly freedBeforeAttach: number;
  readonly failedCalls: number;
  readonly end: string | null;
  /**
   * The run ended through its exit path (END reason `exit`): only then are the blocks still
   * live at the end leaks. False when the END record is missing (killed, crashed, cut short,
   * damaged) or gives another reason (`lost`, `collector`, `detach`).
   */
  readonly endedNormally: boolean;
  /** null when the log has no mapped-memory events (ucm-hooks was not loaded). */
  readonly mappedMemory: JsonMappedMemory | null;
  /** Set when the log is damaged or truncated: the report covers what comes before `offset`. */
  readonly error: { message: string; offset: number } | null;
}

export interface JsonContext {
  readonly log: string;
  readonly top?: number;
  readonly error?: { message: string; offset: number };
}

function site(s: SiteStats, names: StackNames): JsonSite {
  return {
    allocations: s.allocations,
    bytes: s.bytes,
    peakBytes: s.peakBytes,
    liveBlocks: s.liveBlocks,
    liveBytes: s.liveBytes,
    temporary: s.temporary,
    stack: names.frames(s.stack).map(formatFrame),
  };
}

/** The stacks a JSON summary names (to symbolise them beforehand). */
export function jsonStacks(model: ReportModel, top = 20): Set<number> {
  const ids = new Set<number>();
  for (const by of ['peakBytes', 'allocations', 'bytes'] as const) {
    for (const s of topSites(model.sites, by, top)) ids.add(s.stack);
  }
  for (const s of model.leaks.sites.slice(0, top)) ids.add(s.stack);
  for (const s of model.mapped?.sites.slice(0, top) ?? []) ids.add(s.stack);
  return ids;
}

export function reportJson(model: ReportModel, names: StackNames, ctx: JsonContext): ReportJson {
  const top = ctx.top ?? 20;
  const calls: Partial<Record<Op, number>> = {};
  for (const [op, n] of Object.entries(model.calls) as [Op, number][]) {
    if (n > 0 && op !== 'realloc_done') calls[op] = n;
  }
  const latency: Partial<Record<Op, Percentiles>> = {};
  for (const [op, h] of model.latency) latency[op] = h.percentiles();
  return {
    log: ctx.log,
    pid: model.process?.pid ?? null,
    argv: [...(model.process?.argv ?? [])],
    events: model.events,
    allocations: model.allocations,
    frees: model.frees,
    reallocs: model.reallocs,
    calls,
    allocatedBytes: model.allocatedBytes,
    peakHeapBytes: model.peakHeapBytes,
    peakTimeNs: model.peakTimeNs,
    peakLiveBlocks: model.peakLiveBlocks,
    peakLiveBlocksTimeNs: model.peakLiveBlocksTimeNs,
    durationNs: model.lastTimeNs,
    leakSource: model.leaks.source,
    leakedBytes: model.leaks.leakedBytes,
    leakedBlocks: model.leaks.leakedBlocks,
    leakSites: model.leaks.sites.slice(0, top).map((s) => ({
      blocks: s.blocks,
      bytes: s.bytes,
      stack: names.frames(s.stack).map(formatFrame),
    })),
    neverFreedBytes: model.neverFreed.leakedBytes,
    neverFreedBlocks: model.neverFreed.leakedBlocks,
    reachableAtExitBlocks: model.leaks.reachableAtExitBlocks,
    reachableAtExitBytes: model.leaks.reachableAtExitBytes,
    temporaryAllocations: model.temporaryAllocations,
    topSites: topSites(model.sites, 'peakBytes', top).map((s) => site(s, names)),
    topSitesByCount: topSites(model.sites, 'allocations', top).map((s) => site(s, names)),
    topSitesByBytes: topSites(model.sites, 'bytes', top).map((s) => site(s, names)),
    sizeHistogram: model.sizeHistogram.rows(),
    latency,
    dropped: model.dropped,
    unknownFrees: model.unknownFrees,
    freedBeforeAttach: model.freedBeforeAttach,
    failedCalls: model.failedCalls,
    end: model.end?.reason ?? null,
    endedNormally: model.end?.reason === 'exit' && ctx.error === undefined,
    mappedMemory: mappedJson(model, names, top),
    error: ctx.error ?? null,
  };
}

function mappedJson(model: ReportModel, names: StackNames, top: number): JsonMappedMemory | null {
  const m = model.mapped;
  if (m === undefined) return null;
  const { series: _series, sites: _sites, ...figures } = m;
  return {
    ...figures,
    topSites: m.sites.slice(0, top).map((s) => ({
      mappings: s.mappings,
      bytes: s.bytes,
      stack: names.frames(s.stack).map(formatFrame),
    })),
  };
}
