/**
 * Axis ticks of every chart (src/report/axis.ts): steps of 1, 2 or 5 times a power of ten, byte
 * axes in one binary unit, time axes in one unit, the same functions the page inlines.
 */
import { describe, expect, it } from 'vitest';

import {
  AXIS_SOURCE,
  byteAxis,
  stepDecimals,
  tickStep,
  timeAxis,
  timeUnit,
  type Axis,
} from '../../src/report/axis.js';

const MiB = 1024 * 1024;

/** Each step between ticks is the same 1, 2 or 5 times a power of ten (in the axis' unit). */
function expectOneTwoFive(axis: Axis): void {
  const inUnit = axis.ticks.map((t) => t / axis.unitSize);
  const step = inUnit[1]! - inUnit[0]!;
  const mantissa = Number((step / 10 ** Math.floor(Math.log10(step))).toPrecision(6));
  expect([1, 2, 5]).toContain(mantissa);
  inUnit.forEach((t, i) => expect(t).toBeCloseTo(i * step, 9));
}

describe('tickStep', () => {
  it('steps by 1, 2 or 5 times a power of ten', () => {
    expect(tickStep(57.2, 5, 0)).toBe(20);
    expect(tickStep(100, 5, 0)).toBe(20);
    expect(tickStep(20, 5, 0)).toBe(5);
    expect(tickStep(3, 5, 0)).toBe(1);
    expect(tickStep(0.3, 5, 0)).toBeCloseTo(0.1, 12);
    expect(tickStep(7300, 8, 0)).toBe(1000);
  });
  it('never steps below the smallest step (whole bytes, whole ns)', () => {
    expect(tickStep(3, 5, 1)).toBe(1);
  });
});

describe('byteAxis', () => {
  it('labels a 57.2 MiB peak 0, 20, 40, 60 MiB (not 19.1, 38.1, 57.2)', () => {
    const axis = byteAxis(57.2 * MiB);
    expect(axis.labels).toEqual(['0 MiB', '20 MiB', '40 MiB', '60 MiB']);
    expect(axis.ticks).toEqual([0, 20 * MiB, 40 * MiB, 60 * MiB]);
  });
  it('writes every label in one unit, with the digits the step needs', () => {
    expect(byteAxis(1.7 * MiB).labels).toEqual([
      '0.0 MiB',
      '0.5 MiB',
      '1.0 MiB',
      '1.5 MiB',
      '2.0 MiB',
    ]);
    expect(byteAxis(300).labels).toEqual(['0 B', '100 B', '200 B', '300 B']);
    expect(byteAxis(3).labels).toEqual(['0 B', '1 B', '2 B', '3 B']);
  });
  it('steps 1-2-5 and reaches the top value, whatever it is', () => {
    for (const top of [1, 7, 1023, 1024, 5000, 29.79 * MiB, 3.2 * 1024 * MiB, 123456789012]) {
      const axis = byteAxis(top);
      expectOneTwoFive(axis);
      expect(axis.ticks.at(-1)!).toBeGreaterThanOrEqual(top);
      expect(axis.ticks.length).toBeGreaterThanOrEqual(2);
      expect(axis.ticks.length).toBeLessThanOrEqual(11);
      for (const l of axis.labels) expect(l.endsWith(` ${axis.unit}`)).toBe(true);
    }
  });
});

describe('timeAxis', () => {
  it('uses one unit per axis: 0.0 s to 1.5 s, not "0.0 µs", "500.00 ms", "1.000 s"', () => {
    const axis = timeAxis(1.4e9, 8);
    expect(axis.unit).toBe('s');
    expect(axis.labels).toEqual([
      '0.0 s',
      '0.2 s',
      '0.4 s',
      '0.6 s',
      '0.8 s',
      '1.0 s',
      '1.2 s',
      '1.4 s',
    ]);
  });
  it('picks the largest unit the run reaches', () => {
    expect(timeUnit(93e9).unit).toBe('s');
    expect(timeUnit(999e6).unit).toBe('ms');
    expect(timeUnit(2500).unit).toBe('µs');
    expect(timeUnit(10).unit).toBe('ns');
    expect(timeAxis(340e6).labels).toEqual([
      '0 ms',
      '50 ms',
      '100 ms',
      '150 ms',
      '200 ms',
      '250 ms',
      '300 ms',
      '350 ms',
    ]);
  });
  it('steps 1-2-5 over any span', () => {
    for (const end of [1, 17, 999, 1000, 45_000, 2.2e6, 7.5e8, 1e9, 93.4e9, 3600e9]) {
      const axis = timeAxis(end);
      expectOneTwoFive(axis);
      expect(axis.ticks.at(-1)!).toBeGreaterThanOrEqual(end);
      expect(new Set(axis.labels.map((l) => l.split(' ')[1])).size).toBe(1);
    }
  });
});

describe('stepDecimals', () => {
  it('gives the digits a 1-2-5 step needs', () => {
    expect([20, 1, 0.5, 0.2, 0.05, 0.001].map(stepDecimals)).toEqual([0, 0, 1, 1, 2, 3]);
  });
});

describe('AXIS_SOURCE, what the page inlines', () => {
  it('defines the same functions, with the same results, on their own', () => {
    const inlined = new Function(`${AXIS_SOURCE}\nreturn { byteAxis, timeAxis };`)() as {
      byteAxis: typeof byteAxis;
      timeAxis: typeof timeAxis;
    };
    expect(inlined.byteAxis(57.2 * MiB)).toEqual(byteAxis(57.2 * MiB));
    expect(inlined.timeAxis(1.4e9, 8)).toEqual(timeAxis(1.4e9, 8));
  });
});
