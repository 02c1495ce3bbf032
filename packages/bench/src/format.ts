/** Human formatting of the figures, by the figure's name. */

function sig3(x: number): string {
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

export function formatSeconds(s: number): string {
  if (s < 1e-3) return `${sig3(s * 1e6)} µs`;
  if (s < 1) return `${sig3(s * 1e3)} ms`;
  return `${sig3(s)} s`;
}

export function formatNs(ns: number): string {
  if (ns < 1000) return `${Math.round(ns)} ns`;
  if (ns < 1e6) return `${sig3(ns / 1e3)} µs`;
  if (ns < 1e9) return `${sig3(ns / 1e6)} ms`;
  return `${sig3(ns / 1e9)} s`;
}

export function formatBytes(b: number): string {
  const a = Math.abs(b);
  if (a < 1024) return `${Math.round(b)} B`;
  if (a < 1024 * 1024) return `${sig3(b / 1024)} KiB`;
  if (a < 1024 ** 3) return `${sig3(b / 1024 ** 2)} MiB`;
  return `${sig3(b / 1024 ** 3)} GiB`;
}

export function formatCount(n: number): string {
  const r = Math.round(n);
  return r.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
}

export function formatRatio(r: number): string {
  if (r >= 100) return `${r.toFixed(0)}×`;
  if (r >= 10) return `${r.toFixed(1)}×`;
  return `${r.toFixed(2)}×`;
}

/** Formats a figure by its key (wall_s, peak_rss_bytes, reported.p99_ns, reported.rss_over_live ...). */
export function formatMetric(key: string, v: number): string {
  const k = key.replace(/^reported\./, '');
  if (k === 'ops_per_s') return `${sig3(v / 1e6)} M/s`;
  if (k.endsWith('_s')) return formatSeconds(v);
  if (k.endsWith('_ns')) return formatNs(v);
  if (k.endsWith('_bytes')) return formatBytes(v);
  if (k.includes('_over_')) return v.toFixed(2);
  return formatCount(v);
}

/** A short label of a figure for table headers. */
export function metricLabel(key: string): string {
  const labels: Record<string, string> = {
    wall_s: 'wall time',
    cpu_s: 'CPU time',
    user_s: 'user CPU',
    sys_s: 'system CPU',
    peak_rss_bytes: 'peak RSS',
    minflt: 'minor faults',
    majflt: 'major faults',
    trace_bytes: 'trace size',
    'reported.rss_over_live': 'peak RSS / peak live',
    'reported.p99_99_ns': 'p99.99 latency',
    'reported.free_p99_9_ns': 'free p99.9 latency',
    'reported.ops_per_s': 'throughput',
  };
  return labels[key] ?? key.replace(/^reported\./, '');
}
