// The wire format of a watched process's event stream: include/heaphook/ucm_watch.h, decoded.
import { MemoryEvent } from '../constants.js';
import type { MemoryEventName } from '../watch.js';

export const HELLO_MAGIC = 'HHWATCH\0';
export const CONFIG_MAGIC = 'HHWC';
export const PROTOCOL_VERSION = 1;
export const HELLO_SIZE = 64;
export const CONFIG_SIZE = 16;
export const RECORD_SIZE = 56;
export const RING_DEFAULT = 65536;
export const RING_MIN = 1024;
export const RING_MAX = 4194304;

export const CONTROL_STARTED = 0x80000001;
export const CONTROL_DROPPED = 0x80000002;
export const CONTROL_END = 0x80000003;

/** How the target's hooks are installed (HEAPHOOK_UCM_WATCH_MODE_*). */
export const installModes = ['none', 'preload', 'reloc', 'bistro'] as const;
export type InstallMode = (typeof installModes)[number];

/** Why a stream ended (HEAPHOOK_UCM_WATCH_END_*). */
export const endReasons: Readonly<Record<number, string>> = {
  1: 'detached',
  2: 'exit',
  3: 'install failed',
  4: 'connection lost',
};

/** Every event bit the stream can carry. */
export const ALL_EVENTS = Object.values(MemoryEvent).reduce((a, b) => a | b, 0);

export interface Hello {
  readonly version: number;
  readonly recordSize: number;
  readonly pid: number;
  readonly startNs: number;
  /** 'env': HEAPHOOK_MEM_WATCH_SOCKET at load; 'call': heaphook_ucm_stream_start. */
  readonly origin: 'env' | 'call';
}

export function decodeHello(buffer: Buffer): Hello {
  const magic = buffer.toString('latin1', 0, 8);
  if (magic !== HELLO_MAGIC) {
    throw new Error(`not a heaphook watch stream (magic ${JSON.stringify(magic)})`);
  }
  const version = buffer.readUInt32LE(8);
  const recordSize = buffer.readUInt32LE(16);
  if (version !== PROTOCOL_VERSION || recordSize !== RECORD_SIZE) {
    throw new Error(
      `the target's libheaphook_ucm.so speaks stream version ${version} with ${recordSize}-byte records; ` +
        `this heaphook expects version ${PROTOCOL_VERSION}, ${RECORD_SIZE} bytes: use the library of the same @heaphook/ucm-hooks`,
    );
  }
  return {
    version,
    recordSize,
    pid: buffer.readUInt32LE(20),
    startNs: buffer.readUInt32LE(28) * 4294967296 + buffer.readUInt32LE(24),
    origin: buffer.readUInt32LE(32) === 1 ? 'env' : 'call',
  };
}

export function encodeConfig(events: number, ringRecords: number): Buffer {
  const buffer = Buffer.alloc(CONFIG_SIZE);
  buffer.write(CONFIG_MAGIC, 0, 'latin1');
  buffer.writeUInt32LE(events >>> 0, 4);
  buffer.writeUInt32LE(ringRecords >>> 0, 8);
  return buffer;
}

/**
 * One decoded record: an event, or a control record (type is then a CONTROL_* code). Fields
 * are numbers (exact: addresses are below 2^47, sizes and times below 2^53); the signed ones
 * (SBRK's increment, MMAP's fd, MADVISE's advice, SHMAT's shmid and shmflg) decoded as such.
 */
export interface RawRecord {
  readonly type: number;
  readonly error: number;
  readonly tid: number;
  readonly timeNs: number;
  readonly address: number;
  readonly size: number;
  readonly arg0: number;
  readonly arg1: number;
}

const TWO_32 = 4294967296;
const u64 = (b: Buffer, at: number): number => b.readUInt32LE(at + 4) * TWO_32 + b.readUInt32LE(at);
const i64 = (b: Buffer, at: number): number => b.readInt32LE(at + 4) * TWO_32 + b.readUInt32LE(at);

export function decodeRecord(buffer: Buffer, offset: number): RawRecord {
  const type = buffer.readUInt32LE(offset);
  const signedArgs = type === MemoryEvent.MADVISE || type === MemoryEvent.SHMAT;
  return {
    type,
    error: buffer.readInt32LE(offset + 4),
    tid: buffer.readUInt32LE(offset + 8),
    timeNs: u64(buffer, offset + 16),
    address: type === CONTROL_STARTED ? i64(buffer, offset + 24) : u64(buffer, offset + 24),
    size: type === MemoryEvent.SBRK ? i64(buffer, offset + 32) : u64(buffer, offset + 32),
    arg0: signedArgs ? buffer.readInt32LE(offset + 40) : u64(buffer, offset + 40),
    arg1:
      signedArgs || type === MemoryEvent.MMAP
        ? buffer.readInt32LE(offset + 48)
        : u64(buffer, offset + 48),
  };
}

const eventNames = new Map<number, MemoryEventName>(
  Object.entries(MemoryEvent).map(([name, bit]) => [bit, name as MemoryEventName]),
);

/** The name of an event bit, or undefined for a bit that is no event. */
export function eventName(type: number): MemoryEventName | undefined {
  return eventNames.get(type);
}
