/**
 * CLI subcommands contributed to `heaphook` (see @heaphook/core's cli):
 *   heaphook record [-o DIR] [-b BACKEND] [-e KEY=VALUE] -- <command> [args...]
 *   heaphook dump [--stacks] [--summary] <log>
 *   heaphook recommend [--margin PCT] [--json] <log>
 *   heaphook report [-o DIR] [--json] <log>
 */
import type { Command } from 'commander';

import { collectList, HeaphookError, parseEnvAssignment } from '@heaphook/core';

import { LogFormatError } from './decoder.js';
import { dump } from './dump.js';
import { registerRecommend } from './recommend/command.js';
import { registerReport } from './report/command.js';
import { record } from './record.js';
import { framesOf, summarize } from './summary.js';
import { formatFrame, Symbolizer } from './symbolize.js';

async function printSummary(path: string): Promise<void> {
  const s = await summarize(path);
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
  out.push(`leaked: ${s.leaks.length} blocks, ${s.liveBytes} bytes`);
  if (s.end !== undefined) out.push(`end: ${s.end.reason}, ${s.end.dropped} dropped`);
  else out.push('end: none (the log stops without an END record)');
  const symbolizer = new Symbolizer(s.modules);
  for (const site of s.leakSites.slice(0, 10)) {
    out.push(`leak: ${site.blocks} blocks, ${site.bytes} bytes`);
    const pcs = framesOf(s.stacks, site.stack);
    const frames = await symbolizer.symbolize(pcs);
    for (const pc of pcs) for (const f of frames.get(pc) ?? []) out.push(`    ${formatFrame(f)}`);
  }
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
          quiet?: boolean;
        },
      ) => {
        const result = await record(command, args, {
          outputDir: options.outputDir,
          backends: options.backend,
          env: options.env,
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
          if (error instanceof LogFormatError) throw new HeaphookError(error.message);
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
            throw new HeaphookError(`no such log: ${log}`);
          }
          throw error;
        }
      },
    );

  registerRecommend(program);
  registerReport(program);
}
