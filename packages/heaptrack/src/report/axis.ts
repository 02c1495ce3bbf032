/**
 * Axis ticks a person reads at a glance: steps of 1, 2 or 5 times a power of ten (10, 20,
 * 50 MiB; never 19.1, 38.1, 57.2), byte axes in one binary unit and time axes in one unit
 * (0, 0.5, 1.0, 1.5 s; never "0.0 µs", "500.00 ms", "1.000 s" on one axis).
 *
 * Every chart uses these: the SVG charts (chart.ts) import them, and the interactive page
 * (page/script.ts) inlines their source text, so this module imports nothing and each function
 * calls only the others here: AXIS_SOURCE is what the page gets.
 */

/** An axis: its ticks from 0 up to at least the largest value, in `unit`, labelled. */
export interface Axis {
  /** Tick values in the data's own unit (bytes, ns), ascending from 0. */
  readonly ticks: number[];
  /** The unit every label is written in, and its size in the data's unit. */
  readonly unit: string;
  readonly unitSize: number;
  readonly labels: string[];
}

/** The step of about `count` ticks over 0..max: 1, 2 or 5 times a power of ten, at least
 * `minStep`. */
export function tickStep(max: number, count: number, minStep: number): number {
  const raw = Math.max(max / Math.max(1, count), minStep);
  const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const multiples = [1, 2, 5, 10];
  for (let i = 0; i < multiples.length; i++) {
    // a hair of tolerance: 0.1 + 0.2 is not 0.3, and 20/5 must step by 4 → 5, not by 10
    const step = multiples[i]! * magnitude;
    if (step >= raw * (1 - 1e-9)) return Math.max(step, minStep);
  }
  return 10 * magnitude;
}

/** Ticks 0, step, 2 step, ... up to the first at or past `max` (in the axis' unit). */
export function stepTicks(max: number, step: number): number[] {
  const ticks = [0];
  for (let i = 1; ticks[ticks.length - 1]! < max * (1 - 1e-9); i++)
    ticks.push(Number((i * step).toPrecision(12)));
  return ticks;
}

/** The digits after the point that a 1-2-5 step needs (0.5 → 1, 0.02 → 2, 20 → 0). */
export function stepDecimals(step: number): number {
  return Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
}

/** An axis of values in `unit`s of `unitSize`, each label the tick in that unit. */
export function unitAxis(max: number, count: number, unit: string, unitSize: number): Axis {
  const top = Math.max(max, 0) / unitSize;
  const step = tickStep(top > 0 ? top : 1, count, unitSize === 1 ? 1 : 0);
  const inUnit = stepTicks(top, step);
  const decimals = stepDecimals(step);
  return {
    ticks: inUnit.map((t) => t * unitSize),
    unit,
    unitSize,
    labels: inUnit.map((t) => t.toFixed(decimals) + ' ' + unit),
  };
}

/** A byte axis: the largest binary unit (B, KiB, MiB, GiB, TiB) the top value reaches. */
export function byteAxis(maxBytes: number, count = 5): Axis {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  while (u < units.length - 1 && maxBytes >= Math.pow(1024, u + 1)) u++;
  return unitAxis(maxBytes, count, units[u]!, Math.pow(1024, u));
}

/** The one unit of a time axis reaching `maxNs`: the largest of s, ms, µs and ns it reaches. */
export function timeUnit(maxNs: number): { readonly unit: string; readonly unitSize: number } {
  if (maxNs >= 1e9) return { unit: 's', unitSize: 1e9 };
  if (maxNs >= 1e6) return { unit: 'ms', unitSize: 1e6 };
  if (maxNs >= 1e3) return { unit: 'µs', unitSize: 1e3 };
  return { unit: 'ns', unitSize: 1 };
}

/** A time axis over 0..maxNs, every label in one unit. */
export function timeAxis(maxNs: number, count = 8): Axis {
  const u = timeUnit(maxNs);
  return unitAxis(maxNs, count, u.unit, u.unitSize);
}

/** The source of this module's functions, for a page's script (plain ES2022 functions). */
export const AXIS_SOURCE: string = [
  tickStep,
  stepTicks,
  stepDecimals,
  unitAxis,
  byteAxis,
  timeUnit,
  timeAxis,
]
  .map((f) => f.toString())
  .join('\n');
