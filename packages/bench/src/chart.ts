/**
 * latest.svg, drawn by hand (no chart library): one picture with
 *   1. each workload's main figure as a ratio to glibc, bars on a log scale centred on 1×
 *      (left is better), whiskers from the fastest to the slowest run, "failed" in red;
 *   2. the real-time latency percentiles per allocator (log scale);
 *   3. the tracers' slowdown, when a tracer ran.
 * renderPng() turns it into latest.png with @resvg/resvg-js when that package loads.
 */
import { formatMetric, formatRatio, metricLabel } from './format.js';
import type { Results } from './results.js';
import type { Cell } from './types.js';

const PALETTE = [
  '#4e79a7',
  '#f28e2b',
  '#e15759',
  '#76b7b2',
  '#59a14f',
  '#edc948',
  '#b07aa1',
  '#ff9da7',
  '#9c755f',
  '#bab0ac',
];
const FONT = 'DejaVu Sans, Helvetica, Arial, sans-serif';
const W = 980;
const LEFT = 190;
const RIGHT = 90;

function esc(s: string): string {
  return s
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

function text(
  x: number,
  y: number,
  s: string,
  opts: { size?: number; anchor?: string; weight?: string; fill?: string } = {},
): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" font-size="${opts.size ?? 11}" text-anchor="${opts.anchor ?? 'start'}"${opts.weight ? ` font-weight="${opts.weight}"` : ''} fill="${opts.fill ?? '#222'}">${esc(s)}</text>`;
}

function cellOf(cells: readonly Cell[], w: string, a: string): Cell | undefined {
  return cells.find((c) => c.workload === w && c.allocator === a);
}

/** Log scale mapping [lo, hi] onto [x0, x1]. */
function logScale(lo: number, hi: number, x0: number, x1: number): (v: number) => number {
  const a = Math.log(lo);
  const b = Math.log(hi);
  return (v: number) => x0 + ((Math.log(Math.min(hi, Math.max(lo, v))) - a) / (b - a)) * (x1 - x0);
}

function ticksFor(lo: number, hi: number): number[] {
  const cands = [1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8, 16, 32, 64, 128];
  return cands.filter((t) => t >= lo * 0.999 && t <= hi * 1.001);
}

function tickLabel(t: number): string {
  return t >= 1 ? `${t}×` : `1/${Math.round(1 / t)}×`;
}

export function renderSvg(r: Results): string {
  const parts: string[] = [];
  let y = 0;
  const cols = r.allocators.filter((a) => a.status === 'ready').map((a) => a.name);
  const color = new Map(cols.map((a, i) => [a, PALETTE[i % PALETTE.length]!]));
  const others = cols.filter((a) => a !== 'glibc');
  const workloads = r.workloads.filter((w) => w.status === 'ready');

  y += 28;
  parts.push(
    text(
      16,
      y,
      `heaphook bench — ${r.date.slice(0, 10)} — ${r.machine.cpu_model}, ${r.machine.logical_cpus} CPUs — ${r.options.profile} run, median of ${r.options.runs}`,
      { size: 15, weight: 'bold' },
    ),
  );
  y += 22;
  parts.push(
    text(
      16,
      y,
      "Each workload's main figure under each allocator, relative to glibc (log scale; left of 1× is better). Whiskers: fastest to slowest run.",
      { size: 11, fill: '#555' },
    ),
  );
  y += 18;
  // legend
  let lx = LEFT;
  for (const a of others) {
    parts.push(`<rect x="${lx}" y="${y - 9}" width="10" height="10" fill="${color.get(a)}"/>`);
    parts.push(text(lx + 14, y, a));
    lx += 24 + a.length * 7;
  }
  y += 12;

  // ---- panel 1: ratios ----
  let lo = 0.5;
  let hi = 2;
  for (const w of workloads) {
    for (const a of others) {
      const c = cellOf(r.cells, w.name, a);
      const base = cellOf(r.cells, w.name, 'glibc');
      const ratio = c?.ratios[w.primary];
      const bm = base?.metrics[w.primary]?.median;
      if (ratio === undefined || !bm) continue;
      const m = c!.metrics[w.primary]!;
      lo = Math.min(lo, ratio, m.min / bm);
      hi = Math.max(hi, ratio, m.max / bm);
    }
  }
  lo = Math.max(1 / 64, 2 ** Math.floor(Math.log2(lo)));
  hi = Math.min(128, 2 ** Math.ceil(Math.log2(hi)));
  const x = logScale(lo, hi, LEFT, W - RIGHT);
  const bar = 11;
  const gap = 2;
  const groupH = Math.max(1, others.length) * (bar + gap) + 14;
  const top = y;
  const panelH = workloads.length * groupH;
  for (const t of ticksFor(lo, hi)) {
    const tx = x(t);
    parts.push(
      `<line x1="${tx.toFixed(1)}" y1="${top}" x2="${tx.toFixed(1)}" y2="${top + panelH}" stroke="${t === 1 ? '#333' : '#ddd'}" stroke-width="${t === 1 ? 1.2 : 1}"/>`,
    );
    parts.push(
      text(tx, top + panelH + 14, tickLabel(t), { anchor: 'middle', fill: '#555', size: 10 }),
    );
  }
  workloads.forEach((w, i) => {
    const gy = top + i * groupH;
    if (i % 2 === 1)
      parts.push(`<rect x="4" y="${gy}" width="${W - 8}" height="${groupH}" fill="#f6f6f6"/>`);
    const base = cellOf(r.cells, w.name, 'glibc');
    const bm = base?.metrics[w.primary]?.median;
    parts.push(text(12, gy + 16, w.name, { weight: 'bold' }));
    parts.push(text(12, gy + 30, metricLabel(w.primary), { size: 10, fill: '#555' }));
    parts.push(
      text(
        12,
        gy + 43,
        base?.status === 'ok' && bm !== undefined
          ? `glibc: ${formatMetric(w.primary, bm)}`
          : `glibc: ${base?.status ?? '–'}`,
        { size: 10, fill: '#555' },
      ),
    );
    others.forEach((a, j) => {
      const by = gy + 7 + j * (bar + gap);
      const c = cellOf(r.cells, w.name, a);
      if (!c || c.status === 'skipped') return;
      if (c.status === 'failed') {
        parts.push(
          text(x(1) + 4, by + bar - 2, `${a}: failed`, { fill: '#c00', size: 10, weight: 'bold' }),
        );
        return;
      }
      const ratio = c.ratios[w.primary];
      if (ratio === undefined || !bm) return;
      const x0 = x(1);
      const x1 = x(ratio);
      parts.push(
        `<rect x="${Math.min(x0, x1).toFixed(1)}" y="${by}" width="${Math.max(1, Math.abs(x1 - x0)).toFixed(1)}" height="${bar}" fill="${color.get(a)}"><title>${esc(`${a} on ${w.name}: ${formatRatio(ratio)} (${formatMetric(w.primary, c.metrics[w.primary]!.median)})`)}</title></rect>`,
      );
      const m = c.metrics[w.primary]!;
      if (m.n > 1) {
        const wx0 = x(m.min / bm);
        const wx1 = x(m.max / bm);
        parts.push(
          `<line x1="${wx0.toFixed(1)}" y1="${by + bar / 2}" x2="${wx1.toFixed(1)}" y2="${by + bar / 2}" stroke="#222" stroke-width="1"/>`,
        );
        parts.push(
          `<line x1="${wx0.toFixed(1)}" y1="${by + 2}" x2="${wx0.toFixed(1)}" y2="${by + bar - 2}" stroke="#222"/>`,
        );
        parts.push(
          `<line x1="${wx1.toFixed(1)}" y1="${by + 2}" x2="${wx1.toFixed(1)}" y2="${by + bar - 2}" stroke="#222"/>`,
        );
      }
      const labelX =
        ratio >= 1
          ? Math.max(x1, m.n > 1 ? x(m.max / bm) : x1) + 4
          : Math.min(x1, m.n > 1 ? x(m.min / bm) : x1) - 4;
      parts.push(
        text(labelX, by + bar - 2, formatRatio(ratio), {
          size: 9.5,
          anchor: ratio >= 1 ? 'start' : 'end',
          fill: '#333',
        }),
      );
    });
  });
  y = top + panelH + 34;

  // ---- panel 2: latency percentiles ----
  const lat = workloads.find((w) => w.base === 'latency');
  if (lat) {
    const keys: Array<[string, string]> = [
      ['reported.p50_ns', 'p50'],
      ['reported.p99_ns', 'p99'],
      ['reported.p99_9_ns', 'p99.9'],
      ['reported.p99_99_ns', 'p99.99'],
      ['reported.max_ns', 'max'],
    ];
    parts.push(
      text(
        16,
        y,
        `Real-time latency per malloc/free call (${lat.name}), log scale: lower is better`,
        { size: 13, weight: 'bold' },
      ),
    );
    y += 10;
    const h = 220;
    const ptop = y + 8;
    let vlo = Infinity;
    let vhi = 0;
    for (const a of cols) {
      const c = cellOf(r.cells, lat.name, a);
      if (c?.status !== 'ok') continue;
      for (const [k] of keys) {
        const v = c.metrics[k]?.median;
        if (v !== undefined && v > 0) {
          vlo = Math.min(vlo, v);
          vhi = Math.max(vhi, v);
        }
      }
    }
    if (vhi > 0) {
      vlo = 10 ** Math.floor(Math.log10(vlo));
      vhi = 10 ** Math.ceil(Math.log10(vhi));
      const yScale = (v: number) =>
        ptop +
        h -
        ((Math.log10(Math.max(vlo, v)) - Math.log10(vlo)) / (Math.log10(vhi) - Math.log10(vlo))) *
          h;
      const px0 = LEFT;
      const px1 = W - RIGHT - 120;
      const xAt = (i: number) => px0 + (i / (keys.length - 1)) * (px1 - px0);
      for (let d = vlo; d <= vhi * 1.001; d *= 10) {
        const yy = yScale(d);
        parts.push(
          `<line x1="${px0}" y1="${yy.toFixed(1)}" x2="${px1}" y2="${yy.toFixed(1)}" stroke="#ddd"/>`,
        );
        parts.push(
          text(px0 - 6, yy + 4, formatMetric('x_ns', d), { anchor: 'end', size: 10, fill: '#555' }),
        );
      }
      keys.forEach(([, label], i) =>
        parts.push(text(xAt(i), ptop + h + 16, label, { anchor: 'middle', size: 10.5 })),
      );
      let ly = ptop + 6;
      for (const a of cols) {
        const c = cellOf(r.cells, lat.name, a);
        const col = color.get(a) ?? '#000';
        if (c?.status === 'failed') {
          parts.push(text(px1 + 16, ly, `${a}: failed`, { fill: '#c00', size: 10.5 }));
          ly += 15;
          continue;
        }
        if (c?.status !== 'ok') continue;
        const pts = keys.map(([k], i) => [xAt(i), yScale(c.metrics[k]?.median ?? vlo)] as const);
        parts.push(
          `<polyline fill="none" stroke="${a === 'glibc' ? '#333' : col}" stroke-width="${a === 'glibc' ? 2 : 1.6}"${a === 'glibc' ? ' stroke-dasharray="5,3"' : ''} points="${pts.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(' ')}"/>`,
        );
        for (const [px, py] of pts)
          parts.push(
            `<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="2.6" fill="${a === 'glibc' ? '#333' : col}"/>`,
          );
        parts.push(
          `<line x1="${px1 + 16}" y1="${ly - 4}" x2="${px1 + 34}" y2="${ly - 4}" stroke="${a === 'glibc' ? '#333' : col}" stroke-width="2"${a === 'glibc' ? ' stroke-dasharray="5,3"' : ''}/>`,
        );
        parts.push(text(px1 + 38, ly, a, { size: 10.5 }));
        ly += 15;
      }
    }
    y = ptop + h + 40;
  }

  // ---- panel 3: tracers ----
  const tracers = r.tracers.filter((t) => t.status === 'ready');
  if (tracers.length > 0) {
    parts.push(
      text(16, y, 'Heap tracer overhead: wall-time slowdown against the untraced run (log scale)', {
        size: 13,
        weight: 'bold',
      }),
    );
    y += 12;
    let thi = 2;
    for (const w of workloads)
      for (const t of tracers)
        thi = Math.max(thi, cellOf(r.cells, w.name, t.name)?.ratios.wall_s ?? 1);
    thi = Math.min(1024, 2 ** Math.ceil(Math.log2(thi)));
    const tx = logScale(1, thi, LEFT, W - RIGHT);
    const tg = tracers.length * (bar + gap) + 8;
    const ttop = y;
    const th = workloads.length * tg;
    for (let t = 1; t <= thi; t *= 2) {
      parts.push(
        `<line x1="${tx(t).toFixed(1)}" y1="${ttop}" x2="${tx(t).toFixed(1)}" y2="${ttop + th}" stroke="${t === 1 ? '#333' : '#ddd'}"/>`,
      );
      parts.push(
        text(tx(t), ttop + th + 14, `${t}×`, { anchor: 'middle', size: 10, fill: '#555' }),
      );
    }
    const tcolor = ['#8c564b', '#17becf', '#bcbd22'];
    workloads.forEach((w, i) => {
      const gy = ttop + i * tg;
      parts.push(text(12, gy + 12, w.name, { size: 10.5 }));
      tracers.forEach((t, j) => {
        const c = cellOf(r.cells, w.name, t.name);
        const by = gy + 3 + j * (bar + gap);
        if (c?.status === 'failed') {
          parts.push(
            text(tx(1) + 4, by + bar - 2, `${t.name}: failed`, { fill: '#c00', size: 10 }),
          );
          return;
        }
        const ratio = c?.ratios.wall_s;
        if (ratio === undefined) return;
        parts.push(
          `<rect x="${tx(1)}" y="${by}" width="${Math.max(1, tx(ratio) - tx(1)).toFixed(1)}" height="${bar}" fill="${tcolor[j % tcolor.length]}"/>`,
        );
        parts.push(
          text(tx(ratio) + 4, by + bar - 2, `${t.name} ${formatRatio(ratio)}`, { size: 9.5 }),
        );
      });
    });
    y = ttop + th + 34;
  }

  const skipped = [...r.allocators, ...r.tracers].filter((a) => a.status === 'skipped');
  if (skipped.length > 0) {
    parts.push(
      text(
        16,
        y,
        `Not measured: ${skipped.map((a) => `${a.name} (${a.reason ?? 'skipped'})`).join('; ')}`,
        { size: 10, fill: '#555' },
      ),
    );
    y += 16;
  }
  y += 8;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${Math.ceil(y)}" viewBox="0 0 ${W} ${Math.ceil(y)}" font-family="${FONT}">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}

/** latest.png from the SVG, or null with the reason when @resvg/resvg-js is not usable here. */
export async function renderPng(svg: string): Promise<{ png: Buffer } | { skipped: string }> {
  try {
    const mod = (await import('@resvg/resvg-js')) as typeof import('@resvg/resvg-js');
    const resvg = new mod.Resvg(svg, {
      background: '#ffffff',
      fitTo: { mode: 'zoom', value: 1.5 },
      font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' },
    });
    return { png: Buffer.from(resvg.render().asPng()) };
  } catch (e) {
    return {
      skipped: `PNG not written: @resvg/resvg-js unavailable (${(e as Error).message.split('\n')[0]})`,
    };
  }
}
