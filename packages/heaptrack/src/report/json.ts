/** The machine-readable summary (`heaphook report --json`, summary.json); README documents it. */
import type { Op } from '../decode/records.js';
import { formatFrame } from './symbolize.js';
import type { Percentiles } from './histogram.js';
import { topSites, type ReportModel, type SiteStats } from './model.js';
import type { StackNames } from './symbols.js';
import { suppressionOf, type Suppression } from './suppressions.js';
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
  /** The frame the site is named by: the first of `stack` outside the allocators (sites.ts). */
  readonly site: string;
  /** Symbolised frames, innermost first: `function [inlined] (file:line) [module+0xoffset]`;
   * a stack cut at HEAPHOOK_STACK_DEPTH ends with `[truncated]`. */
  readonly stack: string[];
}

export interface JsonLeakSite {
  readonly blocks: number;
  readonly bytes: number;
  readonly site: string;
  readonly stack: string[];
}

/** A leak a suppression matched: counted apart, not in leakedBytes. */
export interface JsonSuppressedLeakSite extends JsonLeakSite {
  /** The pattern that matched (`leak:PATTERN`) and where it was written (file:line). */
  readonly suppression: string;
  readonly from: string;
}

/** Memory the program mapped (VM_MAPPED / VM_UNMAPPED from ucm-hooks), when recorded: the
 * model's figures (src/report/vmmap.ts documents each), and the stacks that mapped the most bytes. */
export type JsonMappedMemory = Omit<MappedMemorySummary, 'series' | 'sites'> & {
  readonly topSites: { mappings: number; bytes: number; site: string; stack: string[] }[];
};

/** A call a real-time thread must not make (rtcheck's guard, `heaphook record -b rtcheck`),
 * in the shape of rtcheck's own `violations`: one per (call, call site, thread). */
export interface JsonRealtimeViolation {
  readonly call: string;
  readonly count: number;
  /** The thread's name (comm). */
  readonly thread: string;
  readonly tid: number;
  /** SCHED_FIFO, SCHED_RR, SCHED_DEADLINE, or SCHED_OTHER for a marked section. */
  readonly policy: string;
  readonly priority: number;
  /** Innermost first: the function that made the call is the first. */
  readonly frames: { function: string; file: string | null; line: number | null }[];
}

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
  /** Leaks the suppressions matched (`--suppressions`, the project's file): left out of
   * leakedBytes / leakedBlocks and counted here. */
  readonly suppressedLeakedBytes: number;
  readonly suppressedLeakedBlocks: number;
  readonly suppressedLeakSites: JsonSuppressedLeakSite[];
  /** The suppression files applied. */
  readonly suppressionFiles: string[];
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
  /** Real-time violations the log carries (empty without rtcheck's guard, or none found). */
  readonly realtimeViolations: JsonRealtimeViolation[];
  /** Set when the log is damaged or truncated: the report covers what comes before `offset`. */
  readonly error: { message: string; offset: number } | null;
}

export interface JsonContext {
  readonly log: string;
  readonly top?: number;
  readonly suppressions?: {
    readonly rules: readonly Suppression[];
    readonly files: readonly string[];
  };
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
    ...named(s.stack, names),
  };
}

/** A stack's frames for JSON and the frame its site is named by. */
export function named(stack: number, names: StackNames): { site: string; stack: string[] } {
  const frames = names.frames(stack).map(formatFrame);
  return { site: frames[names.siteIndex(stack)] ?? '(no stack recorded)', stack: frames };
}

/** The stacks a JSON summary names (to symbolise them beforehand). */
export function jsonStacks(model: ReportModel, top = 20): Set<number> {
  const ids = new Set<number>();
  for (const by of ['peakBytes', 'allocations', 'bytes'] as const) {
    for (const s of topSites(model.sites, by, top)) ids.add(s.stack);
  }
  for (const s of model.leaks.sites) ids.add(s.stack);
  for (const s of model.mapped?.sites.slice(0, top) ?? []) ids.add(s.stack);
  for (const v of model.realtimeViolations) ids.add(v.stack);
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
  const leaks = splitLeaks(model, names, ctx.suppressions?.rules ?? []);
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
    leakedBytes: model.leaks.leakedBytes - leaks.suppressedBytes,
    leakedBlocks: model.leaks.leakedBlocks - leaks.suppressedBlocks,
    leakSites: leaks.kept.slice(0, top),
    suppressedLeakedBytes: leaks.suppressedBytes,
    suppressedLeakedBlocks: leaks.suppressedBlocks,
    suppressedLeakSites: leaks.suppressed.slice(0, top),
    suppressionFiles: [...(ctx.suppressions?.files ?? [])],
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
    realtimeViolations: model.realtimeViolations.map((v) => ({
      call: v.call,
      count: v.count,
      thread: v.thread,
      tid: v.tid,
      policy: v.policy,
      priority: v.priority,
      frames: names.frames(v.stack).map((f) => ({
        function: f.function,
        file: f.file ?? null,
        line: f.line ?? null,
      })),
    })),
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
      ...named(s.stack, names),
    })),
  };
}

/** The leak sites, split into those the suppressions match and the others. */
function splitLeaks(
  model: ReportModel,
  names: StackNames,
  rules: readonly Suppression[],
): {
  kept: JsonLeakSite[];
  suppressed: JsonSuppressedLeakSite[];
  suppressedBytes: number;
  suppressedBlocks: number;
} {
  const kept: JsonLeakSite[] = [];
  const suppressed: JsonSuppressedLeakSite[] = [];
  let suppressedBytes = 0;
  let suppressedBlocks = 0;
  for (const s of model.leaks.sites) {
    const rule = rules.length > 0 ? suppressionOf(names.frames(s.stack), rules) : undefined;
    const entry = { blocks: s.blocks, bytes: s.bytes, ...named(s.stack, names) };
    if (rule === undefined) kept.push(entry);
    else {
      suppressed.push({ ...entry, suppression: `leak:${rule.pattern}`, from: rule.from });
      suppressedBytes += s.bytes;
      suppressedBlocks += s.blocks;
    }
  }
  return { kept, suppressed, suppressedBytes, suppressedBlocks };
}
