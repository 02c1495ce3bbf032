// One line per event: text for a terminal, or one JSON object a line (--json).
import { constants } from 'node:os';

import type { MemoryEventName } from '../watch.js';
import { eventName, type RawRecord } from './protocol.js';

const errnoNames = new Map<number, string>(
  Object.entries(constants.errno).map(([name, value]) => [value, name]),
);

const mapFlags: ReadonlyArray<[number, string]> = [
  [0x01, 'SHARED'],
  [0x02, 'PRIVATE'],
  [0x10, 'FIXED'],
  [0x20, 'ANONYMOUS'],
  [0x100, 'GROWSDOWN'],
  [0x800, 'DENYWRITE'],
  [0x1000, 'EXECUTABLE'],
  [0x2000, 'LOCKED'],
  [0x4000, 'NORESERVE'],
  [0x8000, 'POPULATE'],
  [0x10000, 'NONBLOCK'],
  [0x20000, 'STACK'],
  [0x40000, 'HUGETLB'],
  [0x100000, 'FIXED_NOREPLACE'],
];

const advices: Readonly<Record<number, string>> = {
  0: 'NORMAL',
  1: 'RANDOM',
  2: 'SEQUENTIAL',
  3: 'WILLNEED',
  4: 'DONTNEED',
  8: 'FREE',
  9: 'REMOVE',
  10: 'DONTFORK',
  11: 'DOFORK',
  12: 'MERGEABLE',
  13: 'UNMERGEABLE',
  14: 'HUGEPAGE',
  15: 'NOHUGEPAGE',
  16: 'DONTDUMP',
  17: 'DODUMP',
  18: 'WIPEONFORK',
  19: 'KEEPONFORK',
  20: 'COLD',
  21: 'PAGEOUT',
  22: 'POPULATE_READ',
  23: 'POPULATE_WRITE',
};

function protString(prot: number): string {
  return `${prot & 1 ? 'r' : '-'}${prot & 2 ? 'w' : '-'}${prot & 4 ? 'x' : '-'}`;
}

function flagNames(flags: number): string[] {
  const names: string[] = [];
  let rest = flags;
  for (const [bit, name] of mapFlags) {
    if (flags & bit) {
      names.push(name);
      rest &= ~bit;
    }
  }
  if (rest !== 0) names.push(`0x${rest.toString(16)}`);
  return names;
}

const hex = (value: number): string => `0x${value.toString(16)}`;

/** An event with named fields: what --json prints, and what the text line shows. */
export interface WatchedEvent {
  /** Seconds since the first watched process started streaming. */
  time: number;
  pid: number;
  tid: number;
  type: MemoryEventName;
  address: string;
  /** Bytes; for SBRK the increment (negative when the break goes down). */
  size: number;
  prot?: string;
  flags?: string[];
  fd?: number;
  oldAddress?: string;
  oldSize?: number;
  advice?: string;
  shmid?: number;
  /** The errno name of a failed call. */
  error?: string;
}

export function describeEvent(record: RawRecord, pid: number, zeroNs: number): WatchedEvent {
  const type = eventName(record.type);
  if (type === undefined) throw new Error(`unknown event type 0x${record.type.toString(16)}`);
  const e: WatchedEvent = {
    time: (record.timeNs - zeroNs) / 1e9,
    pid,
    tid: record.tid,
    type,
    address: hex(record.address),
    size: record.size,
  };
  switch (type) {
    case 'MMAP':
      e.prot = protString(record.arg0 % 4294967296);
      e.flags = flagNames(Math.floor(record.arg0 / 4294967296));
      e.fd = record.arg1;
      break;
    case 'MREMAP':
      e.oldAddress = hex(record.arg0);
      e.oldSize = record.arg1;
      break;
    case 'MADVISE':
      e.advice = advices[record.arg0] ?? String(record.arg0);
      break;
    case 'SHMAT':
      e.shmid = record.arg0;
      break;
    default:
      break;
  }
  if (record.error !== 0) e.error = errnoNames.get(record.error) ?? `errno ${record.error}`;
  return e;
}

const spaces = ' '.repeat(32);
const padStart = (text: string, width: number): string =>
  text.length >= width ? text : spaces.slice(0, width - text.length) + text;
const padEnd = (text: string, width: number): string =>
  text.length >= width ? text : text + spaces.slice(0, width - text.length);

/** The column header printed above the first text line of events (formatEventLine's columns). */
export const EVENT_HEADER =
  padStart('time (s)', 11) +
  '  ' +
  padEnd('pid/tid', 13) +
  ' ' +
  padEnd('event', 11) +
  ' ' +
  padStart('address', 14) +
  ' ' +
  padStart('bytes', 12) +
  '  details';

/** The text line of an event: time, pid/tid, type, address, size, details. */
export function formatEventLine(e: WatchedEvent): string {
  let line =
    padStart(e.time.toFixed(6), 11) +
    '  ' +
    padEnd(`${e.pid}/${e.tid}`, 13) +
    ' ' +
    padEnd(e.type, 11) +
    ' ' +
    padStart(e.address, 14) +
    ' ' +
    padStart(e.type === 'SBRK' && e.size > 0 ? `+${e.size}` : String(e.size), 12);
  if (e.prot !== undefined) line += `  prot=${e.prot} flags=${e.flags!.join('|')}`;
  if (e.fd !== undefined && e.fd !== -1) line += ` fd=${e.fd}`;
  if (e.oldAddress !== undefined) line += `  from=${e.oldAddress}+${e.oldSize}`;
  if (e.advice !== undefined) line += `  advice=${e.advice}`;
  if (e.shmid !== undefined) line += `  shmid=${e.shmid}`;
  if (e.error !== undefined) line += `  failed=${e.error}`;
  return line;
}
