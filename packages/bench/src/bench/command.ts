/**
 * `heaphook bench compare | micro | leakscan | attach | report-throughput | list`: the
 * comparative benchmark, contributed to `heaphook` like any other command (package.json's
 * `heaphook.commands`). `heaphook-bench` (../cli.ts, what `nx run bench:compare` runs) is an
 * alias of `heaphook bench`. The measuring modules are imported when their command runs, so
 * loading this one costs every other `heaphook` command nothing.
 */
import { HeaphookError, listBackends } from '@heaphook/core';
import { Command, InvalidArgumentError, Option } from 'commander';

import { discoverAllocators, parseCustom, parseVariant, type VariantDef } from '../allocators.js';
import { packageDir } from '../paths.js';
import { selectWorkloads, WORKLOADS } from '../workloads.js';

function positiveInt(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

function list(v: string): string[] {
  return v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

function intList(v: string): number[] {
  return list(v).map(positiveInt);
}

function collect<T>(parse: (v: string) => T) {
  return (v: string, prev: T[] = []) => [...prev, parse(v)];
}

/**
 * The command line of a run from its subcommand on (`compare --quick ...`), as the results
 * record it, whether it came through `heaphook bench` or `heaphook-bench`.
 */
function commandLine(subcommand: string): string {
  const at = process.argv.indexOf(subcommand, 2);
  return (at < 0 ? [subcommand] : process.argv.slice(at)).join(' ');
}

/**
 * A failed run (an unknown workload, a --variant that does not parse, a program that does not
 * build) is one line naming it, `heaphook bench: ...`, and the exit status 2, through the core's
 * main() as every command's errors.
 */
function usageErrors<A extends unknown[]>(
  action: (...args: A) => void | Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await action(...args);
    } catch (error) {
      if (error instanceof HeaphookError || !(error instanceof Error)) throw error;
      throw new HeaphookError(error.message, { namesCommand: true });
    }
  };
}

/** Adds the bench's subcommands to `bench`. */
export function registerBenchCommands(bench: Command): Command {
  bench
    .command('compare')
    .description(
      'run every workload under every allocator, interleaved and repeated; print the tables; write latest.{json,md,svg,png} into packages/bench/out (or --out)',
    )
    .option(
      '--quick',
      'smoke run: small sizes, 1 run, 2 threads, tracers on churn, xthread and python-json (~30 s)',
    )
    .option('--runs <n>', 'repetitions per cell (default 5; 1 with --quick)', positiveInt)
    .option(
      '--tracer-runs <n>',
      'repetitions of the heap-tracer runs (default 2; 1 with --quick)',
      positiveInt,
    )
    .option(
      '--allocators <list>',
      'only these allocators (glibc is always run: it is the baseline)',
      list,
    )
    .option(
      '--workloads <list>',
      `only these workloads (${WORKLOADS.map((w) => w.base).join(', ')}; or instances like larson-t2)`,
      list,
    )
    .option(
      '--threads <list>',
      'thread counts for threaded workloads (default 1,2; 2 with --quick)',
      intList,
    )
    .option(
      '--tracers <list>',
      "heap tracers to measure ('none' for none; default: every available one)",
      list,
    )
    .option('--no-tracers', 'do not measure heap-tracer overhead')
    .option(
      '--variant <spec>',
      'an extra allocator: NAME=BACKEND[:KEY=VALUE,...] (repeatable)',
      collect(parseVariant),
      [] as VariantDef[],
    )
    .option(
      '--preload <spec>',
      'an extra allocator from any library: NAME=/path/lib.so (repeatable)',
      collect(parseCustom),
      [] as Array<{ name: string; path: string }>,
    )
    .option(
      '--timeout <seconds>',
      'kill a run after this long and count it as failed (default 300; 60 with --quick)',
      positiveInt,
    )
    .option('--seed <n>', 'seed of every workload', positiveInt, 42)
    .addOption(
      new Option('--size <n>', 'the same size for every workload (for tests)')
        .argParser(positiveInt)
        .hideHelp(),
    )
    .option(
      '--out <dir>',
      'where to write latest.json, latest.md, latest.svg, latest.png (default packages/bench/out, ignored by git)',
    )
    .option('--no-write', 'do not write result files')
    .option('--no-progress', 'no progress bar')
    .option('--no-warmup', 'skip the untimed warm-up pass')
    .option('--no-ucm-hooks', 'do not measure the memory-event hooks (ns per hooked call)')
    .option(
      '--only-ucm-hooks',
      'only the memory-event hooks section: heaphook preload/relocation against libucm',
    )
    .option(
      '--ucm-runs <n>',
      'interleaved runs of the memory-event hooks (default 5; 2 with --quick)',
      positiveInt,
    )
    .option('--strict', 'exit 1 when any cell failed (default: only when a glibc cell failed)')
    .action(
      usageErrors(async (o: Record<string, unknown>) => {
        let tracers: boolean | string[] = true;
        if (o.tracers === false) tracers = false;
        else if (Array.isArray(o.tracers))
          tracers = o.tracers.includes('none') ? false : (o.tracers as string[]);
        const { compare } = await import('../compare.js');
        const outcome = await compare({
          profile: o.quick ? 'quick' : 'default',
          ...(o.runs !== undefined ? { runs: o.runs as number } : {}),
          ...(o.tracerRuns !== undefined ? { tracerRuns: o.tracerRuns as number } : {}),
          ...(o.allocators ? { allocators: o.allocators as string[] } : {}),
          ...(o.workloads ? { workloads: o.workloads as string[] } : {}),
          ...(o.threads ? { threads: o.threads as number[] } : {}),
          tracers,
          variants: o.variant as VariantDef[],
          custom: o.preload as Array<{ name: string; path: string }>,
          ...(o.timeout !== undefined ? { timeoutS: o.timeout as number } : {}),
          seed: o.seed as number,
          ...(o.size !== undefined ? { size: o.size as number } : {}),
          ...(typeof o.out === 'string' ? { outDir: o.out } : {}),
          write: o.write !== false,
          progress: o.progress !== false,
          warmup: o.warmup !== false,
          ucmHooks: o.ucmHooks !== false,
          onlyUcmHooks: o.onlyUcmHooks === true,
          ...(o.ucmRuns !== undefined ? { ucmRuns: o.ucmRuns as number } : {}),
          command: commandLine('compare'),
        });
        process.stdout.write(`\n${outcome.report}\n`);
        const cells = outcome.results.cells;
        const glibcFailed = cells.some((c) => c.allocator === 'glibc' && c.status === 'failed');
        const anyFailed =
          cells.some((c) => c.status === 'failed') ||
          outcome.results.ucm_hooks?.status === 'failed';
        if (glibcFailed)
          process.stderr.write(
            'error: a workload failed under glibc: the bench itself is broken\n',
          );
        process.exitCode = glibcFailed || (o.strict && anyFailed) ? 1 : 0;
      }),
    );

  bench
    .command('micro')
    .description(
      'benchmark.js suite: TLSF against the process malloc through the addons; skips what is not built',
    )
    .option('--quick', 'short sampling (0.25 s per case)')
    .option('--out <dir>', 'where to write micro.json (default packages/bench/out)')
    .option('--no-write', 'do not write micro.json')
    .action(
      usageErrors(async (o: { quick?: boolean; out?: string; write?: boolean }) => {
        const { micro } = await import('../micro.js');
        await micro({
          quick: o.quick ?? false,
          ...(o.out ? { outDir: o.out } : {}),
          write: o.write !== false,
        });
      }),
    );

  bench
    .command('leakscan')
    .description(
      'time of the leak check at exit for 1e5 and 1e6 live blocks: heaphook tracer vs LeakSanitizer',
    )
    .option('--runs <n>', 'repetitions per cell (default 3)', positiveInt)
    .option('--sizes <list>', 'live blocks (default 100000,1000000)', intList)
    .action(
      usageErrors(async (o: { runs?: number; sizes?: number[] }) => {
        const { formatLeakScan, leakScan } = await import('../leakscan.js');
        const rows = await leakScan({
          ...(o.runs ? { runs: o.runs } : {}),
          ...(o.sizes ? { sizes: o.sizes } : {}),
        });
        process.stdout.write(formatLeakScan(rows));
      }),
    );

  bench
    .command('attach')
    .description(
      'what `heaphook record -p` costs a running process: its throughput traced and after the detach, the pause the attach and the detach cause (ms), their wall time; write latest.json into packages/bench/out/attach',
    )
    .option('--runs <n>', 'interleaved runs per target (default 5)', positiveInt)
    .option('--no-write', 'do not write packages/bench/out/attach/latest.json')
    .action(
      usageErrors(async (o: { runs?: number; write?: boolean }) => {
        const { attachBench, formatAttach } = await import('../attach.js');
        const rows = await attachBench({
          ...(o.runs ? { runs: o.runs } : {}),
          write: o.write !== false,
        });
        process.stdout.write(formatAttach(rows));
      }),
    );

  bench
    .command('report-throughput')
    .description(
      "time heaphook's report pass (native and TypeScript) and `heaphook report --json` on a 10M-event log next to heaptrack_print on KDE heaptrack's trace of the same program; peak RSS at 1x, 2x, 4x the log; write latest.{json,md} into packages/bench/out/report-throughput (or --out)",
    )
    .option('--quick', 'small logs, 1 run (the test uses it)')
    .option('--runs <n>', 'interleaved runs of each tool (default 5; 1 with --quick)', positiveInt)
    .option(
      '--size <n>',
      'churn operations of the 1x log (default 1250000: 4x = 10M events)',
      positiveInt,
    )
    .option(
      '--out <dir>',
      'where to write latest.json and latest.md (default packages/bench/out/report-throughput)',
    )
    .option('--no-write', 'do not write result files')
    .action(
      usageErrors(
        async (o: {
          quick?: boolean;
          runs?: number;
          size?: number;
          out?: string;
          write?: boolean;
        }) => {
          const { formatThroughput, reportThroughput } = await import('../reportthroughput.js');
          const r = await reportThroughput({
            quick: o.quick === true,
            ...(o.runs !== undefined ? { runs: o.runs } : {}),
            ...(o.size !== undefined ? { size: o.size } : {}),
            ...(o.out ? { outDir: o.out } : {}),
            write: o.write !== false,
          });
          process.stdout.write(`\n${formatThroughput(r)}\n`);
        },
      ),
    );

  bench
    .command('list')
    .description(
      'the allocators, tracers and workloads a comparison would use, and what is skipped',
    )
    .option('--threads <list>', 'thread counts for threaded workloads', intList, [1, 2])
    .action(
      usageErrors((o: { threads: number[] }) => {
        const found = discoverAllocators({ backends: listBackends({ from: packageDir }) });
        const line = (a: { name: string; status: string; reason?: string; description: string }) =>
          `  ${a.name.padEnd(26)} ${a.status === 'ready' ? a.description : `skipped: ${a.reason ?? ''}`}`;
        process.stdout.write(
          [
            'allocators:',
            ...found.allocators.map(line),
            'tracers:',
            ...found.tracers.map(line),
            'workloads:',
          ].join('\n') + '\n',
        );
        for (const w of selectWorkloads({ profile: 'default', threads: o.threads })) {
          process.stdout.write(
            `  ${w.name.padEnd(26)} ${w.status === 'ready' ? w.description : `skipped: ${w.reason ?? ''}`}\n`,
          );
        }
      }),
    );

  return bench;
}

export function register(program: Command): void {
  registerBenchCommands(
    program
      .command('bench')
      .description(
        'compare heaphook backends with glibc, jemalloc, mimalloc and tcmalloc on native workloads (compare, micro, leakscan, attach, report-throughput, list)',
      ),
  );
}
