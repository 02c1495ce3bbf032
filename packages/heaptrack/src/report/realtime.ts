/**
 * Real-time violations of a log (RT_VIOLATION records, `heaphook record -b rtcheck`): rtcheck's
 * guard writes one per (call, call site, thread) at its first call, with the stack, and again at
 * exit with the final count. The report keeps one per site: the largest count, the first stack.
 */
import { schedPolicyName } from '@heaphook/core';

import type { RtViolationRecord } from '../decode/records.js';

export interface RealtimeViolation {
  /** The guard's number of the (call, call site, thread). */
  readonly site: number;
  readonly call: string;
  readonly count: number;
  readonly tid: number;
  /** The thread's name (comm). */
  readonly thread: string;
  /** SCHED_FIFO, SCHED_RR, SCHED_DEADLINE, or SCHED_OTHER for a marked section. */
  readonly policy: string;
  readonly priority: number;
  /** Stack node of the violating call (0 = none recorded). */
  readonly stack: number;
}

/** Collects the records of a log, in log order. */
export class RealtimeViolations {
  private readonly bySite = new Map<number, RealtimeViolation>();

  add(r: RtViolationRecord): void {
    const seen = this.bySite.get(r.site);
    if (seen !== undefined && seen.count >= r.count && (seen.stack !== 0 || r.stack === 0)) return;
    this.bySite.set(r.site, {
      site: r.site,
      call: r.call,
      count: Math.max(r.count, seen?.count ?? 0),
      tid: r.tid,
      thread: r.threadName,
      policy: schedPolicyName(r.policy),
      priority: r.priority,
      stack: seen !== undefined && seen.stack !== 0 ? seen.stack : r.stack,
    });
  }

  /** Most calls first. */
  finish(): RealtimeViolation[] {
    return [...this.bySite.values()].sort((a, b) => b.count - a.count || a.site - b.site);
  }
}
