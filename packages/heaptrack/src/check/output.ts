/**
 * What `heaphook check` says: lines of text, JUnit XML (one test case per limit, for CI test
 * reports) and GitHub Actions workflow commands (an error annotation per limit passed, at the
 * source line of its top frame when the frame has one). Log paths and stack frames come from
 * the traced program: each goes through its format's encoder (@heaphook/core's encode.ts).
 */
import { existsSync } from 'node:fs';
import { basename, relative, resolve } from 'node:path';

import { githubData, githubProperty, terminalText, xmlText } from '@heaphook/core';

import { formatBytes } from '../report/format.js';
import type { ReportJson } from '../report/json.js';
import type { LimitKind, Verdict } from './limits.js';

/** How many frames of each stack the text shows. */
const FRAMES_SHOWN = 4;

function amount(kind: LimitKind, n: number): string {
  if (kind.unit === 'count') return String(n);
  return Math.abs(n) < 1024 ? `${n} B` : `${formatBytes(n)} (${n} B)`;
}

/** One line per limit: what the figure is against the limit, by how much it is over. */
export function verdictLine(v: Verdict): string {
  const { kind, max } = v.limit;
  if (v.status === 'unknown') return `FAIL ${kind.name}: the log has no figure for ${kind.what}`;
  const actual = v.actual!;
  if (v.status === 'ok')
    return `ok   ${kind.name}: ${amount(kind, actual)} <= ${amount(kind, max)}`;
  const over = actual - max;
  const percent = max > 0 ? ` (${((over / max) * 100).toFixed(1)} %)` : '';
  return `FAIL ${kind.name}: ${amount(kind, actual)} > ${amount(kind, max)}, over by ${amount(kind, over)}${percent}`;
}

export function verdictText(
  log: string,
  verdicts: readonly Verdict[],
  report?: Pick<
    ReportJson,
    'suppressedLeakedBlocks' | 'suppressedLeakedBytes' | 'suppressionFiles'
  >,
): string {
  const out = [`heaphook check ${terminalText(log)}`];
  for (const v of verdicts) {
    out.push(verdictLine(v));
    for (const [n, frames] of v.stacks) {
      out.push(`       ${amount(v.limit.kind, n)} from:`);
      for (const frame of frames.slice(0, FRAMES_SHOWN))
        out.push(`         ${terminalText(frame)}`);
    }
  }
  if (
    report !== undefined &&
    (report.suppressedLeakedBlocks > 0 || report.suppressionFiles.length > 0)
  ) {
    out.push(
      `     suppressed leaks (not counted): ${report.suppressedLeakedBlocks} blocks, ${amount(LEAK_BYTES, report.suppressedLeakedBytes)} by ${report.suppressionFiles.map(terminalText).join(', ')}`,
    );
  }
  out.push(summaryLine(verdicts));
  return `${out.join('\n')}\n`;
}

const LEAK_BYTES = { unit: 'bytes' } as LimitKind;

/** The last line: how many limits were met or exceeded, and which were exceeded. */
export function summaryLine(verdicts: readonly Verdict[]): string {
  const n = verdicts.length;
  const limits = `limit${n === 1 ? '' : 's'}`;
  const failed = verdicts.filter((v) => v.status !== 'ok');
  if (failed.length === 0) return n === 1 ? '1 limit met' : `all ${n} ${limits} met`;
  const names = failed
    .map((v) => `${v.limit.kind.name}${v.status === 'unknown' ? ' (no figure)' : ''}`)
    .join(', ');
  return `${failed.length} of ${n} ${limits} exceeded: ${names}`;
}

/** JUnit XML for the checks of several logs: a test suite per log, a test case per limit. */
export function junitXml(
  results: ReadonlyArray<{ log: string; verdicts: readonly Verdict[] }>,
): string {
  const suites = results.map(({ log, verdicts }) => {
    const failures = verdicts.filter((v) => v.status !== 'ok').length;
    const cases = verdicts.map((v) => {
      const name = xmlText(v.limit.kind.name);
      const classname = xmlText(`heaphook.check.${basename(log)}`);
      if (v.status === 'ok') return `    <testcase classname="${classname}" name="${name}"/>`;
      // Each frame encoded on its own: the newlines between them are the XML's.
      const stacks = v.stacks
        .map(([n, frames]) => `${n}:\n  ${frames.slice(0, FRAMES_SHOWN).map(xmlText).join('\n  ')}`)
        .join('\n');
      return (
        `    <testcase classname="${classname}" name="${name}">\n` +
        `      <failure message="${xmlText(verdictLine(v))}">${stacks}</failure>\n` +
        '    </testcase>'
      );
    });
    return (
      `  <testsuite name="heaphook check ${xmlText(log)}" tests="${verdicts.length}" failures="${failures}">\n` +
      `${cases.join('\n')}\n  </testsuite>`
    );
  });
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n${suites.join('\n')}\n</testsuites>\n`;
}

/**
 * A frame's source position, `function (file:line) [module+0x...]` -> file and line, when that
 * file is in the checkout (relative to the working directory, as GitHub wants it): frames in
 * the C library or other packages have no line of the repository to annotate.
 */
function sourceOf(frame: string): { file: string; line: number } | undefined {
  const m = /\(([^():]+):(\d+)\)/.exec(frame);
  if (m === null) return undefined;
  const file = relative(process.cwd(), resolve(m[1]!));
  if (file.startsWith('..') || !existsSync(file)) return undefined;
  return { file, line: Number(m[2]) };
}

/** `::error` lines for GitHub Actions: one per limit passed. */
export function githubAnnotations(log: string, verdicts: readonly Verdict[]): string {
  return verdicts
    .filter((v) => v.status !== 'ok')
    .map((v) => {
      const top = v.stacks[0]?.[1].find((frame) => sourceOf(frame) !== undefined);
      const at = top === undefined ? undefined : sourceOf(top);
      const props = [
        ...(at !== undefined ? [`file=${githubProperty(at.file)}`, `line=${at.line}`] : []),
        `title=${githubProperty(`heaphook check: ${v.limit.kind.name}`)}`,
      ].join(',');
      return `::error ${props}::${githubData(`${verdictLine(v)} (${log})`)}\n`;
    })
    .join('');
}
