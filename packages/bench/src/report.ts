/**
 * The tables: built once as data, rendered for the terminal (aligned text, best cell marked
 * with *) and as Markdown (best cell in bold).
 */
import { formatBytes, formatMetric, formatRatio, metricLabel } from './format.js';
import type { Results } from './results.js';
import { bestAllocators, median } from './stats.js';
import type { Cell } from './types.js';
import {
  UCM_HEAPHOOK_COLUMNS,
  ucmCostText,
  type UcmColumnName,
  type UcmHooksSection,
} from './ucmhooks.js';

export interface Table {
  title: string;
  notes: string[];
  header: string[];
  rows: string[][];
  /** Same shape as rows: cells to mark as the best of their row. */
  best: boolean[][];
}

function cellOf(cells: readonly Cell[], workload: string, allocator: string): Cell | undefined {
  return cells.find((c) => c.workload === workload && c.allocator === allocator);
}

function failedText(c: Cell): string {
  if (c.failed_runs > 0 && c.failed_runs < c.runs) return `failed ${c.failed_runs}/${c.runs}`;
  return 'failed';
}

function readyColumns(r: Results): string[] {
  return r.allocators.filter((a) => a.status === 'ready').map((a) => a.name);
}

function readyWorkloads(r: Results): Results['workloads'] {
  return r.workloads.filter((w) => w.status === 'ready');
}

/** Main table: each workload's primary figure; glibc absolute, the others as ratios to glibc. */
export function mainTable(r: Results): Table {
  const n = r.options.runs;
  return ratioTable(
    r,
    null,
    `Allocators compared: ${r.options.profile === 'quick' ? 'quick smoke run' : 'full run'}, median of ${n} run${n === 1 ? '' : 's'} each`,
    [
      "glibc column: absolute median; other columns: median divided by glibc's median in the same session (below 1 is better).",
      'The best of each row is marked (* in the terminal, bold in Markdown); "failed" means a run crashed, timed out or computed a wrong result.',
    ],
  );
}

/**
 * One figure per workload (`metric`, or each workload's primary figure when null): the
 * baseline's absolute median, the others as ratios to it.
 */
export function ratioTable(
  r: Results,
  metric: string | null,
  title: string,
  notes: string[],
): Table {
  const cols = readyColumns(r);
  const header =
    metric === null ? ['workload', 'figure (lower is better)', ...cols] : ['workload', ...cols];
  const rows: string[][] = [];
  const best: boolean[][] = [];
  for (const w of readyWorkloads(r)) {
    const m0 = metric ?? w.primary;
    const winners = bestAllocators(r.cells, w.name, m0, cols);
    const row = metric === null ? [w.name, metricLabel(m0)] : [w.name];
    const marks = row.map(() => false);
    for (const a of cols) {
      const c = cellOf(r.cells, w.name, a);
      let text = '–';
      if (c?.status === 'failed') text = failedText(c);
      else if (c?.status === 'ok') {
        const m = c.metrics[m0];
        const ratio = c.ratios[m0];
        if (a === c.baseline && m) text = formatMetric(m0, m.median);
        else if (ratio !== undefined) text = formatRatio(ratio);
        else if (m) text = formatMetric(m0, m.median);
      }
      row.push(text);
      marks.push(winners.includes(a));
    }
    rows.push(row);
    best.push(marks);
  }
  return { title, notes, header, rows, best };
}

/** One figure in absolute values, "median [min–max]", for every workload and allocator. */
export function figureTable(r: Results, metric: string, title: string): Table {
  const cols = readyColumns(r);
  const rows: string[][] = [];
  const best: boolean[][] = [];
  for (const w of readyWorkloads(r)) {
    const winners = bestAllocators(r.cells, w.name, metric, cols);
    const row = [w.name];
    const marks = [false];
    for (const a of cols) {
      const c = cellOf(r.cells, w.name, a);
      const m = c?.metrics[metric];
      let text = '–';
      if (c?.status === 'failed') text = failedText(c);
      else if (m)
        text =
          m.n > 1 && m.min !== m.max
            ? `${formatMetric(metric, m.median)} [${formatMetric(metric, m.min)}–${formatMetric(metric, m.max)}]`
            : formatMetric(metric, m.median);
      row.push(text);
      marks.push(winners.includes(a));
    }
    rows.push(row);
    best.push(marks);
  }
  return {
    title,
    notes: ['median [min–max] over the runs'],
    header: ['workload', ...cols],
    rows,
    best,
  };
}

const LATENCY_FIGURES: Array<[string, string]> = [
  ['reported.p50_ns', 'p50'],
  ['reported.p99_ns', 'p99'],
  ['reported.p99_9_ns', 'p99.9'],
  ['reported.p99_99_ns', 'p99.99'],
  ['reported.max_ns', 'max'],
  ['reported.malloc_p50_ns', 'malloc p50'],
  ['reported.malloc_p99_ns', 'malloc p99'],
  ['reported.malloc_p99_9_ns', 'malloc p99.9'],
  ['reported.malloc_p99_99_ns', 'malloc p99.99'],
  ['reported.free_p50_ns', 'free p50'],
  ['reported.free_p99_ns', 'free p99'],
  ['reported.free_p99_9_ns', 'free p99.9'],
  ['reported.free_p99_99_ns', 'free p99.99'],
  ['reported.malloc_max_ns', 'malloc max'],
  ['reported.free_max_ns', 'free max'],
  ['reported.minflt', 'minor faults'],
  ['reported.overruns', 'overruns'],
];

/** What the machine did to a busy thread before the latency runs (median over the runs of
 * every allocator): stalls over 1 us per second, and how many calls of the median p50 meet one
 * on average. */
function stallNote(r: Results, workload: string, p50Key = 'p50_ns'): string[] {
  const reps = r.runs.filter((x) => x.workload === workload && x.status === 'ok');
  const med = (key: string): number | undefined => {
    const v = reps.map((x) => x.reported?.[key]).filter((x): x is number => typeof x === 'number');
    return v.length > 0 ? median(v) : undefined;
  };
  const over1 = med('stalls_1us_per_s');
  const over10 = med('stalls_10us_per_s');
  const p50 = med(p50Key);
  if (over1 === undefined || over10 === undefined || p50 === undefined || over1 <= 0) return [];
  const oneIn = Math.round(1e9 / (over1 * p50));
  return [
    `the machine: a busy thread stalled over 1 µs ${Math.round(over1)} times a second and over 10 µs ${Math.round(over10)} (a loop of clock reads before each run, medians); at the median call (${Math.round(p50)} ns) one call in ~${oneIn.toLocaleString('en-US')} meets such a stall${oneIn <= 30_000 ? ', so p99.99 (one call in 10,000) shows the machine more than the allocator' : ''}.`,
  ];
}

/** One row per allocator of a latency workload's figures: medians, a max also with the worst
 * run's, the best of each column marked. */
function latencyRows(
  r: Results,
  workload: string,
  figures: Array<[string, string]>,
): { rows: string[][]; best: boolean[][] } {
  const cols = readyColumns(r);
  const winners = figures.map(([k]) => bestAllocators(r.cells, workload, k, cols));
  const rows: string[][] = [];
  const best: boolean[][] = [];
  for (const a of cols) {
    const c = cellOf(r.cells, workload, a);
    const row = [a];
    const marks = [false];
    figures.forEach(([k], j) => {
      const m = c?.metrics[k];
      let text = '–';
      if (c?.status === 'failed') text = j === 0 ? failedText(c) : '';
      else if (m)
        text =
          k.endsWith('max_ns') && m.n > 1
            ? `${formatMetric(k, m.median)} (worst ${formatMetric(k, m.max)})`
            : formatMetric(k, m.median);
      row.push(text);
      marks.push(winners[j]!.includes(a));
    });
    rows.push(row);
    best.push(marks);
  }
  return { rows, best };
}

/** Per-call latency of the real-time workload, one row per allocator. */
export function latencyTables(r: Results): Table[] {
  const out: Table[] = [];
  for (const w of readyWorkloads(r).filter((x) => x.base === 'latency')) {
    const rep = r.runs.find((x) => x.workload === w.name && x.status === 'ok')?.reported;
    const period = typeof rep?.period_ns === 'number' ? rep.period_ns : undefined;
    const samples = typeof rep?.ops === 'number' ? rep.ops : undefined;
    out.push({
      title: `Real-time latency (${w.name}): per malloc/free call`,
      notes: [
        `${samples ?? '?'} timed calls per run${period ? ` in a ${1e9 / period} Hz loop` : ''}; medians over the runs; the timer read (~${typeof rep?.clock_overhead_ns === 'number' ? rep.clock_overhead_ns : '?'} ns) is included.`,
        'minor faults: page faults during the timed phase (allocator and first touch of returned memory); overruns: cycles that missed their deadline.',
        ...stallNote(r, w.name),
      ],
      header: ['allocator', ...LATENCY_FIGURES.map(([, label]) => label)],
      ...latencyRows(r, w.name, LATENCY_FIGURES),
    });
  }
  return out;
}

const B2B_FIGURES: Array<[string, string]> = [
  ['reported.malloc_p50_ns', 'malloc p50'],
  ['reported.malloc_p99_ns', 'p99'],
  ['reported.malloc_p99_9_ns', 'p99.9'],
  ['reported.malloc_p99_99_ns', 'p99.99'],
  ['reported.malloc_max_ns', 'max'],
  ['reported.free_p50_ns', 'free p50'],
  ['reported.free_p99_ns', 'p99'],
  ['reported.free_p99_9_ns', 'p99.9'],
  ['reported.free_p99_99_ns', 'p99.99'],
  ['reported.free_max_ns', 'max'],
  ['reported.ops_per_s', 'calls/s'],
  ['reported.minflt', 'minor faults'],
];

/** Per-call latency of malloc and of free called back to back (latency_b2b), one row per
 * allocator. */
export function b2bLatencyTables(r: Results): Table[] {
  const out: Table[] = [];
  for (const w of readyWorkloads(r).filter((x) => x.base === 'latency_b2b')) {
    const rep = r.runs.find((x) => x.workload === w.name && x.status === 'ok')?.reported;
    const samples = typeof rep?.ops === 'number' ? rep.ops : undefined;
    out.push({
      title: `Back-to-back latency (${w.name}): per malloc and per free call, no pause between calls`,
      notes: [
        `${samples ?? '?'} timed calls per run (about 10,000 live blocks per thread, 8 B-64 KiB log-uniform); medians over the runs; the timer read (~${typeof rep?.clock_overhead_ns === 'number' ? rep.clock_overhead_ns : '?'} ns) is included.`,
        'calls/s: malloc and free calls of the timed phase per second of its slowest thread (block stamping and checks included); minor faults: page faults during the timed phase.',
        ...stallNote(r, w.name, 'malloc_p50_ns'),
      ],
      header: ['allocator', ...B2B_FIGURES.map(([, label]) => label)],
      ...latencyRows(r, w.name, B2B_FIGURES),
    });
  }
  return out;
}

const FRAG_FIGURES: Array<[string, string]> = [
  ['reported.peak_live_bytes', 'peak live'],
  ['reported.peak_rss_bytes', 'peak RSS'],
  ['reported.rss_over_live', 'peak RSS / live'],
  ['reported.end_rss_over_live', 'RSS / live at end'],
  ['reported.rss_after_free_bytes', 'RSS after free'],
  ['wall_s', 'wall time'],
];

export function fragmentationTables(r: Results): Table[] {
  const out: Table[] = [];
  for (const w of readyWorkloads(r).filter((x) => x.base === 'fragmentation')) {
    const cols = readyColumns(r);
    const winners = FRAG_FIGURES.map(([k]) =>
      k === 'reported.peak_live_bytes' ? [] : bestAllocators(r.cells, w.name, k, cols),
    );
    const rows: string[][] = [];
    const best: boolean[][] = [];
    for (const a of cols) {
      const c = cellOf(r.cells, w.name, a);
      const row = [a];
      const marks = [false];
      FRAG_FIGURES.forEach(([k], j) => {
        const m = c?.metrics[k];
        row.push(
          c?.status === 'failed'
            ? j === 0
              ? failedText(c)
              : ''
            : m
              ? formatMetric(k, m.median)
              : '–',
        );
        marks.push(winners[j]!.includes(a));
      });
      rows.push(row);
      best.push(marks);
    }
    const notes = [
      'RSS is the whole process (a few MB of it is the program itself); "RSS after free": resident after every object was freed.',
    ];
    const rec = r.recommended_pools?.find((x) => x.workload === w.name);
    if (rec?.status === 'ok') {
      const glibc = cellOf(r.cells, w.name, 'glibc')?.metrics['peak_rss_bytes']?.median;
      const mine = cellOf(r.cells, w.name, 'tlsf-rec')?.metrics['peak_rss_bytes']?.median;
      notes.push(
        `tlsf-rec: ${Object.entries(rec.env)
          .map(([k, v]) => `${k}=${v}`)
          .join(
            ' ',
          )}, from heaphook recommend on a heaphook-heaptrack trace of this workload (peak live ${formatBytes(rec.peak_live_bytes ?? 0)}, replayed minimum ${formatBytes(rec.replayed_minimum_bytes ?? 0)})${glibc && mine ? `; its peak RSS is ${(mine / glibc).toFixed(2)}× glibc's` : ''}.`,
      );
    } else if (rec) notes.push(`tlsf-rec: no recommendation: ${rec.error ?? ''}`);
    out.push({
      title: `Fragmentation (${w.name}): memory held against memory in use`,
      notes,
      header: ['allocator', ...FRAG_FIGURES.map(([, l]) => l)],
      rows,
      best,
    });
  }
  return out;
}

function formatBytesPerCall(b: number): string {
  return `${b < 10 ? b.toFixed(2) : b.toFixed(1)} B/call`;
}

/** What a tracer table compares: the run's wall time, or the CPU time of all it ran. */
export type TracerFigure = 'wall_s' | 'cpu_s';

const TRACER_TITLES: Record<TracerFigure, string> = {
  wall_s: 'Heap tracer overhead: wall-time slowdown against the untraced run',
  cpu_s:
    'Heap tracer overhead: CPU time (user + system, every thread and child process) against the untraced run',
};

/**
 * Each tracer against the untraced run of what it traces. wall_s: the slowdown, with the size
 * of the trace written; cpu_s: what tracing costs the machine, the tracer's own threads and
 * processes included (heaphook's drain thread, KDE heaptrack's heaptrack_interpret), which the
 * wall time does not show while they run on another core.
 */
export function tracerTable(r: Results, figure: TracerFigure = 'wall_s'): Table | null {
  const tracers = r.tracers.filter((t) => t.status === 'ready');
  if (tracers.length === 0) return null;
  const rows: string[][] = [];
  const best: boolean[][] = [];
  for (const w of readyWorkloads(r)) {
    const row = [w.name];
    const marks = [false];
    let winner: string | undefined;
    let bestRatio = Infinity;
    const calls = tracers
      .map((t) => cellOf(r.cells, w.name, t.name)?.metrics.trace_calls?.median)
      .find((n) => n !== undefined && n > 0);
    for (const t of tracers) {
      const c = cellOf(r.cells, w.name, t.name);
      const ratio = c?.ratios[figure];
      if (c?.status === 'ok' && ratio !== undefined && ratio < bestRatio) {
        bestRatio = ratio;
        winner = t.name;
      }
    }
    for (const t of tracers) {
      const c = cellOf(r.cells, w.name, t.name);
      let text = '–';
      if (c?.status === 'failed') text = failedText(c);
      else if (c?.status === 'ok') {
        const ratio = c.ratios[figure];
        text =
          ratio !== undefined
            ? formatRatio(ratio)
            : formatMetric(figure, c.metrics[figure]?.median ?? NaN);
        const size = c.metrics.trace_bytes?.median;
        if (figure === 'wall_s' && size !== undefined) {
          const perCall = calls !== undefined ? `, ${formatBytesPerCall(size / calls)}` : '';
          text += ` (${formatBytes(size)}${perCall})`;
        }
      }
      row.push(text);
      marks.push(winner === t.name && tracers.length > 1);
    }
    rows.push(row);
    best.push(marks);
  }
  const described = tracers.map((t) => `${t.name}: ${t.description}; against ${t.baseline}`);
  return {
    title: `${TRACER_TITLES[figure]} (median of ${r.options.tracer_runs})`,
    notes: [
      figure === 'wall_s'
        ? 'in parentheses: the size of the trace written, and its bytes per allocation-family call ' +
          "(calls counted in heaphook's log of the same workload, one run; every tracer sees the same calls). " +
          described.join('. ') +
          '.'
        : "the tracer's own threads and processes count here (heaphook's drain thread, KDE heaptrack's heaptrack_interpret and its compressor): " +
          'on a machine with a spare core they cost CPU, not wall time. Same runs as the wall-time table.',
    ],
    header: ['workload', ...tracers.map((t) => t.name)],
    rows,
    best,
  };
}

/** Memory-event hooks: cost per hooked call of heaphook (preload, relocation, code patching)
 * and libucm (its default bistro mode, and reloc). */
export function ucmHooksTable(u: UcmHooksSection | null | undefined): Table | null {
  if (!u || u.status === 'skipped' || u.loops.length === 0) return null;
  const has = (n: string) => u.columns.some((c) => c.name === n && c.status === 'ready');
  const ucm = has('libucm');
  const ucmReloc = has('libucm-reloc');
  const heaphook = UCM_HEAPHOOK_COLUMNS.filter(has);
  const short = (n: string) => n.replace('heaphook-', '');
  const header = [
    'loop',
    'no hooks',
    ...heaphook.map((n) => `heaphook ${short(n)}`),
    ...(ucm ? ['libucm bistro'] : []),
    ...(ucmReloc ? ['libucm reloc'] : []),
    ...(ucm ? [`${heaphook.map(short).join(' / ')} ÷ libucm bistro`] : []),
    ...(ucmReloc ? [`${heaphook.map(short).join(' / ')} ÷ libucm reloc`] : []),
    'events per loop (mapped/unmapped/mmap/munmap)',
    'counts',
  ];
  const rows: string[][] = [];
  const best: boolean[][] = [];
  for (const l of u.loops) {
    const none = l.columns['heaphook-reloc']?.base_ns_per_call.median;
    const cost = (n: UcmColumnName) => {
      const c = l.columns[n];
      if (!c) return { text: 'failed', v: Infinity };
      return { text: ucmCostText(c.cost_ns), v: c.cost_ns ?? Infinity };
    };
    const measured: UcmColumnName[] = [
      ...heaphook,
      ...(ucm ? (['libucm'] as const) : []),
      ...(ucmReloc ? (['libucm-reloc'] as const) : []),
    ];
    const costs = measured.map(cost);
    const min = Math.min(...costs.map((c) => c.v));
    const ev = (l.columns['heaphook-preload'] ?? l.columns['heaphook-reloc'])?.events ?? {};
    const counts = ['vm_mapped', 'vm_unmapped', 'mmap', 'munmap'].map((k) => ev[k] ?? 0).join('/');
    const bad = measured.filter((n) => !l.columns[n]?.match);
    const differ = heaphook.filter((n) => ucm && l.same_counts[n] === false);
    const countText =
      bad.length === 0 && differ.length === 0
        ? ucm
          ? 'exact, identical'
          : 'exact'
        : [
            ...(bad.length ? [`wrong: ${bad.join(', ')}`] : []),
            ...(differ.length ? [`differ from libucm: ${differ.join(', ')}`] : []),
          ].join('; ');
    const ratios = (of: Partial<Record<UcmColumnName, number>> | undefined) =>
      heaphook.map((n) => (of?.[n] !== undefined ? formatRatio(of[n]!) : '–')).join(' / ');
    rows.push([
      l.name,
      none !== undefined ? `${none.toFixed(0)} ns` : '–',
      ...costs.map((c) => c.text),
      ...(ucm ? [ratios(l.ratios)] : []),
      ...(ucmReloc ? [ratios(l.ratios_reloc)] : []),
      counts,
      countText,
    ]);
    best.push([
      false,
      false,
      ...costs.map((c) => c.v === min && min < Infinity),
      ...(ucm ? [false] : []),
      ...(ucmReloc ? [false] : []),
      false,
      false,
    ]);
  }
  return {
    title: `Memory-event hooks: ns per hooked call (median of ${u.runs} interleaved run${u.runs === 1 ? '' : 's'}, each the best of ${u.reps} × ${u.iters} iterations)`,
    notes: [
      '"no hooks": ns per call of the same system calls made raw (syscall(2), which no hook sees). The other columns: the median per-iteration difference between the loop\'s calls through the hooks (with a counting VM_MAPPED|VM_UNMAPPED|MMAP|MUNMAP handler) and the same calls made raw, interleaved in the same process; median over the runs. ≈0: below the baseline. A ratio of at most 0.5 meets the goal of issues 7 and 26.',
      "The same source (native/ucm_hooks/ucm_cost.c, written against libucm's API) built against heaphook's ucm_compat.h (preloaded; linked after libc: GOT patching; HEAPHOOK_MEM_MMAP_HOOK_MODE=bistro: code patching) and against libucm (its default bistro mode, and UCX_MEM_MMAP_HOOK_MODE=reloc)." +
        (ucm
          ? ''
          : ` libucm: skipped: ${u.columns.find((c) => c.name === 'libucm')?.reason ?? ''}.`),
      'counts: "exact" when every run counted exactly the events the loop implies, "identical" when heaphook and libucm (both modes) counted the same.',
    ],
    header,
    rows,
    best,
  };
}

/** The lines about what was not measured and why. */
export function skipLines(r: Results): string[] {
  const lines: string[] = [];
  for (const a of [...r.allocators, ...r.tracers])
    if (a.status === 'skipped') lines.push(`${a.name}: skipped: ${a.reason ?? ''}`);
  for (const w of r.workloads)
    if (w.status === 'skipped') lines.push(`workload ${w.name}: skipped: ${w.reason ?? ''}`);
  const u = r.ucm_hooks;
  if (u?.status === 'skipped') lines.push(`memory-event hooks: skipped: ${u.reason ?? ''}`);
  // libucm-off and libucm-reloc run the same program as libucm: skipped exactly when it is
  for (const c of u?.status === 'skipped' ? [] : (u?.columns ?? []))
    if (c.status === 'skipped' && c.name !== 'libucm-off' && c.name !== 'libucm-reloc')
      lines.push(`memory-event hooks ${c.name}: skipped: ${c.reason ?? ''}`);
  return lines;
}

export function failureLines(r: Results): string[] {
  const lines: string[] = [];
  for (const c of r.cells) {
    if (c.status === 'failed')
      lines.push(
        `${c.workload} under ${c.allocator}: ${c.failed_runs}/${c.runs} runs failed: ${c.error ?? ''}`,
      );
  }
  for (const run of r.ucm_hooks?.raw ?? [])
    if (run.status !== 'ok')
      lines.push(`memory-event hooks ${run.column} (run ${run.rep + 1}): ${run.error ?? ''}`);
  return lines;
}

export function allTables(r: Results): Table[] {
  const rss = ratioTable(r, 'peak_rss_bytes', 'Peak RSS of the process (ratio to glibc)', [
    "glibc column: absolute median; other columns: ratio to glibc's median. A pre-faulted pool counts in full.",
  ]);
  // --only-ucm-hooks: no workload ran, so no allocator tables
  const t: Table[] =
    readyWorkloads(r).length === 0
      ? []
      : [mainTable(r), rss, ...latencyTables(r), ...b2bLatencyTables(r), ...fragmentationTables(r)];
  const tr = tracerTable(r);
  if (tr) t.push(tr);
  const trCpu = tracerTable(r, 'cpu_s');
  if (trCpu) t.push(trCpu);
  const u = ucmHooksTable(r.ucm_hooks);
  if (u) t.push(u);
  return t;
}

/* ---------------- rendering ---------------- */

function width(s: string): number {
  return [...s].length;
}

export function renderText(t: Table): string {
  const rows = [
    t.header,
    ...t.rows.map((row, i) => row.map((cell, j) => (t.best[i]?.[j] ? `${cell} *` : cell))),
  ];
  const widths = t.header.map((_, j) => Math.max(...rows.map((r) => width(r[j] ?? ''))));
  const fmt = (r: string[]) =>
    r
      .map((c, j) => {
        const pad = widths[j]! - width(c);
        return j === 0 ? c + ' '.repeat(pad) : ' '.repeat(pad) + c;
      })
      .join('  ');
  const sep = widths.map((w) => '-'.repeat(w)).join('  ');
  return [
    t.title,
    fmt(rows[0]!),
    sep,
    ...rows.slice(1).map(fmt),
    ...t.notes.map((n) => `  ${n}`),
  ].join('\n');
}

function mdEscape(s: string): string {
  return s.replaceAll('|', '\\|');
}

export function renderMarkdown(t: Table, level = 3): string {
  const head = `| ${t.header.map(mdEscape).join(' | ')} |`;
  const align = `| ${t.header.map((_, j) => (j === 0 ? '---' : '---:')).join(' | ')} |`;
  const body = t.rows.map(
    (row, i) =>
      `| ${row.map((c, j) => (t.best[i]?.[j] && c ? `**${mdEscape(c)}**` : mdEscape(c))).join(' | ')} |`,
  );
  return [
    `${'#'.repeat(level)} ${t.title}`,
    '',
    head,
    align,
    ...body,
    '',
    ...t.notes.map((n) => `${n}`),
  ].join('\n');
}

export function terminalReport(r: Results, files: string[]): string {
  const parts = allTables(r).map(renderText);
  const skips = skipLines(r);
  if (skips.length > 0) parts.push(['Not measured:', ...skips.map((s) => `  ${s}`)].join('\n'));
  const fails = failureLines(r);
  if (fails.length > 0) parts.push(['Failures:', ...fails.map((s) => `  ${s}`)].join('\n'));
  if (files.length > 0) parts.push(`Written: ${files.join(', ')}`);
  return parts.join('\n\n');
}

export function markdownReport(r: Results): string {
  const m = r.machine;
  const out: string[] = [
    `# heaphook bench: ${r.date.slice(0, 10)}`,
    '',
    `Command: \`${r.command}\`, ${r.options.runs} run(s) per cell, interleaved; threads ${r.options.threads.join(', ')}; ${r.duration_s.toFixed(0)} s in all.`,
    `Machine: ${m.cpu_model}, ${m.logical_cpus} logical CPUs, ${formatBytes(m.memory_bytes)}, ${m.os}, Linux ${m.kernel}; load average ${m.loadavg_start}${m.loadavg_end !== undefined ? ` → ${m.loadavg_end}` : ''}.`,
    `Versions: Node ${r.versions.node}, glibc ${r.versions.glibc ?? '?'}, ${r.versions.compiler ?? 'cc ?'}${r.versions.python3 ? `, Python ${r.versions.python3}` : ''}${r.versions.git ? `, heaphook ${r.versions.git}` : ''}.`,
    '',
    'Allocators: ' +
      r.allocators
        .filter((a) => a.status === 'ready')
        .map((a) => `${a.name}${a.version ? ` ${a.version}` : ''}`)
        .join(', ') +
      '.',
    '',
  ];
  for (const t of allTables(r)) out.push(renderMarkdown(t), '');
  if (readyWorkloads(r).length > 0) {
    out.push(renderMarkdown(figureTable(r, 'wall_s', 'Wall time'), 3), '');
    out.push(
      renderMarkdown(
        ratioTable(r, 'cpu_s', 'CPU time, user + system (ratio to glibc)', [
          'Less sensitive than wall time to a loaded machine; threads that spin count fully.',
        ]),
        3,
      ),
      '',
    );
    out.push(renderMarkdown(figureTable(r, 'cpu_s', 'CPU time (user + system)'), 3), '');
    out.push(renderMarkdown(figureTable(r, 'peak_rss_bytes', 'Peak RSS'), 3), '');
    out.push(renderMarkdown(figureTable(r, 'minflt', 'Minor page faults (whole run)'), 3), '');
  }
  const skips = skipLines(r);
  if (skips.length > 0) out.push('### Not measured', '', ...skips.map((s) => `- ${s}`), '');
  const fails = failureLines(r);
  if (fails.length > 0) out.push('### Failures', '', ...fails.map((s) => `- ${s}`), '');
  out.push(
    '### Workloads',
    '',
    ...r.workloads.map((w) => `- \`${w.name}\` (size ${w.size}): ${w.description}`),
    '',
  );
  return out.join('\n');
}
