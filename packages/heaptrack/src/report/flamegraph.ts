/**
 * A flame graph of allocations: each allocation stack contributes its bytes (or counts) to
 * every frame on it; the outermost frame at the bottom, callees above, widths proportional
 * to the value. Frames narrower than a pixel are folded into their parent.
 */
import { xmlText } from '@heaphook/core';

import { formatBytes, formatCount } from './format.js';
import { FONT_FAMILY } from './chart.js';

export interface FlameInput {
  /** Function names of the stack, innermost first. */
  readonly functions: readonly string[];
  readonly value: number;
}

interface Node {
  readonly name: string;
  value: number;
  readonly children: Map<string, Node>;
}

export function flameTree(stacks: readonly FlameInput[]): Node {
  const root: Node = { name: 'all', value: 0, children: new Map() };
  for (const s of stacks) {
    if (s.value <= 0) continue;
    root.value += s.value;
    let node = root;
    for (let i = s.functions.length - 1; i >= 0; i--) {
      const name = s.functions[i]!;
      let child = node.children.get(name);
      if (child === undefined)
        node.children.set(name, (child = { name, value: 0, children: new Map() }));
      child.value += s.value;
      node = child;
    }
  }
  return root;
}

function color(name: string): string {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  const r = 205 + (h % 50);
  const g = 80 + ((h >>> 8) % 140);
  const b = 30 + ((h >>> 16) % 50);
  return `rgb(${r},${g},${b})`;
}

export interface FlameOptions {
  readonly title?: string;
  /** How values read in the tooltips. */
  readonly unit?: 'bytes' | 'count';
  readonly width?: number;
}

export function flameGraphSvg(stacks: readonly FlameInput[], options: FlameOptions = {}): string {
  const width = options.width ?? 1200;
  const row = 17;
  const pad = 10;
  const root = flameTree(stacks);
  const fmt = (v: number): string =>
    options.unit === 'count' ? `${formatCount(v)} allocations` : formatBytes(v);
  const rects: string[] = [];
  let depthMax = 0;
  const scale = root.value > 0 ? (width - 2 * pad) / root.value : 0;
  const place = (node: Node, x: number, depth: number): void => {
    const w = node.value * scale;
    if (w < 1 && depth > 0) return;
    depthMax = Math.max(depthMax, depth);
    rects.push(frameRect(node, x, depth, w));
    let cx = x;
    const children = [...node.children.values()].sort((a, b) => a.name.localeCompare(b.name));
    for (const child of children) {
      place(child, cx, depth + 1);
      cx += child.value * scale;
    }
  };
  const frameRect = (node: Node, x: number, depth: number, w: number): string => {
    const pct = root.value > 0 ? ((node.value / root.value) * 100).toFixed(2) : '0';
    const label = w > 30 ? truncate(node.name, Math.floor((w - 6) / 6.6)) : '';
    return (
      `<g class="frame" data-depth="${depth}"><title>${nameText(`${node.name}: ${fmt(node.value)} (${pct} %)`)}</title>` +
      `<rect x="${x.toFixed(2)}" y="{Y${depth}}" width="${w.toFixed(2)}" height="${row - 1}" fill="${depth === 0 ? '#bbbbbb' : color(node.name)}" rx="2"/>` +
      (label !== ''
        ? `<text x="${(x + 3).toFixed(2)}" y="{T${depth}}">${nameText(label)}</text>`
        : '') +
      '</g>'
    );
  };
  place(root, pad, 0);
  const top = 36;
  const height = top + (depthMax + 1) * row + pad;
  const body = rects
    .join('\n')
    .replace(/\{Y(\d+)\}/g, (_, d: string) => String(height - pad - (Number(d) + 1) * row))
    .replace(/\{T(\d+)\}/g, (_, d: string) => String(height - pad - (Number(d) + 1) * row + 12));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" id="flamegraph" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${FONT_FAMILY}, sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#fffdf8"/>`,
    `<text x="${pad}" y="22" font-size="15" font-weight="bold" fill="#222">${xmlText(options.title ?? 'Allocations by call stack')} — ${xmlText(fmt(root.value))}</text>`,
    body,
    '</svg>',
  ].join('\n');
}

/** A frame's name in the SVG: xmlText, and `{` as a reference (the rows' `{Y3}` placeholders
 * are filled in after the names are written). */
function nameText(name: string): string {
  return xmlText(name).replace(/\{/g, '&#123;');
}

function truncate(s: string, n: number): string {
  if (n < 3) return '';
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}
