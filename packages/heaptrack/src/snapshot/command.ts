/**
 * `heaphook snapshot PID -o heap.pb.gz [--duration 1s] [--every 30s]`: the heap of a running
 * process, as seen since heaphook attached to it, as a gzipped pprof profile: alloc_* (what was
 * allocated since the attach), inuse_* (what of it is still live at the snapshot) and
 * peak_space (each stack's share of the heap's peak since the attach). Blocks allocated before
 * the attach have no stack and are in none of them (the report counts their frees apart).
 */
import type { Command } from 'commander';

import { HeaphookError, terminalText } from '@heaphook/core';

import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

import {
  attachRunning,
  parseDuration,
  trapSignals,
  type CollectorDeath,
  type RunningRecording,
} from '../record/running.js';
import { buildReportModel } from '../report/run.js';
import { pprofBytes } from '../report/pprof.js';
import { StackNames } from '../report/symbols.js';
import { parseProcessId } from '../process-id.js';

/** What one snapshot wrote. */
export interface SnapshotFigures {
  readonly file: string;
  readonly sites: number;
  readonly inUseBytes: number;
  readonly allocatedBytes: number;
  readonly peakBytes: number;
  readonly freedBeforeAttach: number;
}

/** Writes the profile of the log (in progress or finished) to file. */
export async function writeSnapshot(log: string, file: string): Promise<SnapshotFigures> {
  // A log still being written ends in a block the collector has not finished: the model covers
  // what comes before it.
  const { model } = await buildReportModel(log, { progress: false });
  const names = await StackNames.of(
    model,
    model.sites.map((s) => s.stack),
    { symbolize: true },
  );
  writeFileSync(file, pprofBytes(model, names));
  return {
    file,
    sites: model.sites.length,
    inUseBytes: model.finalLiveBytes,
    allocatedBytes: model.allocatedBytes,
    peakBytes: model.peakHeapBytes,
    freedBeforeAttach: model.freedBeforeAttach,
  };
}

/** heap.pb.gz -> heap.3.pb.gz (the n-th snapshot of --every). */
export function numberedFile(file: string, n: number): string {
  const name = basename(file);
  const at = name.endsWith('.pb.gz')
    ? name.length - 6
    : name.lastIndexOf('.') > 0
      ? name.lastIndexOf('.')
      : name.length;
  return join(dirname(file), `${name.slice(0, at)}.${n}${name.slice(at)}`);
}

function describe(f: SnapshotFigures): string {
  return `heaphook snapshot: wrote ${f.file}: ${f.sites} stacks, in use ${f.inUseBytes} bytes, allocated ${f.allocatedBytes} bytes, peak ${f.peakBytes} bytes since the attach\n`;
}

/** The log of the attached process (the collector writes it in logDir). */
function logOf(logDir: string, pid: number): string {
  return join(logDir, `heaplog.${pid}.log`);
}

/** Waits ms, or less when stop() resolves first; true when stopped. */
function sleepUnless(ms: number, stopped: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    stopped.then(() => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms))),
  ]).finally(() => clearTimeout(timer));
}

export interface SnapshotOptions {
  readonly output: string;
  readonly durationMs: number;
  /** Continuous mode: one snapshot per period until interrupted or the process exits. */
  readonly everyMs?: number;
  readonly quiet?: boolean;
}

/** Attaches to pid, writes the snapshot(s), detaches. */
export async function snapshot(pid: number, options: SnapshotOptions): Promise<SnapshotFigures[]> {
  const output = resolve(options.output);
  const logDir = dirname(output);
  mkdirSync(logDir, { recursive: true });
  const trap = trapSignals();
  let recording: RunningRecording;
  try {
    recording = await attachRunning([pid], { outputDir: logDir, quiet: true });
  } catch (error) {
    trap.release();
    throw error;
  }
  let death: CollectorDeath | undefined;
  const stopped = Promise.race([
    trap.interrupted,
    recording.allExited,
    recording.collectorDied.then((d) => void (death = d)),
  ]);
  const written: SnapshotFigures[] = [];
  const say = (f: SnapshotFigures): void => {
    written.push(f);
    if (options.quiet !== true) process.stderr.write(describe(f));
  };
  let logs;
  try {
    if (options.everyMs !== undefined) {
      for (let n = 1; !(await sleepUnless(options.everyMs, stopped)); n++) {
        say(await writeSnapshot(logOf(logDir, pid), numberedFile(output, n)));
      }
    } else {
      await sleepUnless(options.durationMs, stopped);
    }
  } finally {
    logs = await recording.stop();
    trap.release();
  }

  const own = logs.find((l) => l.pid === pid);
  if (own === undefined)
    throw new HeaphookError(`no log of process ${pid} was written`, { namesCommand: true });
  const last = options.everyMs !== undefined ? numberedFile(output, written.length + 1) : output;
  say(await writeSnapshot(own.path, last));
  if (options.quiet !== true) {
    // The trace the profiles were made from stays beside them: say so, and what reads it.
    process.stderr.write(
      `heaphook snapshot: the trace it was made from is ${terminalText(own.path)} (heaphook report ${terminalText(own.path)} reads it; delete it when done)\n`,
    );
  }
  if (death !== undefined) {
    // The process detached itself; the last snapshot holds what the collector wrote before.
    throw new HeaphookError(
      `the collector for process ${pid} was ${death.how} while tracing: ${terminalText(last)} holds the heap up to then (the process runs on, detached)`,
      { exitStatus: 1 },
    );
  }
  return written;
}

export function register(program: Command): void {
  program
    .command('snapshot')
    .description(
      'attach to a running process, trace it, and write its heap since the attach as a pprof profile (in use, allocated, peak by stack); then detach',
    )
    .argument('<pid>', 'the running process')
    .requiredOption('-o, --output <file>', 'the profile to write (gzipped pprof, e.g. heap.pb.gz)')
    .option('--duration <time>', 'how long to trace before the snapshot (10s, 500ms)', '1s')
    .option(
      '--every <time>',
      'continuous mode: a snapshot every period (heap.1.pb.gz, heap.2.pb.gz ...) until Ctrl-C or the process exits',
    )
    .option('-q, --quiet', 'do not list the files written')
    .action(
      async (
        pidText: string,
        options: { output: string; duration: string; every?: string; quiet?: boolean },
      ) => {
        const pid = parseProcessId(pidText, pidText);
        await snapshot(pid, {
          output: options.output,
          durationMs: parseDuration(options.duration),
          ...(options.every !== undefined ? { everyMs: parseDuration(options.every) } : {}),
          ...(options.quiet === true ? { quiet: true } : {}),
        });
      },
    );
}
