/** Number formatting shared by the text, HTML and charts. */

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[u]}`;
}

/** ns as seconds, ms or µs. */
export function formatDuration(ns: number): string {
  if (ns === 0) return '0 s';
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(ns >= 1e10 ? 1 : 3)} s`;
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(ns >= 1e7 ? 1 : 3)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(ns >= 1e4 ? 1 : 3)} µs`;
  return `${Math.round(ns)} ns`;
}

/**
 * `n` with thousands separators, as `n.toLocaleString('en-US')` writes it (at most three
 * fraction digits). Written out because the first use of Intl loads ICU's locale data, ~20 ms
 * of a short report's run.
 */
export function formatCount(n: number): string {
  if (!Number.isFinite(n) || Math.abs(n) >= 1e21) return n.toLocaleString('en-US');
  const rounded = Math.round(Math.abs(n) * 1000) / 1000;
  if (rounded === 0) return n < 0 || Object.is(n, -0) ? '-0' : '0';
  const [whole = '0', fraction] = rounded.toString().split('.');
  let grouped = '';
  for (let end = whole.length; end > 0; end -= 3) {
    const group = whole.slice(Math.max(0, end - 3), end);
    grouped = grouped === '' ? group : `${group},${grouped}`;
  }
  return `${n < 0 ? '-' : ''}${grouped}${fraction !== undefined ? `.${fraction}` : ''}`;
}
