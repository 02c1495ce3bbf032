/**
 * What the interactive page (page/script.ts) gets: per run, the allocation sites with their
 * figures for every flame-graph mode, their stacks as a trie of function names (outermost
 * first: a frame is a path from a root, as in the flame graph), the heap series and, when the
 * replay kept it, the timeline (per site and time bucket: allocations, bytes allocated, bytes
 * freed) from which the page recomputes a brushed range without the events. Everything is
 * aggregated here; the page never sees an event, so its size follows the sites, not the log.
 */
import { displayText, jsonText } from '@heaphook/core';

import { TIMELINE_FIELDS, type ScannerTimeline } from '../../decode/replay.js';
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
  /** Per site and bucket, `fields` numbers a cell (site, bucket, allocations, bytes, bytes
   * freed, temporary allocations, and of the bytes allocated then those live at the end and at
   * the peak), or null; `width` ns per bucket. */
  readonly timeline: {
    readonly width: number;
    readonly fields: number;
    readonly cells: number[];
    /** With a leak check: its leaked blocks by site and bucket, 3 numbers each (site, bucket,
     * bytes). */
    readonly leaked: number[];
  } | null;
  /** The heap series (ns, bytes at the bucket's maximum and its end) and mapped memory's. */
  readonly series: { readonly time: number[]; readonly max: number[]; readonly last: number[] };
  readonly mapped: { readonly time: number[]; readonly max: number[] } | null;
  readonly endTimeNs: number;
  readonly peakTimeNs: number;
  /** What `leaked` counts: with 'never-freed' it is the live bytes at the end, per range too. */
  readonly leakSource: 'never-freed' | 'leak-check';
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
    sites.node.push(nodeOf(names.functions(s.stack)));
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
    sites.node.push(nodeOf(names.functions(stack)));
    for (const k of ['allocations', 'bytes', 'peak', 'temporary', 'live'] as const)
      sites[k].push(0);
    sites.leaked.push(bytes);
  }
  const leaked: number[] = [];
  if (timeline !== null && model.leaks.source === 'leak-check') {
    const cells = new Map<string, [number, number, number]>();
    for (const b of replayed.leakedBlocks) {
      if (b.bucketStartNs === undefined) continue;
      const site = siteOfStack.get(b.stack)!;
      const bucket = Math.floor(b.bucketStartNs / timeline.width);
      const key = `${site}:${bucket}`;
      const cell = cells.get(key);
      if (cell === undefined) cells.set(key, [site, bucket, b.bytes]);
      else cell[2] += b.bytes;
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
        : {
            width: timeline.width,
            fields: TIMELINE_FIELDS,
            cells: Array.from(timeline.cells),
            leaked,
          },
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
