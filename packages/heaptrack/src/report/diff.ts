/**
 * `heaphook report --diff BASE NEW`: two runs compared. The totals (peak heap, allocations,
 * allocated bytes, leaked and never-freed bytes, peak mapped memory) side by side with their
 * change, and the allocation sites that grew or shrank. Addresses differ between runs (ASLR,
 * another build), so a site is matched by its symbolised stack: the function names of its
 * frames, innermost first. Sites are ranked by the change of their contribution to the peak,
 * then of their allocated bytes.
 *
 * Both logs must be whole: a damaged side (truncated, corrupt, a compression bomb, not a log)
 * fails the comparison with exit status 3, naming the side, rather than comparing a part of a
 * run with a whole one. A side that did not end normally, or runs of two different
 * executables, are compared with a warning.
 */
import { HeaphookError, terminalText } from '@heaphook/core';

import { EXIT_DAMAGED_LOG } from '../decode/decoder.js';
import type { ReportJson } from './json.js';
import { formatBytes } from './format.js';
import type { ReportModel } from './model.js';
import { report, type ReportResult } from './run.js';
import { StackNames } from './symbols.js';
import { abnormalEnd } from './text.js';

export interface SiteFigures {
  allocations: number;
  bytes: number;
  peakBytes: number;
  liveBytes: number;
}

export interface SiteDiff {
  /** The function the site is named by: its first frame outside the allocators (sites.ts). */
  readonly site: string;
  /** Function names of the stack from that frame outwards (the key sites are matched by). */
  readonly stack: readonly string[];
  readonly base: SiteFigures;
  readonly new: SiteFigures;
  readonly delta: SiteFigures;
}

const TOTALS = [
  ['peakHeapBytes', 'peak heap', 'bytes'],
  ['allocations', 'allocations', 'count'],
  ['allocatedBytes', 'allocated', 'bytes'],
  ['leakedBytes', 'leaked', 'bytes'],
  ['neverFreedBytes', 'never freed', 'bytes'],
] as const;

export type Totals = Record<(typeof TOTALS)[number][0] | 'mappedPeakBytes', number | null>;

export interface ReportDiff {
  readonly base: {
    readonly log: string;
    readonly argv: readonly string[];
    readonly totals: Totals;
  };
  readonly new: { readonly log: string; readonly argv: readonly string[]; readonly totals: Totals };
  readonly delta: Totals;
  /** Sites whose peak contribution or allocated bytes grew, largest change first. */
  readonly grew: SiteDiff[];
  /** Sites whose peak contribution or allocated bytes shrank, largest change first. */
  readonly shrank: SiteDiff[];
  /** Sites only in the new run / only in the base run. */
  readonly added: number;
  readonly removed: number;
  /** What makes the comparison less than like for like (`report --diff` prints each on stderr):
   * two different executables, a side that did not end normally. */
  readonly warnings: string[];
}

function totalsOf(json: ReportJson): Totals {
  return {
    peakHeapBytes: json.peakHeapBytes,
    allocations: json.allocations,
    allocatedBytes: json.allocatedBytes,
    leakedBytes: json.leakedBytes,
    neverFreedBytes: json.neverFreedBytes,
    mappedPeakBytes: json.mappedMemory?.peakBytes ?? null,
  };
}

const ZERO: SiteFigures = { allocations: 0, bytes: 0, peakBytes: 0, liveBytes: 0 };

/** The model's sites by symbolised stack, figures added up where two stacks read the same. */
async function sitesByStack(
  model: ReportModel,
  symbolize: boolean,
  skipFrames: readonly RegExp[],
): Promise<Map<string, { stack: string[]; figures: SiteFigures }>> {
  const names = await StackNames.of(
    model,
    model.sites.map((s) => s.stack),
    { symbolize, skipFrames },
  );
  const out = new Map<string, { stack: string[]; figures: SiteFigures }>();
  for (const site of model.sites) {
    // Keyed from the first user frame: the allocator frames inside it do not split a site.
    const stack = names.functions(site.stack).slice(names.siteIndex(site.stack));
    const key = stack.join('\n');
    const entry = out.get(key) ?? { stack, figures: { ...ZERO } };
    entry.figures.allocations += site.allocations;
    entry.figures.bytes += site.bytes;
    entry.figures.peakBytes += site.peakBytes;
    entry.figures.liveBytes += site.liveBytes;
    out.set(key, entry);
  }
  return out;
}

export async function diffReports(
  basePath: string,
  newPath: string,
  options: { symbolize?: boolean; top?: number; skipFrames?: readonly RegExp[] } = {},
): Promise<ReportDiff> {
  const symbolize = options.symbolize !== false;
  const skipFrames = options.skipFrames ?? [];
  const top = options.top ?? 20;
  const b = whole('base', await report(basePath, { symbolize, top }));
  const n = whole('new', await report(newPath, { symbolize, top }));
  const [bs, ns] = [
    await sitesByStack(b.model, symbolize, skipFrames),
    await sitesByStack(n.model, symbolize, skipFrames),
  ];
  const diffs: SiteDiff[] = [];
  for (const key of new Set([...bs.keys(), ...ns.keys()])) {
    const base = bs.get(key)?.figures ?? ZERO;
    const now = ns.get(key)?.figures ?? ZERO;
    const delta = {
      allocations: now.allocations - base.allocations,
      bytes: now.bytes - base.bytes,
      peakBytes: now.peakBytes - base.peakBytes,
      liveBytes: now.liveBytes - base.liveBytes,
    };
    if (delta.peakBytes === 0 && delta.bytes === 0 && delta.allocations === 0) continue;
    const stack = (ns.get(key) ?? bs.get(key))!.stack;
    diffs.push({ site: stack[0] ?? '(no stack recorded)', stack, base, new: now, delta });
  }
  const order = (a: SiteDiff, c: SiteDiff): number =>
    Math.abs(c.delta.peakBytes) - Math.abs(a.delta.peakBytes) ||
    Math.abs(c.delta.bytes) - Math.abs(a.delta.bytes);
  const grows = (d: SiteDiff): boolean =>
    d.delta.peakBytes > 0 || (d.delta.peakBytes === 0 && d.delta.bytes > 0);
  const [bt, nt] = [totalsOf(b.json), totalsOf(n.json)];
  const delta = Object.fromEntries(
    Object.keys(bt).map((k) => {
      const key = k as keyof Totals;
      const x = bt[key];
      const y = nt[key];
      return [key, x === null || y === null ? null : y - x];
    }),
  ) as Totals;
  return {
    base: { log: basePath, argv: b.json.argv, totals: bt },
    new: { log: newPath, argv: n.json.argv, totals: nt },
    delta,
    grew: diffs.filter(grows).sort(order).slice(0, top),
    shrank: diffs
      .filter((d) => !grows(d))
      .sort(order)
      .slice(0, top),
    added: [...ns.keys()].filter((k) => !bs.has(k)).length,
    removed: [...bs.keys()].filter((k) => !ns.has(k)).length,
    warnings: warningsOf(b, n),
  };
}

/** A side's report, or the HeaphookError (exit status 3) of its damage. */
function whole(side: 'base' | 'new', r: ReportResult): ReportResult {
  if (r.error === undefined) return r;
  throw new HeaphookError(
    `the ${side} log is damaged, so the runs cannot be compared: ${r.error.message} ` +
      `(heaphook report ${r.json.log} shows the part before the damage; record the ${side} run again)`,
    { exitStatus: EXIT_DAMAGED_LOG, namesCommand: true },
  );
}

function warningsOf(b: ReportResult, n: ReportResult): string[] {
  const warnings: string[] = [];
  const [be, ne] = [b.model.process?.exe, n.model.process?.exe];
  if (be === undefined || ne === undefined) {
    warnings.push(
      `the ${be === undefined ? 'base' : 'new'} log names no program (no PROCESS record): the runs may be of different programs`,
    );
  } else if (be !== ne) {
    warnings.push(
      `the runs are of different programs: base ${be} (${b.json.argv.join(' ')}), new ${ne} (${n.json.argv.join(' ')}); sites are matched by function names alone`,
    );
  }
  for (const [side, r] of [
    ['base', b],
    ['new', n],
  ] as const) {
    if (!r.json.endedNormally) {
      warnings.push(
        `the ${side} run did not end normally: ${abnormalEnd(r.json)}; its blocks still live at the end are not leaks`,
      );
    }
  }
  return warnings;
}

function signed(n: number, unit: 'bytes' | 'count'): string {
  const sign = n > 0 ? '+' : n < 0 ? '-' : '±';
  return `${sign}${unit === 'bytes' ? formatBytes(Math.abs(n)) : Math.abs(n)}`;
}

function value(n: number, unit: 'bytes' | 'count'): string {
  return unit === 'bytes' ? formatBytes(n) : String(n);
}

/** How many frames of a site the text shows. */
const FRAMES_SHOWN = 4;

export function diffText(d: ReportDiff): string {
  const out = [
    `base: ${terminalText(d.base.log)} (${terminalText(d.base.argv.join(' '))})`,
    `new:  ${terminalText(d.new.log)} (${terminalText(d.new.argv.join(' '))})`,
  ];
  const rows: Array<[string, number | null, number | null, 'bytes' | 'count']> = [
    ...TOTALS.map(
      ([key, label, unit]) =>
        [label, d.base.totals[key], d.new.totals[key], unit] as [
          string,
          number,
          number,
          'bytes' | 'count',
        ],
    ),
    ['peak mapped', d.base.totals.mappedPeakBytes, d.new.totals.mappedPeakBytes, 'bytes'],
  ];
  for (const [label, x, y, unit] of rows) {
    if (x === null || y === null) continue;
    const percent = x > 0 ? ` (${(((y - x) / x) * 100).toFixed(1)} %)` : '';
    out.push(
      `${label.padEnd(12)} ${value(x, unit)} -> ${value(y, unit)}: ${signed(y - x, unit)}${percent}`,
    );
  }
  const section = (title: string, sites: readonly SiteDiff[]): void => {
    if (sites.length === 0) return;
    out.push(title);
    for (const s of sites) {
      out.push(
        `  ${terminalText(s.site)}: peak ${signed(s.delta.peakBytes, 'bytes')} (${formatBytes(s.base.peakBytes)} -> ${formatBytes(s.new.peakBytes)}), ` +
          `allocated ${signed(s.delta.bytes, 'bytes')}, allocations ${signed(s.delta.allocations, 'count')}`,
      );
      for (const f of s.stack.slice(0, FRAMES_SHOWN)) out.push(`      ${terminalText(f)}`);
    }
  };
  section('sites that grew:', d.grew);
  section('sites that shrank:', d.shrank);
  out.push(`${d.added} site(s) only in the new run, ${d.removed} only in the base run`);
  return `${out.join('\n')}\n`;
}
