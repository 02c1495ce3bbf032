/**
 * `heaphook list`'s table: a header, the heap backends, then (apart, under a heading of their
 * own) the libraries that emulate another system's loading on Linux, which are not backends a
 * Linux program would run under.
 */
import type { BackendInfo } from './backends.js';

const HEADER = ['BACKEND', 'PACKAGE', 'LIBRARY'] as const;

function note(b: BackendInfo): string {
  if (!b.built) return `   (missing: ${b.missing ?? `npx nx build ${b.nxProject}`})`;
  if (b.aliasOf !== undefined) return `   (another name for ${b.aliasOf})`;
  if (b.emulates !== undefined) return `   (emulates ${b.emulates})`;
  return '';
}

export function formatBackendList(backends: readonly BackendInfo[]): string {
  if (backends.length === 0) return 'no backends installed (try: npm i @heaphook/tlsf)\n';
  const nameWidth = Math.max(HEADER[0].length, ...backends.map((b) => b.name.length));
  const packageWidth = Math.max(HEADER[1].length, ...backends.map((b) => b.packageName.length));
  const row = (name: string, pkg: string, rest: string): string =>
    `${name.padEnd(nameWidth)}  ${pkg.padEnd(packageWidth)}  ${rest}`.trimEnd();
  const lines = [row(...HEADER)];
  const heap = backends.filter((b) => b.emulates === undefined);
  const emulations = backends.filter((b) => b.emulates !== undefined);
  for (const b of heap) lines.push(row(b.name, b.packageName, `${b.libraryPath}${note(b)}`));
  if (emulations.length > 0) {
    lines.push(
      '',
      'emulations (run on Linux to test a port; not heap backends for Linux programs):',
    );
    for (const b of emulations)
      lines.push(row(b.name, b.packageName, `${b.libraryPath}${note(b)}`));
  }
  return `${lines.join('\n')}\n`;
}
