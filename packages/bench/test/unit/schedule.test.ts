import { describe, expect, it } from 'vitest';

import { buildSchedule, warmUpRuns } from '../../src/schedule.js';

const ready = (name: string) => ({ name, status: 'ready' as const });
const skipped = (name: string) => ({ name, status: 'skipped' as const });

describe('buildSchedule', () => {
  it('interleaves the allocators: A B C A B C ..., every repetition in turn', () => {
    const s = buildSchedule([ready('w1'), ready('w2')], [ready('A'), ready('B'), ready('C')], 3);
    expect(s.map((r) => `${r.rep}:${r.workload.name}:${r.allocator.name}`)).toEqual([
      '0:w1:A',
      '0:w1:B',
      '0:w1:C',
      '0:w2:A',
      '0:w2:B',
      '0:w2:C',
      '1:w1:A',
      '1:w1:B',
      '1:w1:C',
      '1:w2:A',
      '1:w2:B',
      '1:w2:C',
      '2:w1:A',
      '2:w1:B',
      '2:w1:C',
      '2:w2:A',
      '2:w2:B',
      '2:w2:C',
    ]);
    expect(s.map((r) => r.seq)).toEqual(s.map((_, i) => i));
  });

  it('never runs one allocator twice in a row for a workload before the others had their turn', () => {
    const s = buildSchedule([ready('w')], [ready('A'), ready('B'), ready('C'), ready('D')], 5);
    const order = s.map((r) => r.allocator.name);
    for (let i = 0; i + 4 <= order.length; i += 4)
      expect(new Set(order.slice(i, i + 4)).size).toBe(4);
    expect(order.filter((a) => a === 'A')).toHaveLength(5);
  });

  it('adds tracer runs to the first tracerRuns repetitions only', () => {
    const s = buildSchedule([ready('w')], [ready('glibc'), ready('tlsf')], 3, [ready('trace')], 2);
    expect(s.map((r) => `${r.rep}:${r.allocator.name}`)).toEqual([
      '0:glibc',
      '0:tlsf',
      '0:trace',
      '1:glibc',
      '1:tlsf',
      '1:trace',
      '2:glibc',
      '2:tlsf',
    ]);
  });

  it('runs no tracer on a workload that asks for none (startup)', () => {
    const s = buildSchedule(
      [ready('w'), { ...ready('startup'), noTracers: true }],
      [ready('glibc')],
      1,
      [ready('trace')],
      1,
    );
    expect(s.map((r) => `${r.workload.name}:${r.allocator.name}`)).toEqual([
      'w:glibc',
      'w:trace',
      'startup:glibc',
    ]);
  });

  it('leaves out skipped workloads, allocators and tracers', () => {
    const s = buildSchedule(
      [ready('w'), skipped('py')],
      [ready('glibc'), skipped('jemalloc')],
      2,
      [skipped('kde')],
      2,
    );
    expect(s.map((r) => `${r.workload.name}:${r.allocator.name}`)).toEqual(['w:glibc', 'w:glibc']);
  });

  it('rejects a run count that is not a positive integer', () => {
    expect(() => buildSchedule([ready('w')], [ready('A')], 0)).toThrow(/positive integer/);
    expect(() => buildSchedule([ready('w')], [ready('A')], 1.5)).toThrow(/positive integer/);
  });
});

describe('warmUpRuns', () => {
  const workloads = [ready('w1'), ready('w2'), { ...ready('startup'), noTracers: true }];
  const allocators = [ready('glibc'), ready('tlsf'), skipped('jemalloc'), ready('rec')];
  const tracers = [ready('trace')];
  // rec runs w2 only, as tlsf-rec runs the workloads it has a recommendation for
  const applies = (w: { name: string }, a: { name: string }) => a.name !== 'rec' || w.name === 'w2';
  const schedule = buildSchedule(workloads, allocators, 1, tracers, 1).filter((s) =>
    applies(s.workload, s.allocator),
  );
  const names = (
    runs: ReadonlyArray<{ workload: { name: string }; allocator: { name: string } }>,
  ) => runs.map((r) => `${r.workload.name}:${r.allocator.name}`);

  it('full run: every workload under every column that applies, one at a time', () => {
    const w = warmUpRuns(false, workloads, [...allocators, ...tracers], schedule, applies);
    expect(w.parallel).toBe(1);
    expect(names(w.runs)).toEqual([
      'w1:glibc',
      'w1:tlsf',
      'w1:trace',
      'w2:glibc',
      'w2:tlsf',
      'w2:rec',
      'w2:trace',
      'startup:glibc',
      'startup:tlsf',
      'startup:trace',
    ]);
  });

  it('quick: each program under the baseline, each other column once on its first timed workload, two at a time', () => {
    const w = warmUpRuns(true, workloads, [...allocators, ...tracers], schedule, applies);
    expect(w.parallel).toBe(2);
    expect(names(w.runs)).toEqual([
      'w1:glibc',
      'w2:glibc',
      'startup:glibc',
      'w1:tlsf',
      'w2:rec',
      'w1:trace',
    ]);
  });

  it('quick: a column the schedule never runs is not warmed', () => {
    const w = warmUpRuns(true, [ready('startup')], [ready('glibc'), ready('trace')], []);
    expect(names(w.runs)).toEqual(['startup:glibc']);
  });
});
