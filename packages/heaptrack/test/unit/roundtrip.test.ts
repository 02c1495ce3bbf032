/**
 * Unit tier: the log format's round trip. test/native/writer_roundtrip.c hands the tracer's
 * encoder (native/track/writer.c, linked alone) one of every record kind — an event of every
 * operation among them — and prints every field it wrote; the TypeScript decoder (src/decode)
 * must give each field back, with each of the three codecs. Every tag of native/format/heaplog.h
 * (TAG_* of src/decode/format.generated.ts) and every operation (OP_NAMES) must be among the
 * records decoded: a new record kind without a round trip here fails.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import * as format from '../../src/decode/format.generated.js';
import { decodeLog, OPS, type EventRecord, type LogRecord } from '../../src/index.js';
import { release } from '../helpers.js';

interface Written {
  process: {
    pid: number;
    ppid: number;
    mono_start: number;
    real_start: number;
    flags: number;
    stack_depth: number;
    sample_bytes: number;
    time_unit: number;
    version: string;
    exe: string;
    argv: string[];
  };
  module: { base: number; lo: number; hi: number; build_id: string; path: string };
  nodes: { id: number; parent: number; pc: number }[];
  events: {
    op: number;
    time: number;
    tid: number;
    stack: number;
    addr: number;
    size: number;
    old: number;
    count: number;
    align: number;
    weight: number;
    duration: number;
    split: number;
  }[];
  vm: { mapped: number; time: number; tid: number; stack: number; addr: number; size: number }[];
  rt: {
    time: number;
    tid: number;
    stack: number;
    site: number;
    call: string;
    thread_name: string;
    policy: number;
    priority: number;
    count: number;
  }[];
  leak: { check: number; ptr: number; size: number };
  leak_check: {
    check: number;
    trigger: number;
    time: number;
    live: number;
    leaked: number;
    leaked_bytes: number;
    reachable: number;
    reachable_bytes: number;
    duration_ns: number;
  };
  end: { reason: number; dropped: number; events: number };
}

const dir = mkdtempSync(join(tmpdir(), 'heaphook-roundtrip-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let trips = 0;
async function roundTrip(codec: number): Promise<{ written: Written; records: LogRecord[] }> {
  const log = join(dir, `codec${codec}.${trips++}.log`);
  const run = spawnSync(join(release, 'hh_test_writer_roundtrip'), [log, String(codec)], {
    encoding: 'utf8',
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  const records: LogRecord[] = [];
  for await (const r of decodeLog(log)) records.push(r);
  return { written: JSON.parse(run.stdout) as Written, records };
}

/** The decoded record kind each tag of heaplog.h becomes. */
const kindOfTag: Record<string, (r: LogRecord) => boolean> = {
  TAG_PROCESS: (r) => r.type === 'process',
  TAG_MODULE: (r) => r.type === 'module',
  TAG_THREAD: (r) => r.type === 'thread',
  TAG_NODE: (r) => r.type === 'stack',
  TAG_END: (r) => r.type === 'end',
  TAG_LEAK: (r) => r.type === 'leak',
  TAG_LEAK_CHECK: (r) => r.type === 'leak_check',
  TAG_VM_MAPPED: (r) => r.type === 'vm' && r.kind === 'mapped',
  TAG_VM_UNMAPPED: (r) => r.type === 'vm' && r.kind === 'unmapped',
  TAG_RT_VIOLATION: (r) => r.type === 'rt_violation',
  TAG_EVENT: (r) => r.type === 'event',
};

type FieldName = (typeof format.EVENT_FIELDS)[number]['name'];
type Written1 = Written['events'][number];

/**
 * Every field of native/format/fields.h's table: where writer_roundtrip.c prints the value it
 * handed the writer, where the decoder's EventRecord gives it back, and what the record holds
 * when the event does not carry it. A field added to the table without a round trip here fails
 * to type-check (this record is indexed by the table's names) and fails below.
 */
const ROUND_TRIP: Record<
  FieldName,
  { written: keyof Written1; decoded: keyof EventRecord; absent: number | undefined }
> = {
  count: { written: 'count', decoded: 'count', absent: 1 },
  align: { written: 'align', decoded: 'align', absent: 0 },
  size: { written: 'size', decoded: 'size', absent: 0 },
  old: { written: 'old', decoded: 'oldPtr', absent: 0 },
  ptr: { written: 'addr', decoded: 'ptr', absent: 0 },
  duration: { written: 'duration', decoded: 'duration', absent: undefined },
  weight: { written: 'weight', decoded: 'weight', absent: undefined },
};

/** What the decoder gives for a written event (records.ts's EventRecord, FORMAT.md), from the
 * table of fields: a field the event carries comes back as written. */
function expectedEvent(e: Written1, start: number, flags: number): EventRecord {
  const op = OPS[e.op]!;
  const marker = op === 'realloc_done'; // its time and thread only
  const fields: Record<string, number | undefined> = {};
  for (const { name, ops, flag } of format.EVENT_FIELDS) {
    const trip = ROUND_TRIP[name];
    const carried = ((ops >> e.op) & 1) === 1 && (flags & flag) === flag;
    fields[trip.decoded] = carried ? (e[trip.written] as number) : trip.absent;
  }
  // A free's block is the one it ends (FORMAT.md): the ring record's addr, the decoder's ptr.
  if (((format.OPS_ENDING >> e.op) & 1) === 1 && ((format.OPS_BEGINNING >> e.op) & 1) === 0) {
    fields.ptr = e.addr;
    fields.oldPtr = 0;
  }
  return {
    type: 'event',
    op,
    time: e.time - start,
    tid: e.tid,
    stack: marker ? 0 : e.stack,
    split: e.split !== 0,
    ...fields,
  } as unknown as EventRecord;
}

describe('every field of the table makes the round trip', () => {
  it('names a written value and a decoded one for each declared field', () => {
    const declared = format.EVENT_FIELDS.map((f) => f.name as string);
    expect(Object.keys(ROUND_TRIP).sort()).toEqual([...declared].sort());
  });

  it('writes and decodes each declared field on some event with a value that is not its default', async () => {
    const { written: w, records } = await roundTrip(format.CODEC_NONE);
    const events = records.filter((r): r is EventRecord => r.type === 'event');
    for (const { name, ops, flag } of format.EVENT_FIELDS) {
      const trip = ROUND_TRIP[name];
      expect(
        (w.process.flags & flag) === flag,
        `the test's PROCESS lacks the flag of ${name}`,
      ).toBe(true);
      const carriers = w.events
        .map((e, k) => ({ e, k }))
        .filter(({ e }) => ((ops >> e.op) & 1) === 1 && e[trip.written] !== 0);
      expect(carriers.length, `no event carries ${name} with a value`).toBeGreaterThan(0);
    }
    expect(events).toHaveLength(w.events.length);
  });
});

describe('writer → decoder round trip of every record kind (unit)', () => {
  for (const [codec, name] of [
    [format.CODEC_NONE, 'stored'],
    [format.CODEC_DEFLATE, 'deflate'],
    [format.CODEC_ZSTD, 'zstd'],
  ] as const) {
    it(`${name}: every field written is decoded`, async () => {
      const { written: w, records } = await roundTrip(codec);
      const of = <T extends LogRecord['type']>(type: T) =>
        records.filter((r): r is Extract<LogRecord, { type: T }> => r.type === type);
      const p = w.process;
      const F = format;
      expect(of('process')).toEqual([
        {
          type: 'process',
          pid: p.pid,
          ppid: p.ppid,
          monotonicStartNs: p.mono_start,
          startTimeMs: Math.round(p.real_start / 1e6),
          stacks: (p.flags & F.PF_STACKS) !== 0,
          timing: (p.flags & F.PF_TIMING) !== 0,
          sampling: (p.flags & F.PF_SAMPLING) !== 0,
          dropWhenFull: (p.flags & F.PF_DROP) !== 0,
          freeStacks: (p.flags & F.PF_FREE_STACKS) !== 0,
          forkChild: (p.flags & F.PF_FORK_CHILD) !== 0,
          vmEvents: (p.flags & F.PF_VM) !== 0,
          attached: (p.flags & F.PF_ATTACHED) !== 0,
          stackDepth: p.stack_depth,
          sampleBytes: p.sample_bytes,
          timeUnitNs: p.time_unit,
          tracerVersion: p.version,
          exe: p.exe,
          argv: p.argv,
        },
      ]);
      const m = w.module;
      expect(of('module')).toEqual([
        {
          type: 'module',
          base: m.base,
          start: m.base + m.lo,
          end: m.base + m.hi,
          buildId: m.build_id,
          path: m.path,
        },
      ]);
      expect(of('stack')).toEqual(w.nodes.map((n) => ({ type: 'stack', ...n })));
      // one THREAD per thread, numbered from 1 in order of first appearance, before its first event
      const tids = [...new Set([...w.events.map((e) => e.tid), ...w.rt.map((r) => r.tid)])];
      expect(of('thread')).toEqual(tids.map((tid, i) => ({ type: 'thread', index: i + 1, tid })));
      expect(of('event')).toEqual(w.events.map((e) => expectedEvent(e, p.mono_start, p.flags)));
      expect(of('vm')).toEqual(
        w.vm.map((v) => ({
          type: 'vm',
          kind: v.mapped ? 'mapped' : 'unmapped',
          time: v.time - p.mono_start,
          tid: v.tid,
          stack: v.stack,
          address: v.addr,
          size: v.size,
        })),
      );
      expect(of('rt_violation')).toEqual(
        w.rt.map((r) => ({
          type: 'rt_violation',
          time: r.time - p.mono_start,
          tid: r.tid,
          stack: r.stack,
          site: r.site,
          call: r.call,
          threadName: r.thread_name,
          policy: r.policy,
          priority: r.priority,
          count: r.count,
        })),
      );
      expect(of('leak')).toEqual([{ type: 'leak', ...w.leak }]);
      const c = w.leak_check;
      const triggers: Record<number, string> = {
        [F.TRIGGER_EXIT]: 'exit',
        [F.TRIGGER_SIGNAL]: 'signal',
        [F.TRIGGER_API]: 'api',
      };
      expect(of('leak_check')).toEqual([
        {
          type: 'leak_check',
          check: c.check,
          time: c.time - p.mono_start,
          trigger: triggers[c.trigger],
          liveBlocks: c.live,
          leakedBlocks: c.leaked,
          leakedBytes: c.leaked_bytes,
          reachableBlocks: c.reachable,
          reachableBytes: c.reachable_bytes,
          durationNs: c.duration_ns,
        },
      ]);
      const reasons: Record<number, string> = {
        [F.END_EXIT]: 'exit',
        [F.END_LOST]: 'lost',
        [F.END_COLLECTOR]: 'collector',
        [F.END_DETACH]: 'detach',
        [F.END_WRITE_ERROR]: 'write_error',
      };
      const end = of('end');
      expect(end).toHaveLength(1);
      // END's time is the writer's clock at close (ns since the PROCESS's start): not written here
      expect(end[0]).toEqual({
        type: 'end',
        reason: reasons[w.end.reason],
        dropped: w.end.dropped,
        events: w.end.events,
        time: end[0]!.time,
      });
      expect(records.at(-1)?.type).toBe('end');

      // every tag of heaplog.h, and every operation, made the round trip
      const tags = Object.keys(format).filter((k) => k.startsWith('TAG_'));
      expect(
        tags.filter((t) => kindOfTag[t] === undefined),
        'tags without a round trip in this test',
      ).toEqual([]);
      for (const t of tags)
        expect(records.some(kindOfTag[t]!), `no ${t} record decoded`).toBe(true);
      expect(new Set(of('event').map((e) => e.op))).toEqual(new Set(OPS));
    });
  }
});

/**
 * A write that fails (here the file size limit, EFBIG, as a full disk's ENOSPC): the log ends at
 * its last whole block and says so, with the count of the events in it.
 */
describe('a log whose write fails', () => {
  for (const codec of [0, 1, 2]) {
    it(`ends at its last whole block with END write_error and the events written (codec ${codec})`, async () => {
      // two blocks of ~128 KiB fit, and after them the END block (a ten-stream table, the
      // record: ~40 bytes), not a third block
      const limit = 256 * 1024 + 200;
      const log = join(dir, `fsize${codec}.log`);
      const run = spawnSync(
        join(release, 'hh_test_writer_roundtrip'),
        [log, String(codec), 'fsize', String(limit)],
        { encoding: 'utf8' },
      );
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      const out = JSON.parse(run.stdout) as { error: number; written: number; events: number };
      expect(out.error).toBe(27); // EFBIG
      expect(out.written).toBeGreaterThan(0);
      expect(out.events).toBeGreaterThan(out.written + 999);
      expect(statSync(log).size).toBeLessThanOrEqual(limit);
      const records: LogRecord[] = [];
      for await (const r of decodeLog(log)) records.push(r); // whole blocks only: no error
      expect(records.filter((r) => r.type === 'event')).toHaveLength(out.written);
      const end = records.at(-1);
      expect(end).toMatchObject({ type: 'end', reason: 'write_error', events: out.written });
    });
  }

  it('a log whose header does not fit is not left behind', () => {
    const log = join(dir, 'fsize-header.log');
    const run = spawnSync(join(release, 'hh_test_writer_roundtrip'), [log, '0', 'fsize', '10'], {
      encoding: 'utf8',
    });
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ open: 27 });
    expect(existsSync(log)).toBe(false);
  });
});

describe('the size classes list 128 recent frees (format version 3)', () => {
  it('reads back blocks whose addresses come from deep in their class list', async () => {
    // writer_roundtrip.c's deep mode: per round, 300 blocks of 24 bytes allocated, all freed in
    // order, allocated again at (i * 7) % 300, then 300 unrelated large blocks; three rounds.
    const log = join(dir, 'deep.log');
    const run = spawnSync(join(release, 'hh_test_writer_roundtrip'), [log, '2', 'deep'], {
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('{"events":3600}\n');
    const events: EventRecord[] = [];
    for await (const r of decodeLog(log)) if (r.type === 'event') events.push(r);
    expect(events).toHaveLength(3600);
    for (let r = 0; r < 3; r++) {
      const round = events.slice(r * 1200, r * 1200 + 900);
      const a = 0x5555000010a0 + r * 0x100000;
      const expected = [
        ...Array.from({ length: 300 }, (_, i) => ['malloc', a + i * 0x20]),
        ...Array.from({ length: 300 }, (_, i) => ['free', a + i * 0x20]),
        ...Array.from({ length: 300 }, (_, i) => ['malloc', a + ((i * 7) % 300) * 0x20]),
      ];
      expect(round.map((e) => [e.op, e.ptr])).toEqual(expected);
    }
  });
});
