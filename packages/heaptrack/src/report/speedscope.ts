/**
 * speedscope export (speedscope.json, https://www.speedscope.app/file-format-schema.json): the
 * allocation sites as "sampled" profiles, one sample per site (its stack, outermost frame first)
 * weighted four ways — allocated bytes, contribution to the peak (the site's live bytes at the
 * heap's peak), bytes still in use at the end, and allocations — so speedscope's flame graph,
 * left-heavy and sandwich views show each. Frames are shared by name, file and line.
 */
import type { ReportModel } from './model.js';
import type { StackNames } from './symbols.js';

interface SpeedscopeFrame {
  name: string;
  file?: string;
  line?: number;
}

interface SampledProfile {
  type: 'sampled';
  name: string;
  unit: 'bytes' | 'none';
  startValue: number;
  endValue: number;
  samples: number[][];
  weights: number[];
}

export interface SpeedscopeFile {
  $schema: 'https://www.speedscope.app/file-format-schema.json';
  shared: { frames: SpeedscopeFrame[] };
  profiles: SampledProfile[];
  name: string;
  activeProfileIndex: number;
  exporter: string;
}

/** The profiles written, in order: name, unit and the site's weight in each. */
const WEIGHTS: ReadonlyArray<
  [string, SampledProfile['unit'], (site: ReportModel['sites'][number]) => number]
> = [
  ['allocated bytes', 'bytes', (s) => s.bytes],
  ['peak contribution (live bytes at the heap peak)', 'bytes', (s) => s.peakBytes],
  ['in use at the end (never freed)', 'bytes', (s) => s.liveBytes],
  ['allocations', 'none', (s) => s.allocations],
];

export function speedscopeFile(
  model: ReportModel,
  names: StackNames,
  title: string,
): SpeedscopeFile {
  const frames: SpeedscopeFrame[] = [];
  const frameIndex = new Map<string, number>();
  const frameOf = (f: { function: string; file?: string; line?: number }): number => {
    const key = `${f.function}\0${f.file ?? ''}\0${f.line ?? 0}`;
    let index = frameIndex.get(key);
    if (index === undefined) {
      index = frames.length;
      frameIndex.set(key, index);
      frames.push({
        name: f.function === '??' ? '(unknown)' : f.function,
        ...(f.file !== undefined ? { file: f.file } : {}),
        ...(f.line !== undefined && f.line > 0 ? { line: f.line } : {}),
      });
    }
    return index;
  };
  const sites = model.sites.filter((s) => s.allocations > 0);
  // speedscope wants the stack outermost first; the model's frames are innermost first.
  const stacks = sites.map((s) => names.frames(s.stack).map(frameOf).reverse());
  const profiles = WEIGHTS.map(([name, unit, weight]): SampledProfile => {
    const samples: number[][] = [];
    const weights: number[] = [];
    sites.forEach((site, i) => {
      const w = weight(site);
      if (w <= 0) return;
      samples.push(stacks[i]!);
      weights.push(w);
    });
    return {
      type: 'sampled',
      name,
      unit,
      startValue: 0,
      endValue: weights.reduce((a, b) => a + b, 0),
      samples,
      weights,
    };
  });
  return {
    $schema: 'https://www.speedscope.app/file-format-schema.json',
    shared: { frames },
    profiles,
    name: title,
    activeProfileIndex: 0,
    exporter: 'heaphook',
  };
}
