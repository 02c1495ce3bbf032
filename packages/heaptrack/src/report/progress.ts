/**
 * Progress on standard error while a log is read, once reading has taken PROGRESS_AFTER_MS:
 * a bar when stderr is a terminal, a line every PROGRESS_LINE_MS otherwise (a CI log). The
 * decoder reads the file sequentially through its own descriptor; its position, read from
 * /proc/self/fdinfo, against the file's size gives the fraction done (never past 100 %).
 */
import { readdirSync, readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';

import type CliProgress from 'cli-progress';

import { percentOf, PROGRESS_AFTER_MS, progressLines } from '../decode/progress.js';

export interface Progress {
  update(events: number): void;
  stop(): void;
}

const none: Progress = { update: () => undefined, stop: () => undefined };

/** The log's real path (as /proc/self/fd names it) and size; undefined when it cannot be read. */
function logFile(path: string): { target: string; size: number } | undefined {
  try {
    return { target: realpathSync(path), size: statSync(path).size };
  } catch {
    return undefined;
  }
}

function filePosition(target: string, hint: { fd?: string }): number | undefined {
  const read = (fd: string): number | undefined => {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) !== target) return undefined;
      const m = /^pos:\s+(\d+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
      return m ? Number(m[1]) : undefined;
    } catch {
      return undefined;
    }
  };
  if (hint.fd !== undefined) {
    const pos = read(hint.fd);
    if (pos !== undefined) return pos;
  }
  try {
    for (const fd of readdirSync('/proc/self/fd')) {
      const pos = read(fd);
      if (pos !== undefined) {
        hint.fd = fd;
        return pos;
      }
    }
  } catch {
    // no /proc: the bar shows events only
  }
  return undefined;
}

export function startProgress(path: string, enabled = process.stderr.isTTY === true): Progress {
  if (!enabled) return linesOf(path);
  const file = logFile(path);
  if (file === undefined) return none;
  const { target, size } = file;
  // The decoder reads 1 MiB at a time: below a few MiB its position says little, so small
  // (well compressed) logs get an event counter instead of a bar.
  const byPosition = size >= 4 * 1024 * 1024;
  // Loaded here: off a terminal (a script, CI, a pipe) none of its dozen modules is needed.
  const cliProgress = createRequire(import.meta.url)('cli-progress') as typeof CliProgress;
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: byPosition
        ? 'reading {bar} {percentage}% | {events} events | {eta_formatted} left'
        : 'reading {events} events | {duration_formatted}',
      hideCursor: true,
      clearOnComplete: true,
      etaBuffer: 20,
    },
    cliProgress.Presets.shades_classic,
  );
  const hint: { fd?: string } = {};
  const started = Date.now();
  let shown = false;
  let drawn = 0;
  const draw = (events: number): void => {
    const now = Date.now();
    // Only when reading takes more than two seconds; at most five times a second.
    if (now - started < PROGRESS_AFTER_MS || now - drawn < 200) return;
    drawn = now;
    if (!shown) {
      bar.start(size, 0, { events: '0' });
      shown = true;
    }
    const pos = byPosition ? (filePosition(target, hint) ?? 0) : 0;
    // The decoder reads ahead of the events it has replayed: 100 % only once it has stopped.
    bar.update(Math.min(pos, Math.floor(size * 0.99)), { events: events.toLocaleString('en-US') });
  };
  return {
    update: draw,
    stop: () => {
      if (!shown) return;
      bar.update(size, { events: '' });
      bar.stop();
    },
  };
}

/** Off a terminal: a line now and then with the fraction read and the events so far. */
function linesOf(path: string): Progress {
  const file = logFile(path);
  if (file === undefined) return none;
  const { target, size } = file;
  const lines = progressLines(`heaphook: reading ${path}`);
  const hint: { fd?: string } = {};
  return {
    // Called for every block: the file's position is read only for the lines written.
    update: (events) =>
      lines.update(() => {
        const pos = filePosition(target, hint);
        // The decoder reads ahead of the events it has replayed: at most 99 % while it runs.
        const part = pos !== undefined ? `${Math.min(99, percentOf(pos, size))} %, ` : '';
        return `${part}${events.toLocaleString('en-US')} events`;
      }),
    stop: () => undefined,
  };
}
