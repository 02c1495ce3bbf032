// One line per event: text for a terminal, or one JSON object a line (--json).
import { constants } from 'node:os';

import type { MemoryEventName } from '../watch.js';
import { eventName, signed, type RawRecord } from './protocol.js';

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

const hex = (value: bigint): string => `0x${value.toString(16)}`;

/** An event with named fields: what --json prints, and what the text line shows. */
export interface WatchedEvent {
  /** Seconds since the first watched process started streaming. */
  readonly time: number;
  readonly pid: number;
  readonly tid: number;
  readonly type: MemoryEventName;
  readonly address: string;
  /** Bytes; for SBRK the increment (negative when the break goes down). */
  readonly size: number;
  readonly prot?: string;
  readonly flags?: string[];
  readonly fd?: number;
  readonly oldAddress?: string;
  readonly oldSize?: number;
  readonly advice?: string;
  readonly shmid?: number;
  /** The errno name of a failed call. */
  readonly error?: string;
}

export function describeEvent(record: RawRecord, pid: number, zeroNs: bigint): WatchedEvent {
  const type = eventName(record.type);
  if (type === undefined) throw new Error(`unknown event type 0x${record.type.toString(16)}`);
  const base = {
    time: Number(record.timeNs - zeroNs) / 1e9,
    pid,
    tid: record.tid,
    type,
    address: hex(record.address),
    size: type === 'SBRK' ? Number(signed(record.size)) : Number(record.size),
  };
  const error =
    record.error !== 0 ? { error: errnoNames.get(record.error) ?? `errno ${record.error}` } : {};
  switch (type) {
    case 'MMAP':
      return {
        ...base,
        prot: protString(Number(record.arg0 & 0xffffffffn)),
        flags: flagNames(Number(record.arg0 >> 32n)),
        fd: Number(signed(record.arg1)),
        ...error,
      };
    case 'MREMAP':
      return { ...base, oldAddress: hex(record.arg0), oldSize: Number(record.arg1), ...error };
    case 'MADVISE': {
      const advice = Number(signed(record.arg0));
      return { ...base, advice: advices[advice] ?? String(advice), ...error };
    }
    case 'SHMAT':
      return { ...base, shmid: Number(signed(record.arg0)), ...error };
    default:
      return { ...base, ...error };
  }
}

/** The text line of an event: time, pid/tid, type, address, size, details. */
export function formatEventLine(e: WatchedEvent): string {
  const details: string[] = [];
  if (e.prot !== undefined) details.push(`prot=${e.prot}`);
  if (e.flags !== undefined) details.push(`flags=${e.flags.join('|')}`);
  if (e.fd !== undefined && e.fd !== -1) details.push(`fd=${e.fd}`);
  if (e.oldAddress !== undefined) details.push(`from=${e.oldAddress}+${e.oldSize}`);
  if (e.advice !== undefined) details.push(`advice=${e.advice}`);
  if (e.shmid !== undefined) details.push(`shmid=${e.shmid}`);
  if (e.error !== undefined) details.push(`failed=${e.error}`);
  const size = e.type === 'SBRK' && e.size > 0 ? `+${e.size}` : String(e.size);
  return (
    `${e.time.toFixed(6).padStart(11)}  ${`${e.pid}/${e.tid}`.padEnd(13)} ${e.type.padEnd(11)} ` +
    `${e.address.padStart(14)} ${size.padStart(12)}${details.length > 0 ? `  ${details.join(' ')}` : ''}`
  );
}
