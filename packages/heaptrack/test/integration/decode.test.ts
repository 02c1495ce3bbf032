/**
 * The fast decoding path: the columns (decodeLogColumns) hold exactly the events the record
 * objects (decodeLog) describe, summarize() (the native replay) gives the figures of the
 * replay's test oracle, and the typed-array hash table behaves as a map under heavy
 * insert/delete churn.
 */
import { describe, expect, it } from 'vitest';

import { decodeLog, decodeLogColumns, eventAt } from '../../src/decode/events.js';
import { NumberTable } from '../oracle/table.js';
import { summarize } from '../../src/report/summary.js';
import type { EventRecord } from '../../src/decode/records.js';
import { logsIn, scratch, traced, workload } from '../helpers.js';
import { oracleReportModel } from '../oracle/report.js';

function recordedLog(env: Record<string, string> = {}): string {
  const dir = scratch('decode');
  const run = traced(dir, workload, ['counts'], env);
  expect(run.status, run.stderr).toBe(0);
  return logsIn(dir)[0]!;
}

describe('decodeLogColumns', () => {
  it('yields the same events, in the same order, as the record objects', async () => {
    const log = recordedLog({ HEAPHOOK_TIMING: '1' });
    const objects: EventRecord[] = [];
    for await (const r of decodeLog(log)) if (r.type === 'event') objects.push(r);
    const fromColumns: EventRecord[] = [];
    let declarations = 0;
    for await (const batch of decodeLogColumns(log)) {
      expect(batch.recordAt).toHaveLength(batch.records.length);
      declarations += batch.records.length;
      for (let k = 0; k < batch.events.length; k++) fromColumns.push(eventAt(batch, k));
    }
    expect(declarations).toBeGreaterThan(0);
    expect(objects.length).toBeGreaterThan(1000);
    expect(fromColumns).toEqual(objects);
    expect(objects.every((e) => e.op === 'realloc_done' || e.duration !== undefined)).toBe(true);
  });

  it('gives the same events whether zstd blocks go through the zstd program or fzstd', async () => {
    const log = recordedLog();
    const events = async (zstd: 'program' | 'js'): Promise<EventRecord[]> => {
      const out: EventRecord[] = [];
      for await (const r of decodeLog(log, { zstd })) if (r.type === 'event') out.push(r);
      return out;
    };
    const viaJs = await events('js');
    expect(viaJs.length).toBeGreaterThan(1000);
    expect(await events('program')).toEqual(viaJs);
  });

  it('summarize() gives the figures of the replay’s test oracle', async () => {
    const log = recordedLog();
    const { model, events } = await oracleReportModel(log);
    const s = await summarize(log);
    expect(s.calls).toEqual(model.calls);
    expect(s.events).toBe(model.events);
    expect(s.peakBytes).toBe(model.peakHeapBytes);
    expect(s.peakTime).toBe(model.peakTimeNs);
    expect(s.liveBytes).toBe(model.finalLiveBytes);
    expect(s.allocatedBytes).toBe(model.allocatedBytes);
    expect(s.peakLiveBlocks).toBe(model.peakLiveBlocks);
    expect(s.liveBlocks).toBe(model.finalLiveBlocks);
    expect(s.anomalies).toBe(events.anomalies);
    expect(s.leaks.length).toBeGreaterThan(0);
    const oracleLive = [...events.live.entries()].map(([ptr, , weight]) => [ptr, weight]);
    expect(new Map(s.leaks.map((b) => [b.ptr, b.weight]))).toEqual(
      new Map(oracleLive as [number, number][]),
    );
    expect([...s.leakSites].sort((a, b) => a.stack - b.stack)).toEqual(
      [...model.neverFreed.sites].sort((a, b) => a.stack - b.stack),
    );
  });
});

describe('NumberTable', () => {
  it('matches a Map through 50k random inserts, overwrites and deletes', () => {
    const table = new NumberTable(8);
    const map = new Map<number, number>();
    let x = 12345;
    const next = (): number => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
    for (let i = 0; i < 50_000; i++) {
      const key = 0x7f0000000000 + (next() % 5000) * 16; // addresses above 2^32
      if (next() % 3 === 0) {
        expect(table.delete(key)).toBe(map.get(key) ?? -1);
        map.delete(key);
      } else {
        expect(table.set(key, i)).toBe(map.get(key) ?? -1);
        map.set(key, i);
      }
    }
    expect(table.size).toBe(map.size);
    for (const [k, v] of map) expect(table.get(k)).toBe(v);
    expect(table.get(0x7f0000000008)).toBe(-1);
    const seen = new Map<number, number>();
    table.forEach((v, k) => seen.set(k, v));
    expect(seen).toEqual(map);
  });
});
