/**
 * The limits `heaphook check` knows: what each one measures in a report (ReportJson), its unit,
 * and which stacks explain it. Sizes are written as in heaphook's environment: a byte count with
 * an optional unit, K/M/G powers of 1000 and KiB/MiB/GiB powers of 1024 (64MiB, 500K, 0).
 */
import { HeaphookError } from '@heaphook/core';

import { readSmallFile } from '../decode/input.js';
import type { ReportJson } from '../report/json.js';

export type LimitUnit = 'bytes' | 'count';

export interface LimitKind {
  /** The option (--max-peak) and the key in a limits file ("max-peak"). */
  readonly name: string;
  readonly unit: LimitUnit;
  /** What the figure is, for the help text and the output. */
  readonly what: string;
  /** The figure in a report; undefined when the log cannot say (no mapped memory recorded). */
  readonly value: (report: ReportJson) => number | undefined;
  /** Stacks that account for the figure, largest first: [amount, frames]. */
  readonly stacks: (report: ReportJson) => Array<[number, readonly string[]]>;
}

/** A site's frames from the one it is named by (its first outside the allocators) outwards. */
function fromSite(s: { site: string; stack: readonly string[] }): readonly string[] {
  return s.stack.slice(Math.max(0, s.stack.indexOf(s.site)));
}

export const LIMIT_KINDS: readonly LimitKind[] = [
  {
    name: 'max-peak',
    unit: 'bytes',
    what: 'heap in use at its peak',
    value: (r) => r.peakHeapBytes,
    stacks: (r) => r.topSites.map((s) => [s.peakBytes, fromSite(s)]),
  },
  {
    name: 'max-leaked',
    unit: 'bytes',
    what: "leaked bytes (the leak check's verdict; without one, every block never freed)",
    value: (r) => r.leakedBytes,
    stacks: (r) => r.leakSites.map((s) => [s.bytes, fromSite(s)]),
  },
  {
    name: 'max-leaked-blocks',
    unit: 'count',
    what: 'leaked blocks',
    value: (r) => r.leakedBlocks,
    stacks: (r) => r.leakSites.map((s) => [s.blocks, fromSite(s)]),
  },
  {
    name: 'max-growth',
    unit: 'bytes',
    what: 'heap still in use at the end of the log (never freed, leaked or reachable)',
    value: (r) => r.neverFreedBytes,
    stacks: (r) =>
      [...r.topSitesByBytes, ...r.topSites]
        .filter((s, i, all) => s.liveBytes > 0 && all.indexOf(s) === i)
        .sort((a, b) => b.liveBytes - a.liveBytes)
        .map((s) => [s.liveBytes, fromSite(s)]),
  },
  {
    name: 'max-allocations',
    unit: 'count',
    what: 'allocating calls (malloc, calloc, realloc, the aligned family)',
    value: (r) => r.allocations,
    stacks: (r) => r.topSitesByCount.map((s) => [s.allocations, fromSite(s)]),
  },
  {
    name: 'max-mapped',
    unit: 'bytes',
    what: 'mapped memory at its peak (recorded with ucm-hooks)',
    value: (r) => r.mappedMemory?.peakBytes,
    stacks: (r) => (r.mappedMemory?.topSites ?? []).map((s) => [s.bytes, fromSite(s)]),
  },
];

const SIZE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  kib: 1024,
  m: 1e6,
  mb: 1e6,
  mib: 1024 ** 2,
  g: 1e9,
  gb: 1e9,
  gib: 1024 ** 3,
  t: 1e12,
  tb: 1e12,
  tib: 1024 ** 4,
};

/** A limit's value from its text: a size for bytes, a whole number for counts. */
export function parseLimit(kind: LimitKind, text: string | number): number {
  const raw = String(text).trim();
  const example = kind.unit === 'bytes' ? `--${kind.name} 64MiB` : `--${kind.name} 100000`;
  const m = /^(\d+(?:\.\d+)?)\s*([a-zA-Z]*)$/.exec(raw);
  const factor = m === null ? undefined : SIZE_UNITS[m[2]!.toLowerCase()];
  const value = m === null || factor === undefined ? NaN : Number(m[1]) * factor;
  const whole = Number.isSafeInteger(value) && (kind.unit === 'bytes' || m?.[2] === '');
  if (!whole) {
    throw new HeaphookError(
      `--${kind.name} ${raw}: give ${kind.unit === 'bytes' ? 'a size in bytes (64MiB, 500K, 0)' : 'a whole number'}, e.g. ${example}`,
    );
  }
  return value;
}

export interface Limit {
  readonly kind: LimitKind;
  readonly max: number;
}

/** The most a limits file may hold: a JSON object of at most six limits fits in far less. */
export const LIMITS_FILE_CAP = 64 * 1024;

/**
 * The limits of a JSON file ({ "max-peak": "64MiB", "max-leaked": 0, ... }), or a
 * HeaphookError naming the file and what is wrong: a regular file of at most
 * LIMITS_FILE_CAP bytes (a FIFO or /dev/zero is refused, not read forever).
 */
export function readLimitsFile(path: string): Limit[] {
  const text = readSmallFile(path, {
    name: `--limits ${path}`,
    wanted: 'give a JSON file such as {"max-peak": "64MiB", "max-leaked": 0}',
    cap: LIMITS_FILE_CAP,
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new HeaphookError(`--limits ${path}: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new HeaphookError(
      `--limits ${path}: expected an object such as {"max-peak": "64MiB", "max-leaked": 0}`,
    );
  }
  return Object.entries(parsed as Record<string, unknown>).map(([key, value]) => {
    const kind = LIMIT_KINDS.find((k) => k.name === key);
    if (kind === undefined) {
      throw new HeaphookError(
        `--limits ${path}: unknown limit "${key}" (known: ${LIMIT_KINDS.map((k) => k.name).join(', ')})`,
      );
    }
    if (typeof value !== 'string' && typeof value !== 'number') {
      throw new HeaphookError(`--limits ${path}: "${key}" must be a number or a size string`);
    }
    return { kind, max: parseLimit(kind, value) };
  });
}

/** 'ok': within the limit; 'over': above it; 'unknown': the log does not have the figure
 * (mapped memory not recorded), which fails the check too: a gate that cannot see must not
 * pass. */
export type VerdictStatus = 'ok' | 'over' | 'unknown';

export interface Verdict {
  readonly limit: Limit;
  readonly status: VerdictStatus;
  /** The report's figure; undefined when the log does not have it. */
  readonly actual: number | undefined;
  /** Stacks that explain the figure (for a limit passed), largest first. */
  readonly stacks: Array<[number, readonly string[]]>;
}

/** How many stacks a passed limit shows. */
export const STACKS_SHOWN = 3;

/** Each limit against a report. */
export function checkLimits(report: ReportJson, limits: readonly Limit[]): Verdict[] {
  return limits.map((limit) => {
    const actual = limit.kind.value(report);
    const status: VerdictStatus =
      actual === undefined ? 'unknown' : actual > limit.max ? 'over' : 'ok';
    const stacks = status === 'over' ? limit.kind.stacks(report).slice(0, STACKS_SHOWN) : [];
    return { limit, status, actual, stacks };
  });
}
