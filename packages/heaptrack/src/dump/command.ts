/**
 * `heaphook dump [--stacks] [--summary] [--json] <log | DIR [--pid N | --all]>`: a heaplog one
 * line per event, as JSON Lines, or its totals, peak and leaks (--summary).
 */
import type { Command } from 'commander';

import { jsonText, terminalText } from '@heaphook/core';

import { decodeLog } from '../decode/events.js';
import { chosenLogs, LOG_OR_FOLDER, withLogChoice } from '../decode/log-choice.js';
import type { StackNodeRecord } from '../decode/records.js';
import { dump } from '../report/dump.js';
import { startProgress } from '../report/progress.js';
import { framesOf, summarize, type LeakCheckSummary, type LeakSite } from '../report/summary.js';
import { formatFrame, Symbolizer } from '../report/symbolize.js';

async function printLeakChecks(
  checks: readonly LeakCheckSummary[],
  stacks: ReadonlyMap<number, StackNodeRecord>,
  symbolizer: Symbolizer,
  out: string[],
): Promise<void> {
  for (const { check: c, leaked, reachable } of checks) {
    out.push(
      `leak check ${c.check} (${c.trigger}): ${c.leakedBlocks} of ${c.liveBlocks} blocks leaked ` +
        `(${c.leakedBytes} bytes), ${c.reachableBlocks} never freed but still reachable ` +
        `(${c.reachableBytes} bytes); world stopped ${(c.durationNs / 1e6).toFixed(3)} ms`,
    );
    const groups: [string, LeakSite[]][] = [
      ['leaked', leaked],
      ['reachable', reachable.slice(0, 5)],
    ];
    for (const [label, sites] of groups) {
      for (const site of sites.slice(0, 10)) {
        out.push(`  ${label}: ${site.blocks} blocks, ${site.bytes} bytes`);
        const pcs = framesOf(stacks, site.stack);
        const frames = await symbolizer.symbolize(pcs);
        for (const pc of pcs) {
          for (const f of frames.get(pc) ?? []) out.push(`      ${formatFrame(f)}`);
        }
      }
    }
  }
}

async function printSummary(path: string): Promise<void> {
  const progress = startProgress(path);
  let s;
  try {
    s = await summarize(path, { leakBlocks: false, onBlock: (n) => progress.update(n) });
  } finally {
    progress.stop();
  }
  const out: string[] = [];
  const p = s.process;
  out.push(`log: ${terminalText(path)}`);
  if (p !== undefined) out.push(`process: ${p.pid} ${terminalText(p.argv.join(' '))}`);
  out.push(`events: ${s.events}`);
  for (const [op, n] of Object.entries(s.calls)) {
    if (n > 0 && op !== 'realloc_done') out.push(`  ${op}: ${n}`);
  }
  out.push(`allocated: ${s.allocatedBytes} bytes`);
  out.push(`peak: ${s.peakBytes} bytes at ${(s.peakTime / 1e9).toFixed(6)} s`);
  // Not yet a verdict: the leak checks below (when the log has them) split these blocks into
  // leaked and still reachable.
  out.push(`never freed: ${s.liveBlocks} blocks, ${s.liveBytes} bytes`);
  if (s.freedBeforeAttach > 0)
    out.push(`freed, allocated before attach: ${s.freedBeforeAttach} blocks`);
  if (s.mapped !== undefined) {
    const m = s.mapped;
    out.push(
      `mapped: peak ${m.peakBytes} bytes at ${(m.peakTimeNs / 1e9).toFixed(6)} s, ${m.finalBytes} bytes at the end; ${m.mappedEvents} mapped (${m.mappedBytes} bytes), ${m.unmappedEvents} unmapped (${m.unmappedBytes} bytes)`,
    );
  }
  if (s.end !== undefined) out.push(`end: ${s.end.reason}, ${s.end.dropped} dropped`);
  else out.push('end: none (the log stops without an END record)');
  const symbolizer = new Symbolizer(s.modules);
  for (const site of s.leakSites.slice(0, 10)) {
    out.push(`never freed: ${site.blocks} blocks, ${site.bytes} bytes`);
    const pcs = framesOf(s.stacks, site.stack);
    const frames = await symbolizer.symbolize(pcs);
    for (const pc of pcs) for (const f of frames.get(pc) ?? []) out.push(`    ${formatFrame(f)}`);
  }
  await printLeakChecks(s.leakChecks, s.stacks, symbolizer, out);
  process.stdout.write(`${out.join('\n')}\n`);
}

/** dump --json: every record of the log as one JSON object per line (with its log under --all). */
async function dumpJson(path: string, withLog: boolean): Promise<void> {
  const lines: string[] = [];
  const flush = (): void => {
    if (lines.length > 0) process.stdout.write(`${lines.join('\n')}\n`);
    lines.length = 0;
  };
  for await (const record of decodeLog(path)) {
    lines.push(jsonText(withLog ? { log: path, ...record } : record));
    if (lines.length >= 4096) flush();
  }
  flush();
}

export function register(program: Command): void {
  const dumpCommand = program
    .command('dump')
    .description('print a heaplog, one line per event (function name first, then its fields)')
    .argument('<log>', LOG_OR_FOLDER)
    .option('-s, --stacks', 'print the symbolised stack under each event')
    .option('--summary', 'print totals, peak and leaks instead of the events')
    .option('--no-headers', 'leave out the # process / module / end lines')
    .option('--json', 'print every record as one line of JSON (JSON Lines) instead of text');
  withLogChoice(dumpCommand, true).action(
    async (
      target: string,
      options: {
        stacks?: boolean;
        summary?: boolean;
        headers: boolean;
        json?: boolean;
        pid?: number;
        all?: boolean;
      },
    ) => {
      for (const log of chosenLogs(target, options)) {
        if (options.all === true && options.json !== true)
          process.stdout.write(`== ${terminalText(log)}\n`);
        // A damaged log is a LogFormatError: main() prints it and exits EXIT_DAMAGED_LOG.
        if (options.summary === true) await printSummary(log);
        else if (options.json === true) await dumpJson(log, options.all === true);
        else await dump(log, { stacks: options.stacks === true, headers: options.headers });
      }
    },
  );
}
