/**
 * `heaphook report`: one pass over the log into the report model, then the outputs (text,
 * JSON, and with an output folder the HTML page, charts, flame graph and pprof profile).
 * A damaged or truncated log stops the pass at the damage: the report covers what came before,
 * and the error (with its byte offset) is returned alongside.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { HeaphookError, jsonText } from '@heaphook/core';

import { LogFormatError } from '../decode/decoder.js';
import { replayLog, timelineOf, type ScannerTimeline } from '../decode/replay.js';
import type { ReportDiff } from './diff.js';
import { jsonStacks, reportJson, type ReportJson } from './json.js';
import {
  ReportBuilder,
  SERIES_DEFAULT_POINTS,
  SERIES_INITIAL_WIDTH_NS,
  type ReportModel,
} from './model.js';
import type { LeakedBlock } from './leaks.js';
import { NativeEvents } from './native.js';
import type { FrameTable, PageRun } from './page/data.js';
import { startProgress } from './progress.js';
import { StackNames } from './symbols.js';
import type { Suppression } from './suppressions.js';
import { reportText } from './text.js';

export interface ReportOptions {
  /** Write report.html, heap.svg/png/pdf, flamegraph.svg, profile.pb.gz, speedscope.json,
   * heap.perfetto-trace and summary.json here. */
  readonly outputDir?: string;
  /** Resolve stacks to function names with addr2line (default true). */
  readonly symbolize?: boolean;
  /** Show a progress bar on stderr (default: when stderr is a terminal). */
  readonly progress?: boolean;
  /** Sites listed per table (default 20). */
  readonly top?: number;
  /** Lines the text summary gives after its first warning and before the figures. */
  readonly preface?: string;
  /** The files -o writes, by format name (REPORT_FORMATS; default every one). */
  readonly formats?: readonly ReportFormat[];
  /** More frames to name sites past (`--skip-frames`), beside the built-in allocator list. */
  readonly skipFrames?: readonly RegExp[];
  /** Known leaks (`--suppressions`, the project's file): counted apart from the leaked figures. */
  readonly suppressions?: {
    readonly rules: readonly Suppression[];
    readonly files: readonly string[];
  };
  /** Points of the heap-over-time series (default 1024). */
  readonly points?: number;
  /** report --diff with an output folder: the base run, for report.html's differential views. */
  readonly compare?: {
    readonly diff: ReportDiff;
    readonly run: (frames: FrameTable) => PageRun;
  };
}

/** The formats `report -o DIR --formats` names, and the file each writes. */
export const REPORT_FORMATS = {
  html: 'report.html',
  svg: 'heap.svg',
  png: 'heap.png',
  pdf: 'heap.pdf',
  flamegraph: 'flamegraph.svg',
  pprof: 'profile.pb.gz',
  speedscope: 'speedscope.json',
  perfetto: 'heap.perfetto-trace',
  json: 'summary.json',
} as const;
export type ReportFormat = keyof typeof REPORT_FORMATS;

/** Parses `--formats html,svg,...`; a clear error naming the known ones. */
export function parseFormats(text: string): ReportFormat[] {
  const names = text
    .split(',')
    .map((f) => f.trim())
    .filter((f) => f !== '');
  const unknown = names.filter((f) => !(f in REPORT_FORMATS));
  if (names.length === 0 || unknown.length > 0) {
    throw new HeaphookError(
      `--formats ${text}: ${unknown.length > 0 ? `unknown format ${unknown.join(', ')}` : 'no format given'}; choose among ${Object.keys(REPORT_FORMATS).join(',')}, e.g. --formats html,svg`,
    );
  }
  return [...new Set(names)] as ReportFormat[];
}

/** Time buckets of the timeline the interactive page brushes (page/data.ts). */
export const TIMELINE_BUCKETS = 128;

export interface ReportResult {
  readonly model: ReportModel;
  readonly json: ReportJson;
  readonly text: string;
  /** Files written (with outputDir). */
  readonly files: string[];
  /** Where the log is damaged, if it is: the report covers the part before it. */
  readonly error?: LogFormatError;
}

/** Reads the whole log (or its valid part) into the report model. */
export async function buildReportModel(
  path: string,
  options: Pick<ReportOptions, 'progress' | 'points'> & {
    /** Keep the timeline of report.html's time ranges (by site and time bucket): a cost per
     * event that no other output reads (default false). */
    readonly timeline?: boolean;
    /** Keep the heap series and the threads' series (default true): only the files (-o) show
     * them, and they cost ~20 instructions an event. */
    readonly series?: boolean;
  } = {},
): Promise<{
  model: ReportModel;
  timeline: ScannerTimeline | null;
  /** The blocks the latest leak check found leaked, for the timeline. */
  leakedBlocks: readonly LeakedBlock[];
  error?: LogFormatError;
}> {
  const points = options.points ?? SERIES_DEFAULT_POINTS;
  const events = new NativeEvents(points, SERIES_INITIAL_WIDTH_NS);
  if (options.timeline === true) events.scanner.startTimeline(Math.min(TIMELINE_BUCKETS, points));
  else if (options.series === false) events.scanner.skipSeries();
  const builder = new ReportBuilder(events, { points });
  const progress = startProgress(path, options.progress);
  let error: LogFormatError | undefined;
  try {
    await replayLog(path, events.scanner, (record) => builder.add(record), {
      onBlock: (n) => progress.update(n),
    });
  } catch (e) {
    if (!(e instanceof LogFormatError)) throw e;
    error = e;
  } finally {
    progress.stop();
  }
  return {
    model: builder.finish(),
    timeline: timelineOf(events.scanner),
    leakedBlocks: builder.leakedBlocks(),
    ...(error !== undefined ? { error } : {}),
  };
}

export async function report(path: string, options: ReportOptions = {}): Promise<ReportResult> {
  const withPage =
    options.outputDir !== undefined &&
    (options.formats === undefined || options.formats.includes('html'));
  const { model, timeline, leakedBlocks, error } = await buildReportModel(path, {
    ...options,
    timeline: withPage,
    series: options.outputDir !== undefined,
  });
  const top = options.top ?? 20;
  const wanted = jsonStacks(model, top);
  const withFiles = options.outputDir !== undefined;
  if (withFiles) {
    for (const s of model.sites) wanted.add(s.stack);
    for (const s of model.leaks.sites) wanted.add(s.stack);
  }
  const names = await StackNames.of(model, wanted, {
    symbolize: options.symbolize !== false,
    ...(options.skipFrames !== undefined ? { skipFrames: options.skipFrames } : {}),
  });
  const json = reportJson(model, names, {
    log: path,
    top,
    ...(options.suppressions !== undefined ? { suppressions: options.suppressions } : {}),
    ...(error !== undefined ? { error: { message: error.message, offset: error.offset } } : {}),
  });
  const text = reportText(json, options.preface !== undefined ? { preface: options.preface } : {});
  const files: string[] = [];
  if (options.outputDir !== undefined) {
    const dir = options.outputDir;
    await mkdir(dir, { recursive: true });
    // The files' modules load only when there are files to write: `report --json` and the
    // text report need none of them.
    const [
      { chartGeometry, heapChartSvg, svgToPdf, svgToPng },
      { flameGraphSvg },
      { reportHtml },
      { FrameTable, pageRun },
      { perfettoTrace },
      { pprofBytes },
      { speedscopeFile },
    ] = await Promise.all([
      import('./chart.js'),
      import('./flamegraph.js'),
      import('./html.js'),
      import('./page/data.js'),
      import('./perfetto.js'),
      import('./pprof.js'),
      import('./speedscope.js'),
    ]);
    const chartInput = {
      series: model.series,
      peakBytes: model.peakHeapBytes,
      peakTimeNs: model.peakTimeNs,
      ...(model.mapped !== undefined
        ? {
            mapped: {
              series: model.mapped.series,
              peakBytes: model.mapped.peakBytes,
              peakTimeNs: model.mapped.peakTimeNs,
            },
          }
        : {}),
      endTimeNs: Math.max(model.lastTimeNs, model.peakTimeNs),
      title: chartTitle(model),
    };
    const heapSvg = heapChartSvg(chartInput);
    const g = chartGeometry(chartInput);
    const flameSvg = flameGraphSvg(
      model.sites.map((s) => ({ functions: names.functions(s.stack), value: s.bytes })),
      { unit: 'bytes', title: 'Allocated bytes by call stack' },
    );
    const pageOf = () => {
      const frames = new FrameTable();
      const runs = [pageRun(json.argv.join(' '), model, names, frames, { timeline, leakedBlocks })];
      if (options.compare !== undefined) runs.push(options.compare.run(frames));
      return {
        page: { frames: frames.names, runs },
        ...(options.compare !== undefined ? { diff: options.compare.diff } : {}),
      };
    };
    // Each made only when --formats asks for it.
    const outputs: [string, () => Promise<string | Uint8Array> | string | Uint8Array][] = [
      [
        'report.html',
        () => reportHtml({ json, heapSvg, flameSvg, latency: model.latency, ...pageOf() }),
      ],
      ['heap.svg', () => heapSvg],
      ['heap.png', () => svgToPng(heapSvg, 2)],
      ['heap.pdf', () => svgToPdf(heapSvg, g.width, g.height)],
      ['flamegraph.svg', () => flameSvg],
      ['profile.pb.gz', () => pprofBytes(model, names)],
      [
        'speedscope.json',
        () => jsonText(speedscopeFile(model, names, `heaphook: ${json.argv.join(' ')}`)),
      ],
      ['heap.perfetto-trace', () => perfettoTrace(model)],
      ['summary.json', () => `${jsonText(json, 2)}\n`],
    ];
    const wantedFiles = new Set<string>(
      (options.formats ?? (Object.keys(REPORT_FORMATS) as ReportFormat[])).map(
        (f) => REPORT_FORMATS[f],
      ),
    );
    for (const [name, make] of outputs) {
      if (!wantedFiles.has(name)) continue;
      const data = await make();
      const file = join(dir, name);
      await writeFile(file, data);
      files.push(file);
    }
  }
  return { model, json, text, files, ...(error !== undefined ? { error } : {}) };
}

function chartTitle(model: ReportModel): string {
  const argv = model.process?.argv ?? [];
  if (argv.length === 0) return 'Heap consumption over time';
  const command = [argv[0]!.slice(argv[0]!.lastIndexOf('/') + 1), ...argv.slice(1)].join(' ');
  const pid = model.process !== undefined ? ` (pid ${model.process.pid})` : '';
  const full = `Heap consumption over time — ${command}${pid}`;
  return full.length > 100 ? `${full.slice(0, 99)}…` : full;
}
