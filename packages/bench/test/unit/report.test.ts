/**
 * The tracer tables, on the tracer run kept in results/tracers/latest.json: the wall-time table
 * gives each tracer's slowdown with its trace's size, the CPU-time table what tracing cost the
 * machine (the tracer's own threads and processes included), each from the cells' ratios.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { formatRatio } from '../../src/format.js';
import { allTables, tracerTable } from '../../src/report.js';
import { validateResults, type Results } from '../../src/results.js';

const results = fileURLToPath(new URL('../../results/tracers/latest.json', import.meta.url));
const doc: unknown = JSON.parse(readFileSync(results, 'utf8'));

describe('tracer tables', () => {
  it('reads a results file that follows the schema', () => {
    expect(validateResults(doc)).toEqual([]);
  });
  const r = doc as Results;
  const tracers = r.tracers.filter((t) => t.status === 'ready').map((t) => t.name);

  for (const figure of ['wall_s', 'cpu_s'] as const) {
    it(`${figure}: one row per workload, each tracer's ratio to its untraced run`, () => {
      const t = tracerTable(r, figure)!;
      expect(t.header).toEqual(['workload', ...tracers]);
      const workloads = r.workloads.filter((w) => w.status === 'ready');
      expect(t.rows.map((row) => row[0])).toEqual(workloads.map((w) => w.name));
      for (const row of t.rows) {
        tracers.forEach((name, j) => {
          const cell = r.cells.find((c) => c.workload === row[0] && c.allocator === name);
          const ratio = cell?.status === 'ok' ? cell.ratios[figure] : undefined;
          if (ratio === undefined) return; // not measured here: '–', failed, or its own time
          expect(row[j + 1]!.startsWith(formatRatio(ratio))).toBe(true);
          // the trace's size goes with the wall time only
          expect(row[j + 1]!.includes('B/call')).toBe(figure === 'wall_s');
        });
      }
    });
  }

  it('marks the cheapest tracer of each row, by the table own figure', () => {
    const t = tracerTable(r, 'cpu_s')!;
    let marked = 0;
    t.rows.forEach((row, i) => {
      const ratios = tracers.map((name) => {
        const cell = r.cells.find((c) => c.workload === row[0] && c.allocator === name);
        return cell?.status === 'ok' ? (cell.ratios.cpu_s ?? Infinity) : Infinity;
      });
      const least = Math.min(...ratios);
      // a row no tracer ran (startup) has no mark
      expect(t.best[i]!.indexOf(true)).toBe(least === Infinity ? -1 : ratios.indexOf(least) + 1);
      marked++;
    });
    expect(marked).toBeGreaterThan(0);
  });

  it('both go into the report, wall time first', () => {
    const titles = allTables(r).map((t) => t.title);
    const wall = titles.findIndex((s) => s.startsWith('Heap tracer overhead: wall-time'));
    const cpu = titles.findIndex((s) => s.startsWith('Heap tracer overhead: CPU time'));
    expect(wall).toBeGreaterThanOrEqual(0);
    expect(cpu).toBe(wall + 1);
  });
});
