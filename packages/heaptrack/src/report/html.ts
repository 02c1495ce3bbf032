/**
 * The self-contained HTML report: one file, no network. Its tables and inline SVG charts need
 * no script (noscript readers, grep); with page data it also holds the interactive views
 * (page/script.ts over d3 and d3-flame-graph, inlined), which take the static charts' place
 * (those stay in <noscript>).
 */
import { htmlText as esc } from '@heaphook/core';

import { barChartSvg } from './bars.js';
import { formatBytes, formatCount, formatDuration } from './format.js';
import type { LatencyHistogram } from './histogram.js';
import type { JsonSite, ReportJson } from './json.js';
import type { Op } from '../decode/records.js';
import { abnormalEndLine, leakedLabel, realtimeFrame } from './text.js';
import type { ReportDiff, SiteDiff } from './diff.js';
import { pageLibraries } from './page/assets.js';
import { pageDataScript, type PageData } from './page/data.js';
import { PAGE_SCRIPT } from './page/script.js';

export interface HtmlParts {
  readonly json: ReportJson;
  /** The heap chart and the flame graph, as SVG documents. */
  readonly heapSvg: string;
  readonly flameSvg: string;
  readonly latency: ReadonlyMap<Op, LatencyHistogram>;
  /** The interactive views' data; without it the page has no script. */
  readonly page?: PageData;
  /** With report --diff: the comparison with the base run (page.runs[1]). */
  readonly diff?: ReportDiff;
}

const CSS = `
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; margin: 16px 24px; color: #222; background: #fafafa; }
h1 { font-size: 20px; margin: 0 0 4px; overflow-wrap: anywhere; max-height: 3.9em; overflow: hidden; }
h1, p, td, th, summary { overflow-wrap: anywhere; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #666; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; background: #fff; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.error { background: #fdecea; border: 1px solid #e0a39b; padding: 8px 12px; color: #8a1f11; }
details summary { cursor: pointer; font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
pre.stack { margin: 4px 0; font-size: 11px; white-space: pre-wrap; }
.figure { overflow-x: auto; background: #fff; border: 1px solid #ddd; padding: 6px; display: inline-block; max-width: 100%; }
.row { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
#explore .controls { display: flex; flex-wrap: wrap; gap: 12px; align-items: center; font-size: 13px; margin: 8px 0; }
#headline { display: flex; flex-wrap: wrap; gap: 8px 24px; margin: 8px 0 0; font-size: 14px; }
#headline b { font-size: 17px; }
#explore-title { margin-top: 12px; }
#explore-heap svg { display: block; background: #fff; border: 1px solid #ddd; box-sizing: border-box; font-size: 11px; }
#explore-heap .base-line { fill: none; stroke: #444; stroke-width: 1.5; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 18px; font-size: 12px; color: #444; margin: 4px 0; }
.swatch { display: inline-block; width: 22px; height: 11px; margin-right: 5px; vertical-align: -1px; border: 1px solid #bbb; box-sizing: border-box; }
.swatch.heap { background: #4c78a8; opacity: 0.8; } .swatch.mapped { border: none; border-top: 2px dashed #e45756; height: 2px; vertical-align: 3px; }
.swatch.peak { border: none; border-left: 2px dashed #d62728; width: 2px; } .swatch.base { border: none; border-top: 2px solid #444; height: 2px; vertical-align: 3px; }
.swatch.grew { background: rgb(255,94,94); } .swatch.grew-less { background: rgb(255,176,176); } .swatch.shrank { background: rgb(94,94,255); } .swatch.same { background: rgb(215,215,215); }
#explore-flame { max-height: 70vh; overflow-x: hidden; overflow-y: auto; scrollbar-gutter: stable; }
#explore-flame svg { display: block; }
.d3-flame-graph rect { stroke: #eee; fill-opacity: 0.8; } .d3-flame-graph rect:hover { stroke: #474747; stroke-width: 0.5; cursor: pointer; }
.d3-flame-graph-label { white-space: nowrap; text-overflow: ellipsis; overflow: hidden; font-size: 12px; margin: 0 4px; line-height: 1.5; padding: 0; color: #000; text-align: left; }
.d3-flame-graph .fade { opacity: 0.6 !important; }
#explore-heap .heap-area { fill: #4c78a8; opacity: 0.8; }
#explore-heap .mapped-line { fill: none; stroke: #e45756; stroke-width: 1.5; stroke-dasharray: 5 3; }
#explore-heap .peak-mark { stroke: #d62728; stroke-dasharray: 2 2; }
#explore-flame { background: #fff; border: 1px solid #ddd; min-height: 60px; }
#explore .controls { margin: 4px 0; }
#flame-total { font-size: 13px; margin: 6px 0; }
table.tree td.fn { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; cursor: pointer; white-space: pre; max-width: 640px; overflow: hidden; text-overflow: ellipsis; }
table.tree tr:hover { background: #eef3fa; }
.trees { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.trees > div { min-width: 420px; max-width: 100%; overflow-x: auto; }
#selected { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
`;

function num(v: number): string {
  return `<td class="num">${esc(formatCount(v))}</td>`;
}

function stackCell(stack: readonly string[]): string {
  if (stack.length === 0) return '<td>(no stack recorded)</td>';
  return `<td><details><summary>${esc(stack[0]!.replace(/ \[[^\]]*\]$/, ''))}</summary><pre class="stack">${stack.map(esc).join('\n')}</pre></details></td>`;
}

function sitesTable(id: string, sites: readonly JsonSite[]): string {
  const rows = sites.map(
    (s, i) =>
      `<tr><td class="num">${i + 1}</td><td class="num">${esc(formatBytes(s.peakBytes))}</td>${num(s.allocations)}<td class="num">${esc(formatBytes(s.bytes))}</td>${num(s.temporary)}<td class="num">${esc(formatBytes(s.liveBytes))}</td>${stackCell(s.stack)}</tr>`,
  );
  return `<table id="${id}" class="sites"><thead><tr><th class="num">#</th><th class="num">at peak</th><th class="num">allocations</th><th class="num">allocated</th><th class="num">temporary</th><th class="num">live at end</th><th>stack (innermost first)</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function inline(svg: string): string {
  return svg.replace(/^<\?xml[^>]*>\s*/, '');
}

/** Summary rows of mapped memory (VM events), when the log has them. */
function mappedRows(j: ReportJson): [string, string][] {
  const m = j.mappedMemory;
  if (m === null) return [];
  return [
    [
      'peak mapped memory',
      `${formatBytes(m.peakBytes)} (${formatCount(m.peakBytes)} bytes) at ${formatDuration(m.peakTimeNs)}`,
    ],
    [
      'mapped / unmapped (VM events)',
      `${formatCount(m.mappedEvents)} (${formatBytes(m.mappedBytes)}) / ${formatCount(m.unmappedEvents)} (${formatBytes(m.unmappedBytes)}); ${formatBytes(m.finalBytes)} still mapped at the end`,
    ],
  ];
}

/** The stacks that mapped the most memory, when the log has VM events. */
function mappedSection(j: ReportJson): string {
  const m = j.mappedMemory;
  if (m === null) return '';
  const rows = m.topSites.map(
    (s) =>
      `<tr>${num(s.mappings)}<td class="num">${esc(formatBytes(s.bytes))}</td>${stackCell(s.stack)}</tr>`,
  );
  return `<h2>Memory mapped by the program</h2>
<p>The dashed line above: address ranges the program mapped (mmap, mremap, shmat, brk) and had not unmapped (munmap, madvise DONTNEED/FREE, ...) since tracing began, from ucm-hooks' VM events. It includes memory a malloc tracer never sees, such as python's arenas or a backend's pool.</p>
<table id="mapped-sites"><thead><tr><th class="num">mappings</th><th class="num">bytes mapped</th><th>stack (innermost first)</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

/** The calls real-time threads must not make, when rtcheck's guard ran under the tracer. */
function realtimeSection(j: ReportJson): string {
  const v = j.realtimeViolations;
  if (v.length === 0) return '';
  const calls = v.reduce((n, x) => n + x.count, 0);
  const rows = v.map((x) => {
    const frames = x.frames.map(realtimeFrame);
    const priority = x.policy === 'SCHED_FIFO' || x.policy === 'SCHED_RR' ? ` ${x.priority}` : '';
    return `<tr><td>${esc(x.call)}</td>${num(x.count)}<td>${esc(`"${x.thread}" (tid ${x.tid})`)}</td><td>${esc(`${x.policy}${priority}`)}</td>${stackCell(frames)}</tr>`;
  });
  return `<h2 id="realtime-title">Real-time violations</h2>
<p>${esc(formatCount(calls))} call${calls === 1 ? '' : 's'} at ${esc(formatCount(v.length))} call site${v.length === 1 ? '' : 's'} that a thread made in a real-time context (a SCHED_FIFO, SCHED_RR or SCHED_DEADLINE policy, or a section marked with heaphook_rt_enter): allocations, mappings, locks, sleeps, I/O. Found by rtcheck's guard under the tracer (heaphook record -b rtcheck); open a stack to see where the call was made.</p>
<table id="realtime-violations"><thead><tr><th>call</th><th class="num">calls</th><th>thread</th><th>policy</th><th>stack (innermost first)</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function exploreSection(page: PageData, diff: boolean): string {
  const treeHead = (self: boolean): string =>
    `<thead><tr><th>function</th><th class="num">total</th>${self ? '<th class="num">self</th>' : ''}${self && diff ? '<th class="num">change</th>' : ''}</tr></thead><tbody></tbody>`;
  return `<h2 id="explore-title">${diff ? 'Heap over time against the base, and the differential flame graph' : 'Heap over time and allocations by call stack'}</h2>
<noscript><p>The interactive views need JavaScript; the tables and charts of this page do not.</p></noscript>
<div id="explore">
<div id="explore-heap"></div>
<div class="legend" id="heap-legend"><span><span class="swatch heap"></span>the heap (live bytes from malloc and its family)</span>${page.runs[0]!.mapped !== null ? '<span><span class="swatch mapped"></span>memory the program mapped</span>' : ''}${diff ? '<span id="base-legend"><span class="swatch base"></span>the base run&#39;s heap</span>' : ''}<span><span class="swatch peak"></span>the peak</span></div>
<div class="controls"><span>Range: <span id="range"></span></span> <button id="clear-range" type="button">whole run</button></div>
<div class="controls">
<label>Flame graph of <select id="mode"></select></label>
<label>Search <input id="search" type="search" placeholder="function name"></label>
<span id="search-result" data-matches="0"></span>
<button id="reset-zoom" type="button">reset zoom</button>
</div>
<div id="flame-total"></div>
${diff ? '<div class="legend" id="flame-legend"><span><span class="swatch grew"></span>grew against the base</span><span><span class="swatch grew-less"></span>grew a little</span><span><span class="swatch shrank"></span>shrank</span><span><span class="swatch same"></span>unchanged</span><span>widths: the new run</span></div>' : ''}
<div id="explore-flame" data-zoomed=""></div>
<p class="sub">Callers on top, the functions they call below. ${page.runs[0]!.timeline !== null && !diff ? 'Brush the heap chart to pick a time range: the flame graph and the trees then show the allocations made in it. ' : ''}Click a frame to zoom in (deeper frames scroll inside the box), a function in a tree to expand it and see its callers and callees.${diff ? ' Widths are the new run&#39;s; red frames grew, blue ones shrank against the base, the deeper the colour the larger the change (as pprof -diff_base and differential flame graphs show them).' : ''}</p>
<div class="trees">
<div><h3>Top-down (callers first)</h3><table id="top-down" class="tree">${treeHead(true)}</table></div>
<div><h3>Bottom-up (allocating functions first)</h3><table id="bottom-up" class="tree">${treeHead(false)}</table></div>
</div>
<h3>Callers and callees of <span id="selected"></span></h3>
<div class="trees">
<div><table id="callers" class="tree"><thead><tr><th>caller</th><th class="num">through it</th></tr></thead><tbody></tbody></table></div>
<div><table id="callees" class="tree"><thead><tr><th>callee</th><th class="num">through it</th></tr></thead><tbody></tbody></table></div>
</div>
</div>
<script type="application/json" id="heaphook-data">${pageDataScript(page)}</script>`;
}

function signedBytes(n: number): string {
  return `${n > 0 ? '+' : n < 0 ? '-' : '±'}${formatBytes(Math.abs(n))}`;
}

function diffSites(id: string, sites: readonly SiteDiff[]): string {
  const rows = sites.map(
    (s) =>
      `<tr><td class="num">${esc(signedBytes(s.delta.peakBytes))}</td><td class="num">${esc(formatBytes(s.base.peakBytes))} → ${esc(formatBytes(s.new.peakBytes))}</td><td class="num">${esc(signedBytes(s.delta.bytes))}</td><td class="num">${esc(formatCount(s.delta.allocations))}</td>${stackCell(s.stack)}</tr>`,
  );
  return `<table id="${id}" class="diff-sites"><thead><tr><th class="num">peak change</th><th class="num">at peak</th><th class="num">allocated change</th><th class="num">allocations change</th><th>stack (innermost first)</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

/** The comparison with the base run (report --diff): totals before → after, sites that grew
 * and shrank. */
function diffSection(d: ReportDiff): string {
  const rows = (
    [
      ['peak heap', 'peakHeapBytes', true],
      ['allocations', 'allocations', false],
      ['allocated', 'allocatedBytes', true],
      ['leaked', 'leakedBytes', true],
      ['never freed', 'neverFreedBytes', true],
      ['peak mapped', 'mappedPeakBytes', true],
    ] as const
  )
    .filter(([, key]) => d.base.totals[key] !== null && d.new.totals[key] !== null)
    .map(([label, key, bytes]) => {
      const [x, y] = [d.base.totals[key]!, d.new.totals[key]!];
      const f = (n: number): string => (bytes ? formatBytes(n) : formatCount(n));
      const change = bytes ? signedBytes(y - x) : `${y - x > 0 ? '+' : ''}${formatCount(y - x)}`;
      const percent = x > 0 ? ` (${(((y - x) / x) * 100).toFixed(1)} %)` : '';
      return `<tr><th>${esc(label)}</th><td class="num">${esc(f(x))}</td><td class="num">${esc(f(y))}</td><td class="num">${esc(change + percent)}</td></tr>`;
    });
  return `<h2>Compared with the base run</h2>
<p class="sub">base: ${esc(d.base.log)} (${esc(d.base.argv.join(' '))}) · new: ${esc(d.new.log)} (${esc(d.new.argv.join(' '))})</p>
${d.warnings.map((w) => `<p class="error diff-warning">Warning: ${esc(w)}.</p>`).join('\n')}
<table id="diff-totals"><thead><tr><th></th><th class="num">base</th><th class="num">new</th><th class="num">change</th></tr></thead><tbody>${rows.join('')}</tbody></table>
<h3>Sites that grew</h3>
${diffSites('diff-grew', d.grew)}
<h3>Sites that shrank</h3>
${diffSites('diff-shrank', d.shrank)}
<p>${d.added} site(s) only in the new run, ${d.removed} only in the base run.</p>`;
}

/** A static chart the interactive views replace: in <noscript> when they are there, which a
 * browser running scripts keeps as text, never laying out its thousands of SVG elements. */
function staticView(interactive: boolean, html: string): string {
  return interactive ? `<noscript>${html}</noscript>` : html;
}

/** The figures a person looks for first, on one line above the charts. */
function headline(j: ReportJson): string {
  const items: [string, string][] = [
    ['peak heap', `${formatBytes(j.peakHeapBytes)} at ${formatDuration(j.peakTimeNs)}`],
    ['allocations', formatCount(j.allocations + j.reallocs)],
    ['allocated', formatBytes(j.allocatedBytes)],
    [leakedLabel(j), `${formatBytes(j.leakedBytes)} in ${formatCount(j.leakedBlocks)} blocks`],
    ['run', formatDuration(j.durationNs)],
  ];
  return `<div id="headline">${items.map(([k, v]) => `<span>${esc(k)}: <b>${esc(v)}</b></span>`).join('')}</div>`;
}

export function reportHtml(parts: HtmlParts): string {
  const j = parts.json;
  const title = `heaphook report: ${j.argv.length > 0 ? j.argv.join(' ') : j.log}`;
  const abnormal = abnormalEndLine(j);
  const summaryRows: [string, string][] = [
    ['log', j.log],
    ['process', j.pid !== null ? `${j.pid}` : 'unknown'],
    ['duration', formatDuration(j.durationNs)],
    ['events', formatCount(j.events)],
    [
      'allocations / reallocs / frees',
      `${formatCount(j.allocations)} / ${formatCount(j.reallocs)} / ${formatCount(j.frees)}`,
    ],
    [
      'allocated in total',
      `${formatBytes(j.allocatedBytes)} (${formatCount(j.allocatedBytes)} bytes)`,
    ],
    [
      'peak heap',
      `${formatBytes(j.peakHeapBytes)} (${formatCount(j.peakHeapBytes)} bytes) at ${formatDuration(j.peakTimeNs)}`,
    ],
    [
      'peak live blocks',
      `${formatCount(j.peakLiveBlocks)} at ${formatDuration(j.peakLiveBlocksTimeNs)}`,
    ],
    [leakedLabel(j), `${formatCount(j.leakedBlocks)} blocks, ${formatBytes(j.leakedBytes)}`],
    ['never freed', `${formatCount(j.neverFreedBlocks)} blocks, ${formatBytes(j.neverFreedBytes)}`],
    [
      'reachable at exit',
      `${formatCount(j.reachableAtExitBlocks)} blocks, ${formatBytes(j.reachableAtExitBytes)}`,
    ],
    ['temporary allocations', formatCount(j.temporaryAllocations)],
    ...mappedRows(j),
    ['dropped events', formatCount(j.dropped)],
    ['end of log', j.end ?? 'none (no END record)'],
  ];
  const calls = Object.entries(j.calls).map(([op, c]) => `<tr><td>${esc(op)}</td>${num(c)}</tr>`);
  const sizes = j.sizeHistogram.map((r) => ({
    label: r.from === 0 ? '0' : `${formatBytes(r.from)}–${formatBytes(r.to - 1)}`,
    value: r.count,
  }));
  const latencyRows = Object.entries(j.latency).map(
    ([op, p]) =>
      `<tr><td>${esc(op)}</td>${num(p.count)}${[p.p50, p.p90, p.p99, p.p999, p.max, p.mean].map((v) => num(Math.round(v))).join('')}</tr>`,
  );
  const latencyCharts = [...parts.latency.entries()].map(([op, h]) =>
    barChartSvg(
      h.coarse().map((r) => ({
        label: `${formatDuration(r.from)}–${formatDuration(r.to)}`,
        value: r.count,
      })),
      { title: `${op}: time in the allocator`, id: `latency-${op}` },
    ),
  );
  const leakRows = j.leakSites.map(
    (s) =>
      `<tr>${num(s.blocks)}<td class="num">${esc(formatBytes(s.bytes))}</td>${stackCell(s.stack)}</tr>`,
  );
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title><style>${CSS}</style></head>
<body>
<h1>${esc(title)}</h1>
<p class="sub">heaphook heaptrack report · ${esc(j.log)}</p>
${abnormal !== undefined ? `<p class="error" id="abnormal-end">${esc(abnormal[0]!.toUpperCase() + abnormal.slice(1))}.</p>` : ''}
${j.error !== null ? `<p class="error" id="log-error">The log is damaged: ${esc(j.error.message)}. This report covers the part before byte ${j.error.offset}.</p>` : ''}
${headline(j)}
${parts.page !== undefined ? exploreSection(parts.page, parts.diff !== undefined) : ''}
${parts.diff !== undefined ? diffSection(parts.diff) : ''}
<h2>Summary</h2>
<div class="row">
<table id="summary"><tbody>${summaryRows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</tbody></table>
<table id="calls"><thead><tr><th>function</th><th class="num">calls</th></tr></thead><tbody>${calls.join('')}</tbody></table>
</div>
${realtimeSection(j)}
${staticView(parts.page !== undefined, `<h2>Heap consumption over time</h2>\n<div class="figure">${inline(parts.heapSvg)}</div>`)}
${mappedSection(j)}
<h2>Top allocation sites by peak contribution</h2>
${sitesTable('top-peak', j.topSites)}
<h2>Top allocation sites by number of allocations</h2>
${sitesTable('top-count', j.topSitesByCount)}
<h2>Top allocation sites by bytes allocated</h2>
${sitesTable('top-bytes', j.topSitesByBytes)}
<h2>Leaks (${esc(j.leakSource)}) by stack</h2>
<table id="leaks"><thead><tr><th class="num">blocks</th><th class="num">bytes</th><th>stack (innermost first)</th></tr></thead><tbody>${leakRows.join('')}</tbody></table>
<h2>Allocation sizes</h2>
<div class="row"><div class="figure">${barChartSvg(sizes, { id: 'size-chart' })}</div>
<table id="size-histogram"><thead><tr><th>size</th><th class="num">allocations</th><th class="num">bytes</th></tr></thead><tbody>${j.sizeHistogram
    .map(
      (r) =>
        `<tr><td>${esc(r.from === 0 ? '0' : `${formatCount(r.from)}..${formatCount(r.to - 1)}`)}</td>${num(r.count)}${num(r.bytes)}</tr>`,
    )
    .join('')}</tbody></table></div>
<h2>Allocator latency</h2>
${
  latencyRows.length > 0
    ? `<table id="latency"><thead><tr><th>function</th><th class="num">calls</th><th class="num">p50 ns</th><th class="num">p90 ns</th><th class="num">p99 ns</th><th class="num">p99.9 ns</th><th class="num">max ns</th><th class="num">mean ns</th></tr></thead><tbody>${latencyRows.join('')}</tbody></table>
<div class="row">${latencyCharts.map((c) => `<div class="figure">${c}</div>`).join('')}</div>`
    : '<p id="no-latency">Durations were not recorded (trace with HEAPHOOK_TIMING=1 to get them).</p>'
}
${staticView(parts.page !== undefined, `<h2>Flame graph of allocated bytes</h2>\n<div class="figure">${inline(parts.flameSvg)}</div>`)}
${
  parts.page !== undefined
    ? `<script>${pageLibraries()}</script>
<script>${PAGE_SCRIPT}</script>`
    : ''
}
</body></html>
`;
}
