/**
 * What the interactive page (page/script.ts) gets: per run, the allocation sites with their
 * figures for every flame-graph mode, their stacks as a trie of function names (outermost
 * first: a frame is a path from a root, as in the flame graph), the heap series and, when the
 * replay kept it, the timeline (per site and time bucket: allocations, bytes allocated, bytes
 * freed) from which the page recomputes a brushed range without the events. Everything is
 * aggregated here; the page never sees an event, so its size follows the sites, not the log.
 */
import { displayText, jsonText } from '@heaphook/core';

import { TIMELINE_COLUMNS, TIMELINE_FIELDS, type ScannerTimeline } from '../../decode/replay.js';
import type { LeakedBlock } from '../leaks.js';
import type { ReportModel } from '../model.js';
import type { SeriesPoint } from '../series.js';
import type { StackNames } from '../symbols.js';

/** Function names, shared by the runs of a page. */
export class FrameTable {
  readonly names: string[] = [];
  private readonly index = new Map<string, number>();

  of(name: string): number {
    let i = this.index.get(name);
    if (i === undefined) {
      i = this.names.length;
      this.names.push(name);
      this.index.set(name, i);
    }
    return i;
  }
}

export interface PageRun {
  readonly label: string;
  /** The trie of stacks: node i's parent (-1: a root) and function (into PageData.frames);
   * parents come before their children. */
  readonly nodeParent: number[];
  readonly nodeFrame: number[];
  /** Per site, columns: the trie node of its innermost frame, and the figures of each mode. */
  readonly sites: {
    readonly node: number[];
    readonly allocations: number[];
    readonly bytes: number[];
    readonly peak: number[];
    readonly leaked: number[];
    readonly temporary: number[];
    readonly live: number[];
  };
  /** Per site and bucket, `fields` numbers a cell, the columns of TIMELINE_COLUMNS in its
   * order (site, bucket, allocations, bytes, bytes freed, temporary allocations, and of the
   * bytes allocated then those live at the end and at the peak), or null; `width` ns per
   * bucket. The page reads them by those names (page/script.ts). */
  readonly timeline: {
    readonly width: number;
    readonly fields: number;
    readonly cells: number[];
    /** With a leak check: its leaked blocks by site and bucket, the columns of LEAKED_COLUMNS
     * in its order. */
    readonly leaked: number[];
    /** null: the cells' first number is a site. Otherwise sites were folded into their callers
     * (pageTimeline) and it is a row: rows[row] is the trie node the cell counts for. */
    readonly rows: number[] | null;
  } | null;
  /** The heap series (ns, bytes at the bucket's maximum and its end) and mapped memory's. */
  readonly series: { readonly time: number[]; readonly max: number[]; readonly last: number[] };
  readonly mapped: { readonly time: number[]; readonly max: number[] } | null;
  readonly endTimeNs: number;
  readonly peakTimeNs: number;
  /** What `leaked` counts: with 'never-freed' it is the live bytes at the end, per range too. */
  readonly leakSource: 'never-freed' | 'leak-check';
}

/**
 * The frames the page shows for a stack (its functions innermost first, as StackNames gives
 * them): from the frame its site is named by (siteIndex: the first that is not an allocator's,
 * sites.ts, with --skip-frames), outward. The flame
 * graph, both trees and the callers table start at that frame; the site tables keep the full
 * stack.
 */
export function displayedFrames(
  functions: readonly string[],
  siteIndex: number,
): readonly string[] {
  return functions.slice(siteIndex);
}

/** A leaked-block cell's columns (PageRun.timeline.leaked): the site, the bucket its blocks
 * were allocated in, their bytes. */
export const LEAKED_COLUMNS = ['site', 'bucket', 'bytes'] as const;

/** Where a timeline cell's site (or row) and bucket are, in the cells and the leaked cells:
 * regrouping keeps these two and adds up every other column. */
interface CellKey {
  readonly fields: number;
  readonly site: number;
  readonly bucket: number;
}
const TIMELINE_KEY: CellKey = {
  fields: TIMELINE_FIELDS,
  site: TIMELINE_COLUMNS.indexOf('site'),
  bucket: TIMELINE_COLUMNS.indexOf('bucket'),
};
const LEAKED_BYTES = LEAKED_COLUMNS.indexOf('bytes');
const LEAKED_KEY: CellKey = {
  fields: LEAKED_COLUMNS.length,
  site: LEAKED_COLUMNS.indexOf('site'),
  bucket: LEAKED_COLUMNS.indexOf('bucket'),
};

/** At most this many timeline cells go into a page (~26 bytes of JSON each), so a 10 M-event
 * log's page stays small: past it, adjacent time buckets merge (down to MIN_PAGE_BUCKETS over
 * the run), then the cells of sites deep in the stacks count for their callers at a depth. */
export const MAX_PAGE_TIMELINE_CELLS = 10_000;
/** The fewest buckets merging time may leave before sites fold into their callers. */
export const MIN_PAGE_BUCKETS = 32;

/** The cells with buckets merged `2^shift` at a time and each site's cells counted for its
 * row (every column but the site and the bucket adds up). */
function regroup(
  from: ArrayLike<number>,
  key: CellKey,
  shift: number,
  rowOf: (site: number) => number,
): number[] {
  const { fields, site, bucket } = key;
  const at = new Map<string, number[]>();
  for (let i = 0; i < from.length; i += fields) {
    const row = rowOf(from[i + site]!);
    const merged = Math.floor(from[i + bucket]! / 2 ** shift);
    const id = `${row}:${merged}`;
    const cell = at.get(id);
    if (cell === undefined) {
      const fresh = Array.from({ length: fields }, (_, f) => from[i + f]!);
      fresh[site] = row;
      fresh[bucket] = merged;
      at.set(id, fresh);
    } else
      for (let f = 0; f < fields; f++)
        if (f !== site && f !== bucket) cell[f] = cell[f]! + from[i + f]!;
  }
  return [...at.values()].flat();
}

/** How many cells the timeline has so regrouped. */
function cellCount(
  cells: ArrayLike<number>,
  shift: number,
  lastBucket: number,
  rowOf: (site: number) => number,
): number {
  const { fields, site, bucket } = TIMELINE_KEY;
  const buckets = Math.floor(lastBucket / 2 ** shift) + 1;
  const seen = new Set<number>();
  for (let i = 0; i < cells.length; i += fields)
    seen.add(rowOf(cells[i + site]!) * buckets + Math.floor(cells[i + bucket]! / 2 ** shift));
  return seen.size;
}

/** The stacks' trie, for folding sites into their callers. */
export interface PageStacks {
  /** Per site, its innermost frame's trie node. */
  readonly siteNode: readonly number[];
  /** Per trie node, its parent (-1: a root); parents come before their children. */
  readonly nodeParent: readonly number[];
}

/**
 * A timeline as a page gets it, at most `maxCells` cells. First adjacent buckets merge, 2, 4,
 * 8, ... at a time, down to MIN_PAGE_BUCKETS buckets (to one, without `stacks`); if that is
 * not enough, each site's cells count for its caller at the deepest depth that fits (rows:
 * their trie nodes), so a brushed range shows the top of the stacks exactly and nothing
 * deeper. Each site's (or row's) sums are kept; the whole run's views use the sites' own
 * figures, untouched.
 */
export function pageTimeline(
  timeline: { readonly width: number; readonly cells: ArrayLike<number> },
  leaked: readonly number[],
  maxCells = MAX_PAGE_TIMELINE_CELLS,
  stacks?: PageStacks,
): NonNullable<PageRun['timeline']> {
  const cells = timeline.cells;
  let lastBucket = 0;
  for (let i = 0; i < cells.length; i += TIMELINE_FIELDS)
    lastBucket = Math.max(lastBucket, cells[i + TIMELINE_KEY.bucket]!);
  const bySite = (site: number): number => site;
  const minBuckets = stacks === undefined ? 1 : MIN_PAGE_BUCKETS;
  let shift = 0;
  while (
    cellCount(cells, shift, lastBucket, bySite) > maxCells &&
    Math.floor(lastBucket / 2 ** (shift + 1)) + 1 >= minBuckets &&
    shift < 40
  )
    shift++;
  let rows: number[] | null = null;
  let rowOf = bySite;
  if (stacks !== undefined && cellCount(cells, shift, lastBucket, bySite) > maxCells) {
    const { siteNode, nodeParent } = stacks;
    const depth: number[] = [];
    nodeParent.forEach((parent, node) => depth.push(parent < 0 ? 0 : depth[parent]! + 1));
    const ancestorsAt = (limit: number): number[] =>
      siteNode.map((node) => {
        let n = node;
        while (n >= 0 && depth[n]! > limit) n = nodeParent[n]!;
        return n;
      });
    // the deepest depth whose callers' cells fit (fewer at every shallower depth)
    let fits = -1;
    let lo = 0;
    let hi = Math.max(0, ...depth);
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const at = ancestorsAt(mid);
      if (cellCount(cells, shift, lastBucket, (site) => at[site]! + 1) <= maxCells) {
        fits = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const at = ancestorsAt(Math.max(fits, 0));
    // even the roots alone too many: time merges on
    while (cellCount(cells, shift, lastBucket, (site) => at[site]! + 1) > maxCells && shift < 40)
      shift++;
    const rowOfNode = new Map<number, number>();
    rows = [];
    const rowList = rows;
    rowOf = (site) => {
      const node = at[site]!;
      let row = rowOfNode.get(node);
      if (row === undefined) {
        row = rowList.length;
        rowList.push(node);
        rowOfNode.set(node, row);
      }
      return row;
    };
  }
  return {
    width: timeline.width * 2 ** shift,
    fields: TIMELINE_FIELDS,
    cells:
      shift === 0 && rows === null ? Array.from(cells) : regroup(cells, TIMELINE_KEY, shift, rowOf),
    leaked: shift === 0 && rows === null ? [...leaked] : regroup(leaked, LEAKED_KEY, shift, rowOf),
    rows,
  };
}

export interface PageData {
  readonly frames: string[];
  /** runs[0]: the report's run; with --diff, runs[1] is the base it is compared with. */
  readonly runs: PageRun[];
}

function columns(points: readonly SeriesPoint[]) {
  return {
    time: points.map((p) => p.time),
    max: points.map((p) => p.max),
    last: points.map((p) => p.last),
  };
}

/** One run's data for the page: its sites under `names`' function names (added to `frames`),
 * and with what the replay kept beside the model (the timeline, the latest leak check's
 * blocks) what a time range needs. */
export function pageRun(
  label: string,
  model: ReportModel,
  names: StackNames,
  frames: FrameTable,
  replayed: {
    readonly timeline: ScannerTimeline | null;
    readonly leakedBlocks: readonly LeakedBlock[];
  } = { timeline: null, leakedBlocks: [] },
): PageRun {
  const timeline = replayed.timeline;
  const nodeParent: number[] = [];
  const nodeFrame: number[] = [];
  const children = new Map<string, number>();
  const nodeOf = (path: readonly string[]): number => {
    let node = -1;
    for (let i = path.length - 1; i >= 0; i--) {
      const frame = frames.of(path[i]!);
      const key = `${node}:${frame}`;
      let next = children.get(key);
      if (next === undefined) {
        next = nodeParent.length;
        nodeParent.push(node);
        nodeFrame.push(frame);
        children.set(key, next);
      }
      node = next;
    }
    return node;
  };
  const leakedByStack = new Map(model.leaks.sites.map((s) => [s.stack, s.bytes]));
  const sites = {
    node: [] as number[],
    allocations: [] as number[],
    bytes: [] as number[],
    peak: [] as number[],
    leaked: [] as number[],
    temporary: [] as number[],
    live: [] as number[],
  };
  for (const s of model.sites) {
    sites.node.push(nodeOf(displayedFrames(names.functions(s.stack), names.siteIndex(s.stack))));
    sites.allocations.push(s.allocations);
    sites.bytes.push(s.bytes);
    sites.peak.push(s.peakBytes);
    sites.leaked.push(leakedByStack.get(s.stack) ?? 0);
    sites.temporary.push(s.temporary);
    sites.live.push(s.liveBytes);
  }
  // Leaks under a stack that has no site: LEAK records for blocks the replay never saw
  // allocated (stack 0).
  const siteOfStack = new Map(model.sites.map((s, i) => [s.stack, i]));
  for (const [stack, bytes] of leakedByStack) {
    if (siteOfStack.has(stack)) continue;
    siteOfStack.set(stack, sites.node.length);
    sites.node.push(nodeOf(displayedFrames(names.functions(stack), names.siteIndex(stack))));
    for (const k of ['allocations', 'bytes', 'peak', 'temporary', 'live'] as const)
      sites[k].push(0);
    sites.leaked.push(bytes);
  }
  const leaked: number[] = [];
  if (timeline !== null && model.leaks.source === 'leak-check') {
    const cells = new Map<string, number[]>();
    for (const b of replayed.leakedBlocks) {
      if (b.bucketStartNs === undefined) continue;
      const site = siteOfStack.get(b.stack)!;
      const bucket = Math.floor(b.bucketStartNs / timeline.width);
      const key = `${site}:${bucket}`;
      const cell = cells.get(key);
      const figures = { site, bucket, bytes: b.bytes };
      if (cell === undefined)
        cells.set(
          key,
          LEAKED_COLUMNS.map((column) => figures[column]),
        );
      else cell[LEAKED_BYTES] = cell[LEAKED_BYTES]! + b.bytes;
    }
    for (const cell of cells.values()) leaked.push(...cell);
  }
  return {
    label: displayText(label),
    nodeParent,
    nodeFrame,
    sites,
    timeline:
      timeline === null
        ? null
        : pageTimeline(timeline, leaked, MAX_PAGE_TIMELINE_CELLS, {
            siteNode: sites.node,
            nodeParent,
          }),
    series: columns(model.series),
    mapped:
      model.mapped === undefined
        ? null
        : {
            time: model.mapped.series.map((p) => p.time),
            max: model.mapped.series.map((p) => p.max),
          },
    endTimeNs: Math.max(model.lastTimeNs, model.peakTimeNs),
    peakTimeNs: model.peakTimeNs,
    leakSource: model.leaks.source,
  };
}

/** The page's data as the text of a <script type="application/json">: no `<` survives, so
 * no `</script>` can end it early (jsonText: nor a control character or line separator). */
export function pageDataScript(data: PageData): string {
  return jsonText(data).replace(/</g, '\\u003c');
}
