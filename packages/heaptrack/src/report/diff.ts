/**
 * `heaphook report --diff BASE NEW`: two runs compared. The totals (peak heap, allocations,
 * allocated bytes, leaked and never-freed bytes, peak mapped memory) side by side with their
 * change, and the allocation sites that grew or shrank. Addresses differ between runs (ASLR,
 * another build), so a site is matched by its symbolised stack: the function names of its
 * frames, innermost first. Sites are ranked by the change of their contribution to the peak,
 * then of their allocated bytes.
 */
import { terminalText } from '@heaphook/core';

import type { ReportJson } from './json.js';
import { formatBytes } from './format.js';
import type { ReportModel } from './model.js';
import { report } from './run.js';
import { StackNames } from './symbols.js';

export interface SiteFigures {
  allocations: number;
  bytes: number;
  peakBytes: number;
  liveBytes: number;
}

export interface SiteDiff {
  /** Function names of the stack, innermost first. */
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
): Promise<Map<string, { stack: string[]; figures: SiteFigures }>> {
  const names = await StackNames.of(
    model,
    model.sites.map((s) => s.stack),
    { symbolize },
  );
  const out = new Map<string, { stack: string[]; figures: SiteFigures }>();
  for (const site of model.sites) {
    const stack = names.functions(site.stack);
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
  options: { symbolize?: boolean; top?: number } = {},
): Promise<ReportDiff> {
  const symbolize = options.symbolize !== false;
  const top = options.top ?? 20;
  const [b, n] = [
    await report(basePath, { symbolize, top }),
    await report(newPath, { symbolize, top }),
  ];
  const [bs, ns] = [await sitesByStack(b.model, symbolize), await sitesByStack(n.model, symbolize)];
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
    diffs.push({ stack: (ns.get(key) ?? bs.get(key))!.stack, base, new: now, delta });
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
  };
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
        `  peak ${signed(s.delta.peakBytes, 'bytes')} (${formatBytes(s.base.peakBytes)} -> ${formatBytes(s.new.peakBytes)}), ` +
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
