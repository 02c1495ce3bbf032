/**
 * The report-throughput benchmark for real on small logs (--quick): it records the churn
 * workload, decodes what it recorded, and writes its results. No timing is asserted: only that
 * every figure is there and that the decoder found exactly the events the workload made, and
 * that the churn figures (log size, read CPU and tracing cost against KDE heaptrack's) are there
 * and sane.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import {
  formatThroughput,
  reportThroughput,
  THROUGHPUT_SCHEMA,
  type ThroughputResults,
} from '../../src/reportthroughput.js';

const out = mkdtempSync(join(tmpdir(), 'bench-throughput-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('report-throughput --quick', () => {
  it('decodes exactly the events the workload reports and writes latest.{json,md}', async () => {
    const r = await reportThroughput({ quick: true, outDir: out, log: () => {} });
    expect(r.schema).toBe(THROUGHPUT_SCHEMA);
    // Two events (malloc + free) per churn operation, on top of the program's fixed calls.
    expect(r.workload.events_reported).toBe(2 * 4 * r.workload.size);
    expect(r.log.workload_events_decoded).toBe(r.workload.events_reported);
    expect(r.log.events_decoded).toBe(r.workload.events_reported + r.workload.fixed_events);
    expect(r.workload.fixed_events).toBeGreaterThanOrEqual(0);

    const names = r.tools.map((t) => t.tool);
    expect(names[0]).toBe('heaphook report model (native pass)');
    expect(names[1]).toMatch(/^heaphook (report --json|dump --summary)$/);
    expect(names[2]).toBe('heaptrack_print');
    for (const t of r.tools.slice(0, 2)) {
      expect(t.status).toBe('ok');
      expect(t.wall_s!.n).toBe(r.runs);
      expect(t.wall_s!.median).toBeGreaterThan(0);
      expect(t.peak_rss_bytes!.median).toBeGreaterThan(0);
      expect(t.events_per_s).toBeGreaterThan(0);
    }
    expect(['ok', 'skipped']).toContain(r.tools[2]!.status);
    expect(r.decode.ms.median).toBeGreaterThan(0);

    // Memory at 1x, 2x, 4x the log: the logs really double.
    expect(r.memory.map((m) => m.scale)).toEqual([1, 2, 4]);
    const [m1, m2, m4] = r.memory;
    expect(m2!.events - m1!.events).toBe(2 * r.workload.size);
    expect(m4!.events - m1!.events).toBe(6 * r.workload.size);
    for (const m of r.memory) expect(m.peak_rss_bytes).toBeGreaterThan(0);

    // The churn figures side by side: present and sane (no timing asserted).
    const t = r.churn.tracing;
    for (const run of [t.untraced, t.heaphook, ...(t.kde ? [t.kde] : [])]) {
      expect(run.wall_s.n).toBe(r.runs);
      expect(run.wall_s.median).toBeGreaterThan(0);
      expect(run.cpu_s.median).toBeGreaterThan(0);
    }
    expect(r.tools[1]!.cpu_s!.median).toBeGreaterThan(0);
    if (r.tools[2]!.status === 'ok') {
      // KDE heaptrack installed: every ratio is a positive finite number.
      expect(r.kde_trace!.bytes).toBeGreaterThan(0);
      for (const x of [r.churn.log_size_ratio, r.churn.report_cpu_ratio, t.share_of_kde]) {
        expect(Number.isFinite(x)).toBe(true);
        expect(x).toBeGreaterThan(0);
      }
      expect(r.churn.log_size_ratio).toBeCloseTo(r.log.bytes / r.kde_trace!.bytes, 10);
      expect(formatThroughput(r)).toMatch(/\| log size \| [\d.]+ MB \| [\d.]+ MB \| [\d.]+ \|/);
    }

    const json = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as ThroughputResults;
    expect(json.log).toEqual(r.log);
    expect(existsSync(join(out, 'latest.md'))).toBe(true);
    expect(readFileSync(join(out, 'latest.md'), 'utf8')).toBe(`${formatThroughput(r)}\n`);
  });
});
