/** A small horizontal bar chart (SVG) for the histograms of the HTML report. */
import { xmlText } from '@heaphook/core';

import { FONT_FAMILY } from './chart.js';
import { formatCount } from './format.js';

export function barChartSvg(
  rows: readonly { label: string; value: number }[],
  options: { id?: string; title?: string; width?: number } = {},
): string {
  const width = options.width ?? 520;
  const row = 16;
  const labelWidth = 150;
  const countWidth = 80;
  const top = options.title !== undefined ? 24 : 4;
  const height = top + rows.length * row + 4;
  const max = Math.max(1, ...rows.map((r) => r.value));
  const barSpace = width - labelWidth - countWidth - 10;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg"${options.id !== undefined ? ` id="${options.id}"` : ''} class="bars" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${FONT_FAMILY}, sans-serif" font-size="11">`,
  ];
  if (options.title !== undefined) {
    out.push(`<text x="0" y="14" font-weight="bold" fill="#222">${xmlText(options.title)}</text>`);
  }
  rows.forEach((r, i) => {
    const y = top + i * row;
    const w = Math.max(r.value > 0 ? 1 : 0, (r.value / max) * barSpace);
    out.push(
      `<text x="${labelWidth - 6}" y="${y + 12}" text-anchor="end" fill="#444">${xmlText(r.label)}</text>`,
      `<rect x="${labelWidth}" y="${y + 2}" width="${w.toFixed(2)}" height="${row - 4}" fill="#4a90d9"/>`,
      `<text x="${labelWidth + w + 4}" y="${y + 12}" fill="#444">${xmlText(formatCount(r.value))}</text>`,
    );
  });
  out.push('</svg>');
  return out.join('\n');
}
