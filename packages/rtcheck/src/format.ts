/** The command's printed report and its JSON. */
import { displayText, jsonText } from '@heaphook/core';

import type { Analysis, Violation, ViolationFrame } from './analyze.js';

function frameLine(f: ViolationFrame): string {
  const where =
    f.file !== undefined ? ` (${f.file}${f.line !== undefined ? `:${f.line}` : ''})` : '';
  const module = f.module !== '' ? ` [${f.module}+0x${f.offset.toString(16)}]` : '';
  return displayText(`${f.inlined ? '(inlined) ' : ''}${f.function}${where}${module}`);
}

function threadText(v: { thread: string; tid: number; pid: number }): string {
  return `thread ${displayText(JSON.stringify(v.thread))} (tid ${v.tid}, pid ${v.pid})`;
}

function violationText(v: Violation): string[] {
  const times = v.count === 1 ? '1 time' : `${v.count} times`;
  return [
    `heaphook rtcheck: ${v.call} called ${times} in real-time ${threadText(v)}, ${v.policy} ${v.priority}`,
    ...v.frames.map((f) => `    ${frameLine(f)}`),
  ];
}

/** The text printed after the program ends (on stderr: the program's stdout stays its own). */
export function formatAnalysis(a: Analysis): string {
  const out: string[] = [];
  for (const v of a.violations) out.push(...violationText(v));
  for (const f of a.pageFaults) {
    out.push(
      `heaphook rtcheck: page faults in the real-time context of ${threadText(f)}: ${f.minor} minor, ${f.major} major`,
    );
  }
  const total = a.violations.reduce((n, v) => n + v.count, 0);
  const sites = a.violations.length;
  const suppressed = a.suppressed.reduce((n, v) => n + v.count, 0);
  const parts = [
    total === 0
      ? 'no violation in a real-time context'
      : `${total} violation${total === 1 ? '' : 's'} at ${sites} call site${sites === 1 ? '' : 's'}`,
  ];
  if (suppressed > 0) parts.push(`${suppressed} suppressed`);
  if (a.dropped > 0) parts.push(`${a.dropped} not recorded (the table was full)`);
  if (a.aborted) parts.push('stopped at the first one (--abort)');
  if (a.incomplete.length > 0) parts.push(`incomplete report of pid ${a.incomplete.join(', ')}`);
  if (a.processes === 0) {
    parts.unshift(
      'no process wrote a report: the guard did not run (a statically linked program, or one stopped before main)',
    );
  }
  out.push(`heaphook rtcheck: ${parts.join('; ')}`);
  return `${out.join('\n')}\n`;
}

/** --json FILE: `violations: [{call, count, thread, policy, frames: [{function, file, line}]}]`
 * and the rest of the analysis. */
export function analysisJson(a: Analysis, status: { program: number; command: number }): string {
  return jsonText(
    {
      violations: a.violations,
      suppressed: a.suppressed,
      pageFaults: a.pageFaults,
      dropped: a.dropped,
      aborted: a.aborted,
      programExitStatus: status.program,
      exitStatus: status.command,
    },
    2,
  );
}
