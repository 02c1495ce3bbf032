// The watch stream's wire format and its lines (src/stream/protocol.ts, src/stream/format.ts) on
// their own, on buffers laid out as include/heaphook/ucm_watch.h lays them out: the hello and
// its refusals, the config the watcher sends, each record's signed and unsigned fields, and the
// event a person reads (names for prot, flags, advice and errno; SBRK's sign; no fd=-1).
import { constants } from 'node:os';

import { describe, expect, it } from 'vitest';

import { MemoryEvent } from '../../src/index.js';
import { describeEvent, formatEventLine } from '../../src/stream/format.js';
import {
  CONFIG_SIZE,
  CONTROL_STARTED,
  decodeHello,
  decodeRecord,
  encodeConfig,
  HELLO_MAGIC,
  HELLO_SIZE,
  PROTOCOL_VERSION,
  RECORD_SIZE,
  type RawRecord,
} from '../../src/stream/protocol.js';

const TWO_32 = 2 ** 32;

function hello(fields: { version?: number; recordSize?: number; origin?: number } = {}): Buffer {
  const b = Buffer.alloc(HELLO_SIZE);
  b.write(HELLO_MAGIC, 0, 'latin1');
  b.writeUInt32LE(fields.version ?? PROTOCOL_VERSION, 8);
  b.writeUInt32LE(HELLO_SIZE, 12);
  b.writeUInt32LE(fields.recordSize ?? RECORD_SIZE, 16);
  b.writeUInt32LE(4242, 20);
  b.writeBigUInt64LE(5n * BigInt(TWO_32) + 7n, 24); // start_ns above 2^32
  b.writeUInt32LE(fields.origin ?? 1, 32);
  return b;
}

/** One record at offset 8 of a larger buffer, fields as the C struct has them. */
function record(type: number, f: { error?: number; size?: bigint; args?: [bigint, bigint] }) {
  const b = Buffer.alloc(8 + RECORD_SIZE);
  const at = 8;
  b.writeUInt32LE(type, at);
  b.writeInt32LE(f.error ?? 0, at + 4);
  b.writeUInt32LE(77, at + 8);
  b.writeBigUInt64LE(3_000_000_000n, at + 16);
  b.writeBigUInt64LE(0x7f00_1234_5000n, at + 24);
  b.writeBigInt64LE(f.size ?? 4096n, at + 32);
  b.writeBigInt64LE(f.args?.[0] ?? 0n, at + 40);
  b.writeBigInt64LE(f.args?.[1] ?? 0n, at + 48);
  return decodeRecord(b, at);
}

describe('the hello', () => {
  it('gives the pid, the 64-bit start time and where the stream came from', () => {
    expect(decodeHello(hello())).toEqual({
      version: PROTOCOL_VERSION,
      recordSize: RECORD_SIZE,
      pid: 4242,
      startNs: 5 * TWO_32 + 7,
      origin: 'env',
    });
    expect(decodeHello(hello({ origin: 2 })).origin).toBe('call');
  });

  it('refuses another magic, and another version or record size naming the library to use', () => {
    const other = hello();
    other.write('HHTRACE\0', 0, 'latin1');
    expect(() => decodeHello(other)).toThrow('not a heaphook watch stream');
    expect(() => decodeHello(hello({ version: 2 }))).toThrow(
      /stream version 2 with 56-byte records; this heaphook expects version 1, 56 bytes: use the library of the same @heaphook\/ucm-hooks/,
    );
    expect(() => decodeHello(hello({ recordSize: 48 }))).toThrow(/48-byte records/);
  });
});

describe('the config', () => {
  it('is the magic, the event bits and the ring size, little-endian, 16 bytes', () => {
    const c = encodeConfig(MemoryEvent.MMAP | MemoryEvent.VM_UNMAPPED, 1024);
    expect(c.length).toBe(CONFIG_SIZE);
    expect(c.toString('latin1', 0, 4)).toBe('HHWC');
    expect(c.readUInt32LE(4)).toBe(0x20001);
    expect(c.readUInt32LE(8)).toBe(1024);
    expect(c.readUInt32LE(12)).toBe(0);
  });
});

describe('a record', () => {
  it('reads the common fields at the offset given', () => {
    const r = record(MemoryEvent.MUNMAP, { size: 8192n });
    expect(r).toMatchObject({ type: MemoryEvent.MUNMAP, error: 0, tid: 77, size: 8192 });
    expect(r.timeNs).toBe(3_000_000_000);
    expect(r.address).toBe(0x7f00_1234_5000);
  });

  it("decodes SBRK's increment, MMAP's fd, MADVISE's advice and SHMAT's ids as signed", () => {
    expect(record(MemoryEvent.SBRK, { size: -65536n }).size).toBe(-65536);
    expect(record(MemoryEvent.MMAP, { args: [3n | (0x22n << 32n), -1n] }).arg1).toBe(-1);
    expect(record(MemoryEvent.MADVISE, { args: [-5n, 0n] }).arg0).toBe(-5);
    expect(record(MemoryEvent.SHMAT, { args: [-1n, -2n] })).toMatchObject({ arg0: -1, arg1: -2 });
    expect(record(CONTROL_STARTED, {}).address).toBe(0x7f00_1234_5000);
  });

  it('keeps the other events unsigned: a huge munmap length is not negative', () => {
    expect(record(MemoryEvent.MUNMAP, { size: -1n }).size).toBe(2 ** 64);
    expect(record(MemoryEvent.MREMAP, { args: [0x1000n, -1n] }).arg1).toBe(2 ** 64);
  });
});

describe('an event as a person reads it', () => {
  const zero = 1_000_000_000;
  const event = (r: RawRecord) => describeEvent(r, 99, zero);

  it('names an mmap: prot as rwx, the flags by name, unknown bits in hex, the fd', () => {
    const e = event(record(MemoryEvent.MMAP, { args: [3n | (0x80022n << 32n), 5n] }));
    expect(e).toMatchObject({
      time: 2,
      pid: 99,
      tid: 77,
      type: 'MMAP',
      address: '0x7f0012345000',
      size: 4096,
      prot: 'rw-',
      flags: ['PRIVATE', 'ANONYMOUS', '0x80000'],
      fd: 5,
    });
    expect(formatEventLine(e)).toBe(
      '   2.000000  99/77         MMAP        0x7f0012345000         4096  prot=rw- flags=PRIVATE|ANONYMOUS|0x80000 fd=5',
    );
  });

  it('leaves out the fd of an anonymous map, signs a growing break, names the advice', () => {
    const anon = event(record(MemoryEvent.MMAP, { args: [1n | (0x22n << 32n), -1n] }));
    expect(formatEventLine(anon)).toMatch(/prot=r-- flags=PRIVATE\|ANONYMOUS$/);
    expect(formatEventLine(event(record(MemoryEvent.SBRK, { size: 4096n })))).toMatch(/ \+4096$/);
    expect(formatEventLine(event(record(MemoryEvent.SBRK, { size: -4096n })))).toMatch(/ -4096$/);
    expect(event(record(MemoryEvent.MADVISE, { args: [4n, 0n] })).advice).toBe('DONTNEED');
    expect(event(record(MemoryEvent.MADVISE, { args: [99n, 0n] })).advice).toBe('99');
  });

  it('shows where an mremap came from, and names a failed call by its errno', () => {
    const moved = event(record(MemoryEvent.MREMAP, { args: [0x1000n, 8192n] }));
    expect(formatEventLine(moved)).toMatch(/  from=0x1000\+8192$/);
    const failed = event(
      record(MemoryEvent.MMAP, { error: constants.errno.ENOMEM, args: [0n, -1n] }),
    );
    expect(failed.error).toBe('ENOMEM');
    expect(formatEventLine(failed)).toMatch(/  failed=ENOMEM$/);
    expect(event(record(MemoryEvent.MUNMAP, { error: 4095 })).error).toBe('errno 4095');
  });

  it('refuses a type that is no event', () => {
    expect(() => event(record(1 << 12, {}))).toThrow('unknown event type 0x1000');
  });
});
