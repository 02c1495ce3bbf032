/**
 * The heap-over-time chart: an SVG drawn from the report's series (each bucket's maximum, so
 * no peak is lost), the peak marked with a dot and a label. PNG through resvg and PDF through
 * pdfkit + svg-to-pdfkit, both with the DejaVu Sans font shipped by the dejavu-fonts-ttf
 * package, so text renders the same on any machine.
 */
import { createRequire } from 'node:module';

import { xmlText } from '@heaphook/core';
import type * as ResvgModule from '@resvg/resvg-js';
import type PDFKitDocument from 'pdfkit';
import type SVGtoPDFFunction from 'svg-to-pdfkit';

import type { SeriesPoint } from './series.js';
import { byteAxis, timeAxis } from './axis.js';
import { formatBytes, formatDuration } from './format.js';

const require = createRequire(import.meta.url);

/** The TrueType font the charts use (DejaVu Sans, from the dejavu-fonts-ttf npm package). */
export const FONT_FILE: string = require.resolve('dejavu-fonts-ttf/ttf/DejaVuSans.ttf');
export const FONT_FAMILY = 'DejaVu Sans';

/** A second line on the chart: memory the program mapped (VM events), with its peak. */
export interface MappedChartInput {
  readonly series: readonly SeriesPoint[];
  readonly peakBytes: number;
  readonly peakTimeNs: number;
}

export interface HeapChartInput {
  readonly series: readonly SeriesPoint[];
  readonly peakBytes: number;
  readonly peakTimeNs: number;
  readonly mapped?: MappedChartInput;
  /** Right end of the time axis, ns. */
  readonly endTimeNs: number;
  readonly title?: string;
}

export interface ChartGeometry {
  readonly width: number;
  readonly height: number;
  readonly left: number;
  readonly top: number;
  readonly plotWidth: number;
  readonly plotHeight: number;
  /** Axis ranges: time 0..tMax ns, bytes 0..yMax. */
  readonly tMax: number;
  readonly yMax: number;
  x(timeNs: number): number;
  y(bytes: number): number;
}

export function chartGeometry(input: HeapChartInput, width = 960, height = 420): ChartGeometry {
  const left = 90;
  const right = 44;
  const top = input.mapped !== undefined ? 70 : 48; // room for the legend of two lines
  const bottom = 52;
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  const tMax = timeAxis(Math.max(input.endTimeNs, 1)).ticks.at(-1)!;
  const yMax = byteAxis(chartTopBytes(input)).ticks.at(-1)!;
  return {
    width,
    height,
    left,
    top,
    plotWidth,
    plotHeight,
    tMax,
    yMax,
    x: (t) => round(left + (t / tMax) * plotWidth),
    y: (b) => round(top + plotHeight - (b / yMax) * plotHeight),
  };
}

/** The largest value the chart must show. */
function chartTopBytes(input: HeapChartInput): number {
  return Math.max(input.peakBytes, input.mapped?.peakBytes ?? 0, 1);
}

/** Points of a step line through each bucket's maximum (from its start to the next bucket's). */
function stepPoints(g: ChartGeometry, series: readonly SeriesPoint[], endTimeNs: number): string[] {
  const pts: string[] = [`${g.x(series[0]!.time)},${g.y(0)}`];
  series.forEach((p, i) => {
    const next = series[i + 1];
    const y = g.y(p.max);
    pts.push(`${g.x(p.time)},${y}`);
    if (next !== undefined) pts.push(`${g.x(next.time)},${y}`, `${g.x(next.time)},${g.y(p.last)}`);
  });
  const last = series.at(-1)!;
  pts.push(`${g.x(endTimeNs)},${g.y(last.last)}`, `${g.x(endTimeNs)},${g.y(0)}`);
  return pts;
}

function round(v: number): number {
  return Math.round(v * 100) / 100;
}

/** The chart as a standalone SVG document. */
export function heapChartSvg(input: HeapChartInput): string {
  const g = chartGeometry(input);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" id="heap-chart" width="${g.width}" height="${g.height}" viewBox="0 0 ${g.width} ${g.height}" font-family="${FONT_FAMILY}, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${g.width}" height="${g.height}" fill="#ffffff"/>`);
  out.push(
    `<text x="${g.left}" y="24" font-size="15" font-weight="bold" fill="#222">${xmlText(input.title ?? 'Heap consumption over time')}</text>`,
  );
  // grid and axes
  const bytes = byteAxis(chartTopBytes(input));
  bytes.ticks.forEach((b, i) => {
    const y = g.y(b);
    out.push(
      `<line x1="${g.left}" y1="${y}" x2="${g.left + g.plotWidth}" y2="${y}" stroke="#e4e4e4"/>`,
      `<text class="y-tick" x="${g.left - 8}" y="${y + 4}" text-anchor="end" fill="#444">${xmlText(bytes.labels[i]!)}</text>`,
    );
  });
  const times = timeAxis(Math.max(input.endTimeNs, 1));
  times.ticks.forEach((t, i) => {
    const x = g.x(t);
    out.push(
      `<line x1="${x}" y1="${g.top + g.plotHeight}" x2="${x}" y2="${g.top + g.plotHeight + 5}" stroke="#444"/>`,
      `<text class="x-tick" x="${x}" y="${g.top + g.plotHeight + 20}" text-anchor="middle" fill="#444">${xmlText(times.labels[i]!)}</text>`,
    );
  });
  out.push(
    `<rect id="plot-area" x="${g.left}" y="${g.top}" width="${g.plotWidth}" height="${g.plotHeight}" fill="none" stroke="#888" data-t-max="${g.tMax}" data-y-max="${g.yMax}"/>`,
    `<text x="${g.left + g.plotWidth / 2}" y="${g.height - 10}" text-anchor="middle" fill="#222">time since the process started</text>`,
    `<text transform="translate(16 ${g.top + g.plotHeight / 2}) rotate(-90)" text-anchor="middle" fill="#222">${input.mapped !== undefined ? 'bytes' : 'live heap'}</text>`,
  );
  // the series: a step line through each bucket's maximum, filled below
  if (input.series.length > 0) {
    const pts = stepPoints(g, input.series, input.endTimeNs);
    out.push(
      `<polygon id="heap-area" points="${pts.join(' ')}" fill="#4a90d9" fill-opacity="0.35" stroke="none"/>`,
      `<polyline id="heap-line" points="${pts.slice(1, -1).join(' ')}" fill="none" stroke="#1f5fa8" stroke-width="1.5"/>`,
    );
  }
  if (input.mapped !== undefined) out.push(...mappedLayer(g, input.mapped, input.endTimeNs));
  // the peak
  const px = g.x(input.peakTimeNs);
  const py = g.y(input.peakBytes);
  const label = `peak ${formatBytes(input.peakBytes)} at ${formatDuration(input.peakTimeNs)}`;
  const anchor = px > g.left + g.plotWidth * 0.7 ? 'end' : 'start';
  const dx = anchor === 'end' ? -10 : 10;
  out.push(
    `<line x1="${px}" y1="${py}" x2="${px}" y2="${g.top + g.plotHeight}" stroke="#c0392b" stroke-dasharray="4 3"/>`,
    `<circle id="peak-marker" cx="${px}" cy="${py}" r="5" fill="#c0392b" data-time-ns="${input.peakTimeNs}" data-bytes="${input.peakBytes}"/>`,
    `<rect x="${anchor === 'end' ? px + dx - label.length * 7.1 - 4 : px + dx - 4}" y="${Math.max(g.top + 14, py + 4) - 13}" width="${label.length * 7.1 + 8}" height="18" fill="#ffffff" fill-opacity="0.75"/>`,
    `<text id="peak-label" x="${px + dx}" y="${Math.max(g.top + 14, py + 4)}" text-anchor="${anchor}" fill="#c0392b" font-weight="bold">${xmlText(label)}</text>`,
  );
  out.push('</svg>');
  return out.join('\n');
}

/** The mapped-memory line, its peak and a legend naming both lines. */
function mappedLayer(g: ChartGeometry, mapped: MappedChartInput, endTimeNs: number): string[] {
  const out: string[] = [];
  const colour = '#d35400';
  if (mapped.series.length > 0) {
    const pts = stepPoints(g, mapped.series, endTimeNs);
    out.push(
      `<polyline id="mapped-line" points="${pts.slice(1, -1).join(' ')}" fill="none" stroke="${colour}" stroke-width="1.5" stroke-dasharray="6 3"/>`,
    );
  }
  const mx = g.x(mapped.peakTimeNs);
  const my = g.y(mapped.peakBytes);
  out.push(
    `<circle id="mapped-peak-marker" cx="${mx}" cy="${my}" r="4" fill="${colour}" data-time-ns="${mapped.peakTimeNs}" data-bytes="${mapped.peakBytes}"/>`,
  );
  // the legend, between the title and the plot
  const lx = g.left;
  const ly = g.top - 12;
  const mx2 = lx + 230;
  out.push(
    `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 24}" y2="${ly - 4}" stroke="#1f5fa8" stroke-width="3"/>`,
    `<text x="${lx + 32}" y="${ly}" fill="#222">live heap (malloc family)</text>`,
    `<line x1="${mx2}" y1="${ly - 4}" x2="${mx2 + 24}" y2="${ly - 4}" stroke="${colour}" stroke-width="2" stroke-dasharray="6 3"/>`,
    `<text id="mapped-legend" x="${mx2 + 32}" y="${ly}" fill="#222">memory mapped (VM events), peak ${xmlText(formatBytes(mapped.peakBytes))} at ${xmlText(formatDuration(mapped.peakTimeNs))}</text>`,
  );
  return out;
}

/*
 * The renderers are loaded on first use: they take ~140 ms to load, which `heaphook report
 * --json` (no files) should not pay.
 */
function renderers(): {
  Resvg: typeof ResvgModule.Resvg;
  PDFDocument: typeof PDFKitDocument;
  SVGtoPDF: typeof SVGtoPDFFunction;
} {
  const { Resvg } = require('@resvg/resvg-js') as typeof ResvgModule;
  const PDFDocument = require('pdfkit') as typeof PDFKitDocument;
  const SVGtoPDF = require('svg-to-pdfkit') as typeof SVGtoPDFFunction;
  return { Resvg, PDFDocument, SVGtoPDF };
}

/** Any SVG of the report as PNG (resvg, with the shipped font only). */
export function svgToPng(svg: string, scale = 1): Buffer {
  const { Resvg } = renderers();
  const resvg = new Resvg(svg, {
    font: { fontFiles: [FONT_FILE], loadSystemFonts: false, defaultFontFamily: FONT_FAMILY },
    fitTo: { mode: 'zoom', value: scale },
    background: '#ffffff',
  });
  return resvg.render().asPng();
}

/** An SVG as a one-page PDF of the same size (points), the font embedded. */
export function svgToPdf(svg: string, width: number, height: number): Promise<Buffer> {
  const { PDFDocument, SVGtoPDF } = renderers();
  return new Promise((resolve, reject) => {
    const doc = new PDFDocument({
      size: [width, height],
      margin: 0,
      info: { Title: 'heaphook report' },
    });
    const chunks: Buffer[] = [];
    doc.on('data', (c: Buffer) => chunks.push(c));
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
    doc.registerFont(FONT_FAMILY, FONT_FILE);
    doc.font(FONT_FAMILY);
    SVGtoPDF(doc, svg, 0, 0, { width, height, assumePt: true, fontCallback: () => FONT_FAMILY });
    doc.end();
  });
}
