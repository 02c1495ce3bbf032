/**
 * From the processes' report files to the violations the command prints and writes as JSON:
 * frames symbolised with heaptrack's Symbolizer (addr2line over the module map each file
 * carries), suppressions applied.
 */
import { schedPolicyName } from '@heaphook/core';
import { Symbolizer, type Frame } from '@heaphook/heaptrack';

import { type RawReport } from './report-file.js';
import { suppressedBy, type Suppression } from './suppressions.js';

/** A frame of a violation's stack: heaptrack's symbolised Frame without its return address. */
export type ViolationFrame = Omit<Frame, 'pc'>;

export interface Violation {
  readonly call: string;
  readonly count: number;
  /** The thread's name (comm). */
  readonly thread: string;
  readonly tid: number;
  readonly pid: number;
  /** SCHED_FIFO, SCHED_RR, SCHED_DEADLINE, or SCHED_OTHER for a marked section. */
  readonly policy: string;
  readonly priority: number;
  /** Innermost first: the function that made the call is the first. */
  readonly frames: readonly ViolationFrame[];
}

export interface SuppressedViolation extends Violation {
  readonly suppressedBy: string;
}

export interface PageFaults {
  readonly thread: string;
  readonly tid: number;
  readonly pid: number;
  readonly policy: string;
  readonly minor: number;
  readonly major: number;
}

export interface Analysis {
  readonly violations: readonly Violation[];
  readonly suppressed: readonly SuppressedViolation[];
  readonly pageFaults: readonly PageFaults[];
  /** Violations lost to a full table (their count is unknown): the check is not clean. */
  readonly dropped: number;
  /** True when a process stopped at its first violation (--abort). */
  readonly aborted: boolean;
  /** Processes whose report stops short (killed while writing it). */
  readonly incomplete: readonly number[];
  /** Processes that wrote a report: 0 when the guard never ran (a static program, a process
   * stopped before main). */
  readonly processes: number;
}

function toFrame(f: Frame): ViolationFrame {
  return {
    function: f.function,
    ...(f.file !== undefined ? { file: f.file } : {}),
    ...(f.line !== undefined && f.line > 0 ? { line: f.line } : {}),
    module: f.module,
    offset: f.offset,
    inlined: f.inlined,
  };
}

export async function analyze(
  reports: readonly RawReport[],
  rules: readonly Suppression[],
): Promise<Analysis> {
  const violations: Violation[] = [];
  const suppressed: SuppressedViolation[] = [];
  const pageFaults: PageFaults[] = [];
  for (const report of reports) {
    const symbolizer = new Symbolizer(report.modules);
    const frames = await symbolizer.symbolize(report.violations.flatMap((v) => v.pcs));
    for (const raw of report.violations) {
      const stack = raw.pcs.flatMap((pc) => (frames.get(pc) ?? []).map(toFrame));
      const violation: Violation = {
        call: raw.call,
        count: raw.count,
        thread: raw.thread,
        tid: raw.tid,
        pid: report.pid,
        policy: schedPolicyName(raw.policy),
        priority: raw.priority,
        frames: stack,
      };
      const rule = suppressedBy(rules, {
        call: raw.call,
        thread: raw.thread,
        functions: stack.map((f) => f.function),
        files: stack.flatMap((f) => (f.file !== undefined ? [f.file] : [])),
      });
      if (rule !== undefined) suppressed.push({ ...violation, suppressedBy: rule.line });
      else violations.push(violation);
    }
    for (const t of report.threads) {
      pageFaults.push({
        thread: t.thread,
        tid: t.tid,
        pid: report.pid,
        policy: schedPolicyName(t.policy),
        minor: t.minorFaults,
        major: t.majorFaults,
      });
    }
  }
  violations.sort((a, b) => b.count - a.count);
  return {
    violations,
    suppressed,
    pageFaults,
    dropped: reports.reduce((n, r) => n + r.dropped, 0),
    aborted: reports.some((r) => r.mode === 'abort'),
    incomplete: reports.filter((r) => !r.complete).map((r) => r.pid),
    processes: reports.length,
  };
}
