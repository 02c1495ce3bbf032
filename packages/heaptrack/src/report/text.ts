/** The text summary `heaphook report` prints. */
import { terminalText } from '@heaphook/core';

import { formatBytes, formatCount, formatDuration } from './format.js';
import type { JsonRealtimeViolation, ReportJson, JsonSite } from './json.js';

/** Frames of a stack shown under its site line. */
const FRAMES_SHOWN = 8;

/**
 * A site's stack from the frame it is named by outwards (the allocator frames inside it are
 * counted, not listed: the JSON keeps them), at most FRAMES_SHOWN frames.
 */
export function stackLines(
  s: { site: string; stack: readonly string[] },
  indent: string,
): string[] {
  const at = Math.max(0, s.stack.indexOf(s.site));
  const shown = s.stack.slice(at);
  const out = shown.slice(0, FRAMES_SHOWN).map((f) => `${indent}${short(f)}`);
  if (shown.length > FRAMES_SHOWN)
    out.push(`${indent}... ${shown.length - FRAMES_SHOWN} more frames`);
  if (at > 0)
    out.push(
      `${indent}(called through ${at} allocator frame${at === 1 ? '' : 's'}: ${short(s.stack[0]!).replace(/ \(.*$/, '')}${at > 1 ? ', ...' : ''})`,
    );
  return out;
}

/** A site's name for a one-line table: its function, without the module part. */
export function siteName(site: string): string {
  return short(site).replace(/ \([^()]*:\d+\)$/, '');
}

function siteLines(title: string, sites: readonly JsonSite[], n: number): string[] {
  const out = [title];
  sites.slice(0, n).forEach((s, i) => {
    out.push(
      `  #${i + 1} ${siteName(s.site)}: peak ${formatBytes(s.peakBytes)}, ${formatCount(s.allocations)} allocations, ${formatBytes(s.bytes)} allocated, ${formatCount(s.temporary)} temporary`,
    );
    out.push(...stackLines(s, '      '));
  });
  if (sites.length === 0) out.push('  (none)');
  return out;
}

/** Why a run did not end normally (ReportJson.endedNormally false), from its END record. */
export function abnormalEnd(j: Pick<ReportJson, 'end' | 'error'>): string {
  if (j.error !== null) return `the log is damaged at byte ${j.error.offset}, so its end is unread`;
  switch (j.end) {
    case null:
      return 'the log has no END record (the process was killed or crashed, or the log was cut short)';
    case 'lost':
      return 'the process ended without its exit path (a crash, a signal, _exit or exec)';
    case 'collector':
      return 'the collector stopped before the process ended';
    case 'detach':
      return 'tracing was detached while the process went on';
    case 'write_error':
      return 'a write of the log failed (a full disk?), so it ends early, with the events written until then';
    default:
      return `the END record gives an unknown reason (${j.end})`;
  }
}

/** The headline of a run that did not end normally (undefined when it did). */
export function abnormalEndLine(j: ReportJson): string | undefined {
  if (j.endedNormally) return undefined;
  return `this run did not end normally: ${abnormalEnd(j)}; blocks still live are "live at the end", not leaks`;
}

/** The label of the leaked figure: blocks live at the end of a cut-short run are not leaks. */
export function leakedLabel(j: ReportJson): string {
  return !j.endedNormally && j.leakSource === 'never-freed'
    ? 'live at the end'
    : `leaked (${j.leakSource})`;
}

export function reportText(
  j: ReportJson,
  options: { sites?: number; preface?: string } = {},
): string {
  // Every site the JSON lists (report --top N): the tables show what --top asked for.
  const n = options.sites ?? Number.POSITIVE_INFINITY;
  const out: string[] = [];
  // Blocks live when a run is cut short were not necessarily leaked: say so before any figure.
  const abnormal = abnormalEndLine(j);
  if (abnormal !== undefined) out.push(abnormal);
  // Which log of a folder this is, and why (report DIR): before the figures.
  if (options.preface !== undefined) out.push(options.preface.replace(/\n$/, ''));
  out.push(`log: ${terminalText(j.log)}`);
  if (j.pid !== null) out.push(`process: ${j.pid} ${j.argv.map(quote).join(' ')}`);
  out.push(`duration: ${formatDuration(j.durationNs)}, ${formatCount(j.events)} events`);
  out.push(
    `calls: ${Object.entries(j.calls)
      .map(([op, c]) => `${op} ${formatCount(c)}`)
      .join(', ')}`,
  );
  out.push(`allocated: ${formatBytes(j.allocatedBytes)} (${formatCount(j.allocatedBytes)} bytes)`);
  out.push(
    `peak heap: ${formatBytes(j.peakHeapBytes)} (${formatCount(j.peakHeapBytes)} bytes) at ${formatDuration(j.peakTimeNs)}`,
  );
  out.push(
    `peak live blocks: ${formatCount(j.peakLiveBlocks)} at ${formatDuration(j.peakLiveBlocksTimeNs)}`,
  );
  out.push(
    `${leakedLabel(j)}: ${formatCount(j.leakedBlocks)} blocks, ${formatBytes(j.leakedBytes)} (${formatCount(j.leakedBytes)} bytes)`,
  );
  if (j.suppressedLeakedBlocks > 0 || j.suppressionFiles.length > 0) {
    out.push(
      `suppressed (known leaks, not counted above): ${formatCount(j.suppressedLeakedBlocks)} blocks, ${formatBytes(j.suppressedLeakedBytes)} (${formatCount(j.suppressedLeakedBytes)} bytes) by ${j.suppressionFiles.map(terminalText).join(', ') || 'no file'}`,
    );
  }
  if (j.leakSource === 'leak-check') {
    out.push(
      `reachable at exit: ${formatCount(j.reachableAtExitBlocks)} blocks, ${formatBytes(j.reachableAtExitBytes)}; never freed: ${formatCount(j.neverFreedBlocks)} blocks, ${formatBytes(j.neverFreedBytes)}`,
    );
  }
  out.push(`temporary allocations: ${formatCount(j.temporaryAllocations)}`);
  const m = j.mappedMemory;
  if (m !== null) {
    out.push(
      `mapped memory (VM events): peak ${formatBytes(m.peakBytes)} (${formatCount(m.peakBytes)} bytes) at ${formatDuration(m.peakTimeNs)}, ${formatBytes(m.finalBytes)} at the end; ${formatCount(m.mappedEvents)} mapped (${formatBytes(m.mappedBytes)}), ${formatCount(m.unmappedEvents)} unmapped (${formatBytes(m.unmappedBytes)})`,
    );
  }
  if (j.dropped > 0)
    out.push(
      `dropped events: ${formatCount(j.dropped)} (HEAPHOOK_ON_FULL=drop, or calls unfinished when tracing stopped)`,
    );
  if (j.freedBeforeAttach > 0)
    out.push(
      `freed, allocated before attach (left out of the figures): ${formatCount(j.freedBeforeAttach)}`,
    );
  if (j.unknownFrees > 0)
    out.push(
      `frees of blocks allocated before tracing started or outside this log (left out of the figures): ${formatCount(j.unknownFrees)}`,
    );
  out.push('allocation sizes:');
  const maxCount = Math.max(1, ...j.sizeHistogram.map((r) => r.count));
  for (const r of j.sizeHistogram) {
    const range = r.from === 0 ? '0' : `${formatBytes(r.from)}..${formatBytes(r.to - 1)}`;
    out.push(
      `  ${range.padStart(22)} ${formatCount(r.count).padStart(12)} ${'#'.repeat(Math.ceil((r.count / maxCount) * 40))}`,
    );
  }
  const latency = Object.entries(j.latency);
  if (latency.length > 0) {
    out.push(
      'latency (ns in the allocator):        p50        p90        p99      p99.9        max',
    );
    for (const [op, p] of latency) {
      out.push(
        `  ${op.padEnd(15)} ${formatCount(p.count).padStart(12)} ${[
          p.p50,
          p.p90,
          p.p99,
          p.p999,
          p.max,
        ]
          .map((v) => String(Math.round(v)).padStart(10))
          .join(' ')}`,
      );
    }
  }
  out.push(...siteLines('top sites by peak contribution:', j.topSites, n));
  out.push(...siteLines('top sites by allocations:', j.topSitesByCount, n));
  out.push(...siteLines('top sites by bytes allocated:', j.topSitesByBytes, n));
  if (m !== null && m.topSites.length > 0) {
    out.push('top mapping sites:');
    m.topSites.slice(0, n).forEach((s, i) => {
      out.push(
        `  #${i + 1} ${siteName(s.site)}: ${formatBytes(s.bytes)} in ${formatCount(s.mappings)} mappings`,
      );
      out.push(...stackLines(s, '      '));
    });
  }
  if (j.leakSites.length > 0) {
    out.push(`${leakedLabel(j) === 'live at the end' ? 'live at the end' : 'leaks'} by stack:`);
    for (const s of j.leakSites.slice(0, n)) {
      out.push(`  ${siteName(s.site)}: ${formatCount(s.blocks)} blocks, ${formatBytes(s.bytes)}`);
      out.push(...stackLines(s, '      '));
    }
  }
  if (j.suppressedLeakSites.length > 0) {
    out.push('suppressed leaks by stack:');
    for (const s of j.suppressedLeakSites.slice(0, n)) {
      out.push(
        `  ${siteName(s.site)}: ${formatCount(s.blocks)} blocks, ${formatBytes(s.bytes)} (${terminalText(s.suppression)}, ${terminalText(s.from)})`,
      );
    }
  }
  out.push(...realtimeLines(j.realtimeViolations));
  if (j.error !== null) out.push(`error: ${terminalText(j.error.message)}`);
  return `${out.join('\n')}\n`;
}

/** The real-time violations (rtcheck's guard under `heaphook record`), as rtcheck prints them. */
export function realtimeLines(violations: readonly JsonRealtimeViolation[]): string[] {
  if (violations.length === 0) return [];
  const calls = violations.reduce((n, v) => n + v.count, 0);
  const out = [
    `real-time violations: ${formatCount(calls)} calls at ${formatCount(violations.length)} call site${violations.length === 1 ? '' : 's'}`,
  ];
  for (const v of violations) {
    out.push(`  ${realtimeHeadline(v)}`);
    const frames = v.frames.slice(0, FRAMES_SHOWN).map((f) => `      ${realtimeFrame(f)}`);
    out.push(...frames);
    if (v.frames.length > FRAMES_SHOWN)
      out.push(`      ... ${v.frames.length - FRAMES_SHOWN} more frames`);
  }
  return out;
}

/** `malloc called 250 times in real-time thread "control" (tid 4242), SCHED_FIFO 10`. */
export function realtimeHeadline(v: JsonRealtimeViolation): string {
  const times = v.count === 1 ? 'once' : `${formatCount(v.count)} times`;
  const priority = v.policy === 'SCHED_FIFO' || v.policy === 'SCHED_RR' ? ` ${v.priority}` : '';
  return terminalText(
    `${v.call} called ${times} in real-time thread "${v.thread}" (tid ${v.tid}), ${v.policy}${priority}`,
  );
}

/** `control_step (control_loop.c:34)`. */
export function realtimeFrame(f: JsonRealtimeViolation['frames'][number]): string {
  const place = f.file !== null ? ` (${f.file}${f.line !== null ? `:${f.line}` : ''})` : '';
  return terminalText(`${f.function}${place}`);
}

/** A frame without its module part, for reading (terminalText: it may come from a file). */
function short(frame: string): string {
  return terminalText(frame.replace(/ \[[^\]]*\]$/, ''));
}

/** An argument as a shell would need it, on one line (terminalText: it is the program's). */
function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : terminalText(JSON.stringify(arg));
}
