/**
 * The two layouts of a block (FORMAT.md, "Blocks"): seven streams since version 4, the
 * addresses of blocks that end in `old`; six before, both kinds of address in `addr` in event
 * order. A reader takes either, and the same events come out.
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

/** A stored log of one block: PROCESS, THREAD 1, then EVENTS, in `count` streams. */
function logOf(version: number, count: 6 | 7): string {
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
  const num = Buffer.concat(EVENTS.filter((e) => e.size !== undefined).map((e) => varint(e.size!)));
  const isFree = (e: (typeof EVENTS)[number]): boolean => e.tag === FREE;
  const codes = (keep: (e: (typeof EVENTS)[number]) => boolean): Buffer =>
    Buffer.concat(EVENTS.filter(keep).map((e) => varint(e.code)));
  const streams =
    count === 6
      ? [tag, time, stack, num, codes(() => true), decl]
      : [tag, time, stack, num, codes((e) => !isFree(e)), decl, codes(isFree)];
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

describe('a block of seven streams and one of six hold the same events (unit)', () => {
  it('version 4: the frees named from the old stream', async () => {
    expect(format.STREAM_NAMES[format.STREAM_OLD]).toBe('old');
    expect(await eventsOf(logOf(4, 7))).toEqual(EXPECTED);
  });

  it('version 3: the frees named from the addr stream, between the new blocks', async () => {
    expect(await eventsOf(logOf(3, 6))).toEqual(EXPECTED);
  });

  it('version 4 also takes a block of six; another count of streams is damage, named', async () => {
    expect(await eventsOf(logOf(4, 6))).toEqual(EXPECTED);
    const log = readFileSync(logOf(4, 7));
    const payload = Buffer.from(log.subarray(16 + 8));
    payload[0] = 5; // the stream count
    const five = join(dir, 'five.log');
    writeFileSync(five, Buffer.concat([log.subarray(0, 16), block(0, payload)]));
    await expect(eventsOf(five)).rejects.toThrow(
      /block of 5 streams \(expected 7, or 6 before version 4\)/,
    );
  });
});
