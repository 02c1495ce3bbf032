/**
 * What `report DIR` says first: which log of the session it reads, why (session.ts's
 * programChoice), and a line per other log (pid, argv[0], events, peak), the busiest first.
 */
import { terminalText } from '@heaphook/core';

import { join, resolve } from 'node:path';

import { LogFormatError } from '../decode/decoder.js';
import { newScanner, replayLog, totalsOf } from '../decode/replay.js';
import { programName, type ProgramChoice } from '../decode/session.js';
import { formatBytes, formatCount } from './format.js';

/** Other logs listed by name; the rest are counted in one line. */
const OTHERS_LISTED = 12;

/** A log's events and peak heap from one replay of its events (the native scanner). */
export async function logFigures(path: string): Promise<{ events: number; peakBytes: number }> {
  const scanner = newScanner(2, 1e9);
  try {
    await replayLog(path, scanner, () => {});
  } catch (error) {
    if (!(error instanceof LogFormatError)) throw error; // a damaged log: the part before counts
  }
  const t = totalsOf(scanner.result().totals);
  return { events: t.events, peakBytes: t.peakBytes };
}

export async function choiceText(target: string, choice: ProgramChoice): Promise<string> {
  const dir = resolve(target);
  const out = [
    `program: ${terminalText(choice.reason)}; its log is ${terminalText(choice.chosen.file)}`,
  ];
  if (choice.others.length === 0) return `${out.join('\n')}\n`;
  const others = [...choice.others].sort(
    (a, b) => (choice.events.get(b) ?? 0) - (choice.events.get(a) ?? 0),
  );
  out.push(`other logs of the session (heaphook report ${terminalText(target)} --pid N):`);
  out.push(
    `  ${'pid'.padStart(8)}  ${'program'.padEnd(20)} ${'events'.padStart(12)} ${'peak'.padStart(10)}`,
  );
  for (const l of others.slice(0, OTHERS_LISTED)) {
    const f = await logFigures(join(dir, l.file));
    out.push(
      `  ${String(l.pid).padStart(8)}  ${terminalText(programName(l)).slice(0, 20).padEnd(20)} ${formatCount(f.events).padStart(12)} ${formatBytes(f.peakBytes).padStart(10)}`,
    );
  }
  if (others.length > OTHERS_LISTED) {
    const rest = others.slice(OTHERS_LISTED);
    const events = rest.reduce((n, l) => n + (choice.events.get(l) ?? 0), 0);
    out.push(
      `  ... and ${rest.length} more log${rest.length === 1 ? '' : 's'} (${formatCount(events)} events${choice.estimated ? ', estimated' : ''} in all)`,
    );
  }
  return `${out.join('\n')}\n`;
}
