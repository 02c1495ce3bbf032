/**
 * The two layouts of a block (FORMAT.md, "Blocks"): ten streams since version 4, the addresses
 * of blocks that end in `old` and the bytes after the first of each varint of `num`, `addr` and
 * `old` in their `_more` streams; six before, both kinds of address in `addr` in event order,
 * varints whole. A reader takes either, and the same events come out.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import * as format from '../../src/decode/format.generated.js';
import { decodeLog, type EventRecord } from '../../src/index.js';
import { block, fileHeader, varint } from '../fuzz/corpus.js';

const dir = mkdtempSync(join(tmpdir(), 'hh-layout-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const A = 0x10000; // the first block's address; the second is right after it (a bump)
const MALLOC = 0x80 | format.OP_MALLOC;
const FREE = 0x80 | format.OP_FREE;

/** Six events on thread index 1: malloc A (explicit), malloc A + 32 (bump), free A, free
 * A + 32 (both by allocation order), malloc A + 32 again (its size class's list), free it. */
const EVENTS: { tag: number; size?: number; code: number }[] = [
  { tag: MALLOC | format.EVT_THREAD, size: 24, code: 4 * A + 1 },
  { tag: MALLOC, size: 24, code: 2 },
  { tag: FREE, code: 0 },
  { tag: FREE, code: 0 },
  { tag: MALLOC, size: 24, code: 0 },
  { tag: FREE, code: 0 },
];

/** Varints of a split stream: the first bytes, and the bytes after them (the `_more` stream). */
function split(values: number[]): [Buffer, Buffer] {
  const first = values.map((v) => (v < 0x80 ? v : (v & 0x7f) | 0x80));
  const more = values.filter((v) => v >= 0x80).map((v) => varint(Math.floor(v / 128)));
  return [Buffer.from(first), Buffer.concat(more)];
}

/** A stored log of one block: PROCESS, THREAD 1, then EVENTS, in `count` streams. */
function logOf(version: number, count: 6 | 10): string {
  const bytes = (s: string): Buffer => Buffer.concat([varint(s.length), Buffer.from(s)]);
  const decl = Buffer.concat([
    ...[4242, 1, 1000, 1, 0, 0, 0, 1].map(varint), // pid .. time_unit; flags 0
    bytes('test'),
    bytes('/bin/layout'),
    bytes(''),
    varint(1), // THREAD: index 1 ...
    varint(4242), // ... is tid 4242
  ]);
  const tag = Buffer.from([format.TAG_PROCESS, format.TAG_THREAD, ...EVENTS.map((e) => e.tag)]);
  const time = Buffer.alloc(EVENTS.length); // every event at 0
  const stack = varint(1); // the first event's thread index
  const sizes = EVENTS.filter((e) => e.size !== undefined).map((e) => e.size!);
  const isFree = (e: (typeof EVENTS)[number]): boolean => e.tag === FREE;
  const newCodes = EVENTS.filter((e) => !isFree(e)).map((e) => e.code);
  const oldCodes = EVENTS.filter(isFree).map((e) => e.code);
  const whole = (values: number[]): Buffer => Buffer.concat(values.map(varint));
  const [num, numMore] = split(sizes);
  const [addr, addrMore] = split(newCodes);
  const [old, oldMore] = split(oldCodes);
  expect(addrMore.length).toBeGreaterThan(0); // the first address takes more than one byte
  const streams =
    count === 6
      ? [tag, time, stack, whole(sizes), whole(EVENTS.map((e) => e.code)), decl]
      : [tag, time, stack, num, addr, decl, old, numMore, addrMore, oldMore];
  const payload = Buffer.concat([
    varint(count),
    ...streams.map((s) => varint(s.length)),
    ...streams,
  ]);
  const path = join(dir, `v${version}-${count}.log`);
  writeFileSync(path, Buffer.concat([fileHeader(version), block(0, payload)]));
  return path;
}

async function eventsOf(path: string): Promise<[string, number][]> {
  const out: [string, number][] = [];
  for await (const r of decodeLog(path)) {
    if (r.type === 'event') out.push([(r as EventRecord).op, (r as EventRecord).ptr]);
  }
  return out;
}

const EXPECTED: [string, number][] = [
  ['malloc', A],
  ['malloc', A + 32],
  ['free', A],
  ['free', A + 32],
  ['malloc', A + 32],
  ['free', A + 32],
];

describe('a block of ten streams and one of six hold the same events (unit)', () => {
  it('version 4: the frees named from the old stream, the long varints finished in _more', async () => {
    expect(format.STREAM_NAMES[format.STREAM_OLD]).toBe('old');
    expect(format.STREAM_NAMES[format.STREAM_ADDR_MORE]).toBe('addr_more');
    expect(await eventsOf(logOf(4, 10))).toEqual(EXPECTED);
  });

  it('version 3: the frees named from the addr stream, between the new blocks', async () => {
    expect(await eventsOf(logOf(3, 6))).toEqual(EXPECTED);
  });

  it('version 4 also takes a block of six; another count of streams is damage, named', async () => {
    expect(await eventsOf(logOf(4, 6))).toEqual(EXPECTED);
    const log = readFileSync(logOf(4, 10));
    const payload = Buffer.from(log.subarray(16 + 8));
    payload[0] = 5; // the stream count
    const five = join(dir, 'five.log');
    writeFileSync(five, Buffer.concat([log.subarray(0, 16), block(0, payload)]));
    await expect(eventsOf(five)).rejects.toThrow(
      /block of 5 streams \(expected 10, or 6 before version 4\)/,
    );
  });
});
