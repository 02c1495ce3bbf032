/**
 * `heaphook watch`, contributed to `heaphook` (listed in package.json, see @heaphook/core's cli):
 *   heaphook watch [-p PID] [--json] [--events LIST] [--duration TIME] [--buffer N] [-o FILE] [-- COMMAND...]
 */
import { createWriteStream } from 'node:fs';

import type { Command } from 'commander';

import { HeaphookError } from '@heaphook/core';

import { MemoryEvent } from '../constants.js';
import { ALL_EVENTS, RING_DEFAULT, RING_MAX, RING_MIN } from '../stream/protocol.js';
import { watchCommand, watchPid, type WatchSessionOptions } from '../stream/session.js';

const usage = (message: string): HeaphookError =>
  new HeaphookError(message, { namesCommand: true });

const NATIVE =
  MemoryEvent.MMAP |
  MemoryEvent.MUNMAP |
  MemoryEvent.MREMAP |
  MemoryEvent.SHMAT |
  MemoryEvent.SHMDT |
  MemoryEvent.SBRK |
  MemoryEvent.MADVISE |
  MemoryEvent.BRK;
const groups: Readonly<Record<string, number>> = {
  all: ALL_EVENTS,
  native: NATIVE,
  vm: MemoryEvent.VM_MAPPED | MemoryEvent.VM_UNMAPPED,
};

/** --events: names of events (mmap, vm_unmapped ...) or groups (all, native, vm), comma-separated. */
export function parseEvents(list: string): number {
  let mask = 0;
  for (const raw of list.split(',')) {
    const name = raw.trim();
    if (name === '') continue;
    const upper = name.toUpperCase();
    const bit =
      groups[name.toLowerCase()] ??
      (Object.hasOwn(MemoryEvent, upper)
        ? MemoryEvent[upper as keyof typeof MemoryEvent]
        : undefined);
    if (bit === undefined) {
      throw usage(
        `--events: unknown event "${name}"; use names of ${Object.keys(MemoryEvent)
          .map((n) => n.toLowerCase())
          .join(', ')} or all, native, vm, e.g. --events mmap,munmap`,
      );
    }
    mask |= bit;
  }
  if (mask === 0) throw usage('--events: no event named; e.g. --events mmap,munmap');
  return mask;
}

/** --duration: 500ms, 10s, 2m, 1h, or plain seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
  const ms = match ? Number(match[1]) * unit[(match[2] ?? 's') as keyof typeof unit] : NaN;
  if (!Number.isFinite(ms) || ms <= 0) {
    throw usage(`--duration: "${text}" is not a duration; e.g. --duration 10s (ms, s, m, h)`);
  }
  return ms;
}

function parseBuffer(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < RING_MIN || n > RING_MAX || (n & (n - 1)) !== 0) {
    throw usage(
      `--buffer: "${text}" is not a power of two between ${RING_MIN} and ${RING_MAX} events; e.g. --buffer 65536`,
    );
  }
  return n;
}

function parsePid(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n <= 0) {
    throw usage(`-p: "${text}" is not a process id; e.g. -p 4242 (see pgrep)`);
  }
  return n;
}

interface WatchCliOptions {
  pid?: string;
  json?: boolean;
  events?: string;
  duration?: string;
  buffer?: string;
  output?: string;
}

export function register(program: Command): void {
  program
    .command('watch')
    .description(
      'print the memory events (mmap, munmap, mremap, madvise, brk, sbrk, shmat, shmdt, VM mapped/unmapped) of a running process (-p PID) or of a command it starts, line by line or as JSON lines',
    )
    .option(
      '-p, --pid <pid>',
      'watch this running process (injects libheaphook_ucm.so, detaches at the end)',
    )
    .option('--json', 'one JSON object a line (events, attach/detach notes, the summary)')
    .option(
      '--events <list>',
      'events to record: mmap,munmap,mremap,shmat,shmdt,sbrk,brk,madvise,vm_mapped,vm_unmapped, or all, native, vm',
      'all',
    )
    .option(
      '--duration <time>',
      'stop watching (and detach) this long after the attach: 500ms, 10s, 2m',
    )
    .option(
      '--buffer <events>',
      `the target's ring, in events (a power of two; default ${RING_DEFAULT})`,
    )
    .option('-o, --output <file>', 'write the event lines to a file instead of stdout')
    .argument('[command...]', 'the command to run and watch (put -- before it)')
    .passThroughOptions()
    .action(async (command: string[], cli: WatchCliOptions) => {
      const pid = cli.pid !== undefined ? parsePid(cli.pid) : undefined;
      if ((pid === undefined) === (command.length === 0)) {
        throw usage('name a process (-p PID) or a command (-- COMMAND...), one of the two');
      }
      const out = cli.output !== undefined ? createWriteStream(cli.output) : process.stdout;
      const options: WatchSessionOptions = {
        events: parseEvents(cli.events ?? 'all'),
        ringRecords: cli.buffer !== undefined ? parseBuffer(cli.buffer) : RING_DEFAULT,
        json: cli.json === true,
        durationMs: cli.duration !== undefined ? parseDuration(cli.duration) : undefined,
        out,
        err: process.stderr,
      };
      try {
        process.exitCode =
          pid !== undefined
            ? await watchPid(pid, options)
            : await watchCommand(command[0]!, command.slice(1), options);
      } finally {
        if (out !== process.stdout) {
          await new Promise<void>((resolve) => (out as NodeJS.WritableStream).end(resolve));
        }
      }
    });
}
