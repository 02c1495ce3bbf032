/**
 * CLI subcommands contributed to `heaphook` (see @heaphook/core's cli):
 *   heaphook record [-o DIR] [-b BACKEND] [-e KEY=VALUE] [--no-vm] -- <command> [args...]
 *   heaphook dump [--stacks] [--summary] <log>
 *   heaphook recommend [--margin PCT] [--json] <log>
 *   heaphook report [-o DIR] [--json] <log>
 */
import type { Command } from 'commander';

import { collectList, HeaphookError, parseEnvAssignment } from '@heaphook/core';

import { EXIT_DAMAGED_LOG, LogFormatError } from './decode/decoder.js';
import { dump } from './report/dump.js';
import { registerRecommend } from './recommend/command.js';
import { registerReport } from './report/command.js';
import { record } from './record/record.js';
import type { StackNodeRecord } from './decode/records.js';
import { framesOf, summarize, type LeakCheckSummary, type LeakSite } from './report/summary.js';
import { formatFrame, Symbolizer } from './report/symbolize.js';

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
  const s = await summarize(path, { leakBlocks: false });
  const out: string[] = [];
  const p = s.process;
  out.push(`log: ${path}`);
  if (p !== undefined) out.push(`process: ${p.pid} ${p.argv.join(' ')}`);
  out.push(`events: ${s.events}`);
  for (const [op, n] of Object.entries(s.calls)) {
    if (n > 0 && op !== 'realloc_done') out.push(`  ${op}: ${n}`);
  }
  out.push(`allocated: ${s.allocatedBytes} bytes`);
  out.push(`peak: ${s.peakBytes} bytes at ${(s.peakTime / 1e9).toFixed(6)} s`);
  // Not yet a verdict: the leak checks below (when the log has them) split these blocks into
  // leaked and still reachable.
  out.push(`never freed: ${s.liveBlocks} blocks, ${s.liveBytes} bytes`);
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

export function register(program: Command): void {
  program
    .command('record')
    .description('trace every allocation of a command (and its children) into heaplog.<pid>.log')
    .option('-o, --output-dir <dir>', 'where the logs go', '.')
    .option(
      '-b, --backend <name>',
      'trace this backend instead of the libc heap (repeatable)',
      collectList,
      [],
    )
    .option(
      '-e, --env <KEY=VALUE>',
      'environment for the command (repeatable)',
      parseEnvAssignment,
      {},
    )
    .option(
      '--no-vm',
      'do not record mapped memory (by default, when @heaphook/ucm-hooks is installed, it is preloaded first and its VM events are recorded)',
    )
    .option('-q, --quiet', 'do not list the logs written')
    .argument('<command>', 'the program to run')
    .argument('[args...]', 'its arguments (put -- before the command)')
    .passThroughOptions()
    .action(
      async (
        command: string,
        args: string[],
        options: {
          outputDir: string;
          backend: string[];
          env: Record<string, string>;
          vm: boolean;
          quiet?: boolean;
        },
      ) => {
        const result = await record(command, args, {
          outputDir: options.outputDir,
          backends: options.backend,
          env: options.env,
          ...(options.vm ? {} : { vm: false }),
          ...(options.quiet === true ? { quiet: true } : {}),
        });
        process.exitCode = result.status;
      },
    );

  program
    .command('dump')
    .description('print a heaplog, one line per event (function name first, then its fields)')
    .argument('<log>', 'a heaplog.<pid>.log file')
    .option('-s, --stacks', 'print the symbolised stack under each event')
    .option('--summary', 'print totals, peak and leaks instead of the events')
    .option('--no-headers', 'leave out the # process / module / end lines')
    .action(
      async (log: string, options: { stacks?: boolean; summary?: boolean; headers: boolean }) => {
        try {
          if (options.summary === true) await printSummary(log);
          else await dump(log, { stacks: options.stacks === true, headers: options.headers });
        } catch (error) {
          if (error instanceof LogFormatError) {
            throw new HeaphookError(error.message, { exitStatus: EXIT_DAMAGED_LOG });
          }
          throw error;
        }
      },
    );

  registerRecommend(program);
  registerReport(program);
}
