/**
 * What report.html carries of a log's timeline (src/report/page/data.ts): at most a budget of
 * cells, coarser buckets past it, every site's sums the same; and the seam that picks the
 * frames the page shows of a stack.
 */
import { describe, expect, it } from 'vitest';

import { TIMELINE_FIELDS } from '../../src/decode/replay.js';
import { displayedFrames, MIN_PAGE_BUCKETS, pageTimeline } from '../../src/report/page/data.js';
import { SiteNamer } from '../../src/report/sites.js';

/** `sites` sites with a cell in each of `buckets` buckets: site s, bucket b allocates s+b+1
 * times, (s+1)*(b+1) bytes. */
function timeline(sites: number, buckets: number): number[] {
  const cells: number[] = [];
  for (let s = 0; s < sites; s++)
    for (let b = 0; b < buckets; b++) {
      const row = [s, b, s + b + 1, (s + 1) * (b + 1), 1, 2, 3, 4];
      expect(row).toHaveLength(TIMELINE_FIELDS);
      cells.push(...row);
    }
  return cells;
}

/** Per site, the sums of its cells' figures (every field after site and bucket). */
function sums(cells: readonly number[]): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (let i = 0; i < cells.length; i += TIMELINE_FIELDS) {
    const row = out.get(cells[i]!) ?? new Array<number>(TIMELINE_FIELDS - 2).fill(0);
    for (let f = 2; f < TIMELINE_FIELDS; f++) row[f - 2]! += cells[i + f]!;
    out.set(cells[i]!, row);
  }
  return out;
}

describe('pageTimeline', () => {
  it('keeps a timeline under the budget as it is', () => {
    const cells = timeline(10, 16);
    const t = pageTimeline({ width: 1000, cells }, [0, 3, 99]);
    expect(t.width).toBe(1000);
    expect(t.rows).toBeNull();
    expect(t.cells).toEqual(cells);
    expect(t.leaked).toEqual([0, 3, 99]);
  });

  it('with the stacks, merges time down to MIN_PAGE_BUCKETS, then counts sites for their callers', () => {
    // a trie: root 0 → callers 1..4 → sites' nodes 5..104 (25 under each caller)
    const nodeParent = [-1, 0, 0, 0, 0, ...Array.from({ length: 100 }, (_, i) => 1 + (i % 4))];
    const siteNode = Array.from({ length: 100 }, (_, i) => 5 + i);
    const cells = timeline(100, 64); // 6,400 cells
    const t = pageTimeline({ width: 1000, cells }, [9, 63, 7], 200, { siteNode, nodeParent });
    expect(t.width).toBe(2000); // 64 → 32 buckets, no fewer
    expect(MIN_PAGE_BUCKETS).toBe(32);
    // 100 sites × 32 buckets do not fit in 200 cells; their 4 callers × 32 do
    expect(t.rows).not.toBeNull();
    expect([...t.rows!].sort()).toEqual([1, 2, 3, 4]);
    expect(t.cells.length / TIMELINE_FIELDS).toBe(128);
    // each caller's sums are those of its 25 sites
    const bySite = sums(cells);
    const byRow = sums(t.cells);
    t.rows!.forEach((node, row) => {
      const expected = new Array<number>(TIMELINE_FIELDS - 2).fill(0);
      siteNode.forEach((n, site) => {
        if (nodeParent[n] === node) bySite.get(site)!.forEach((v, f) => (expected[f]! += v));
      });
      expect(byRow.get(row)).toEqual(expected);
    });
    // site 9 (under caller 2) leaked 7 bytes in bucket 63: its caller's row, bucket 31
    expect(t.leaked).toEqual([t.rows!.indexOf(nodeParent[siteNode[9]!]!), 31, 7]);
  });

  it('merges buckets two at a time until the cells fit, keeping every site sum', () => {
    const cells = timeline(100, 64); // 6,400 cells
    const t = pageTimeline({ width: 1000, cells }, [5, 63, 7, 5, 62, 1], 1000);
    expect(t.cells.length / TIMELINE_FIELDS).toBeLessThanOrEqual(1000);
    expect(t.width).toBe(8000); // 64 buckets → 8: 800 cells
    expect(t.cells.length / TIMELINE_FIELDS).toBe(800);
    expect(sums(t.cells)).toEqual(sums(cells));
    expect(t.leaked).toEqual([5, 7, 8]);
    for (let i = 0; i < t.cells.length; i += TIMELINE_FIELDS)
      expect(t.cells[i + 1]).toBeLessThan(8);
  });
});

describe('displayedFrames', () => {
  it('starts a stack at the frame its site is named by: allocator frames are not drawn', () => {
    const frames = [
      { function: 'malloc' },
      { function: '_PyObject_Malloc', file: 'obmalloc.c' },
      { function: 'PyUnicode_New', file: 'unicodeobject.c' },
      { function: 'main', file: 'main.c' },
    ];
    const functions = frames.map((f) => f.function);
    const index = new SiteNamer().siteIndex(frames);
    expect(displayedFrames(functions, index)).toEqual(['PyUnicode_New', 'main']);
    // --skip-frames moves it further out
    const skipping = new SiteNamer([/^PyUnicode_/]).siteIndex(frames);
    expect(displayedFrames(functions, skipping)).toEqual(['main']);
  });
});
