/**
 * The streaming heaplog decoder. Reads the file block by block (each block is
 * length + CRC-32 + records), so memory stays bounded by one block whatever the log's size.
 * Damage is reported as a LogFormatError naming the byte offset; every record before it has
 * been yielded already.
 */
import { open } from 'node:fs/promises';
import { crc32, inflateRawSync } from 'node:zlib';

import { Decompress as ZstdStream } from 'fzstd';

import {
  OPS,
  type EndRecord,
  type EventRecord,
  type LogRecord,
  type ModuleRecord,
  type ProcessRecord,
} from './records.js';

export const MAGIC = 'HHEAPLOG';
export const FORMAT_VERSION = 1;
const FILE_HEADER_SIZE = 16;
const BLOCK_HEADER_SIZE = 8;
const MAX_BLOCK = 64 * 1024 * 1024;
const BLOCK_DEFLATED = 0x80000000;
const BLOCK_ZSTD = 0x40000000;
const BLOCK_LENGTH = 0x3fffffff;

const TAG_PROCESS = 0x01;
const TAG_MODULE = 0x02;
const TAG_THREAD = 0x03;
const TAG_NODE = 0x04;
const TAG_END = 0x05;
const TAG_LEAK = 0x06;
const TAG_LEAK_CHECK = 0x07;
const EVT_THREAD = 0x10;
const EVT_STACK = 0x20;
const EVT_SPLIT = 0x40;

const PF_STACKS = 1;
const PF_TIMING = 2;
const PF_SAMPLING = 4;
const PF_DROP = 8;
const PF_FREE_STACKS = 16;
const PF_FORK_CHILD = 32;

/** A log that cannot be decoded past `offset`. */
export class LogFormatError extends Error {
  constructor(
    readonly path: string,
    readonly offset: number,
    detail: string,
  ) {
    super(`${path}: ${detail} at byte offset ${offset}; everything before it was decoded`);
    this.name = 'LogFormatError';
  }
}

class Cursor {
  pos = 0;
  constructor(
    readonly buf: Buffer,
    readonly end: number,
  ) {}

  u8(): number {
    if (this.pos >= this.end) throw new RangeError('record runs past the end of its block');
    return this.buf[this.pos++]!;
  }

  varint(): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.u8();
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 128;
    }
    throw new RangeError('varint longer than 10 bytes');
  }

  svarint(): number {
    const z = this.varint();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }

  bytes(): Buffer {
    const n = this.varint();
    if (this.pos + n > this.end) throw new RangeError('string runs past the end of its block');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  string(): string {
    return this.bytes().toString('utf8');
  }
}

/** The columns of a block (FORMAT.md, "Blocks"). */
interface Streams {
  tag: Cursor;
  time: Cursor;
  stack: Cursor;
  num: Cursor;
  addr: Cursor;
  decl: Cursor;
}
const STREAM_NAMES = ['tag', 'time', 'stack', 'num', 'addr', 'decl'] as const;

function splitStreams(payload: Buffer): Streams {
  const head = new Cursor(payload, payload.length);
  const n = head.varint();
  if (n !== STREAM_NAMES.length) throw new RangeError(`block of ${n} streams (expected 6)`);
  const lengths = STREAM_NAMES.map(() => head.varint());
  let at = head.pos;
  const out: Partial<Streams> = {};
  STREAM_NAMES.forEach((name, i) => {
    const len = lengths[i]!;
    if (at + len > payload.length) throw new RangeError('stream lengths exceed the block');
    out[name] = new Cursor(payload.subarray(at, at + len), len);
    at += len;
  });
  if (at !== payload.length) throw new RangeError('bytes after the last stream');
  return out as Streams;
}

/** Delta state of the decoder: restarted at each block, except what persists by design. */
interface State {
  flags: number;
  unit: number; // ns per time tick
  threads: Map<number, number>; // index -> tid (persists)
  time: number;
  addr: number;
  pc: number;
  node: number; // id of the previous NODE record in the block
  thread: number; // current thread index
  stacks: Map<number, number>; // thread index -> previous stack, this block
  // Address coding (persists across blocks): live blocks by address -> ordinal, and back.
  ordinal: number;
  liveOrdinal: Map<number, number>; // address -> ordinal * 256 + size class
  livePtr: Map<number, number>; // ordinal -> address
  recent: Float64Array; // a ring: entry k (0 = freed last) is recent[(recentHead - 1 - k) % RECENT]
  recentHead: number;
  classes: number[][];
  bumpAddr: number; // the last new block and its request: the next may follow it directly
  bumpBytes: number;
  prevRef: number; // ordinal of the block named by the last reference
}

const RECENT = 64;
const CLASSES = 64;
const CLASS_DEPTH = 16;
const NO_CLASS = 0xff;

/** The size class of a request (as the writer computes it). */
function classOf(bytes: number): number {
  return bytes <= 1008 ? Math.floor((bytes + 8 + 15) / 16) : NO_CLASS;
}

function pushFront(list: number[], n: number, value: number): void {
  list.unshift(value);
  list.length = n;
}

function unzigzag(z: number): number {
  return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
}

/** A block that ends here (free, realloc's old block). */
function readRef(c: Cursor, s: State, remove: boolean): number {
  const v = c.varint();
  let ptr: number;
  if (v % 2 === 0) {
    const ordinal = s.prevRef + 1 + unzigzag(v / 2);
    const found = s.livePtr.get(ordinal);
    if (found === undefined) throw new RangeError(`reference to unknown block #${ordinal}`);
    ptr = found;
    s.prevRef = ordinal;
  } else {
    ptr = s.addr + unzigzag((v - 1) / 2);
  }
  if (ptr !== 0 && remove) {
    const live = s.liveOrdinal.get(ptr);
    let cls = NO_CLASS;
    if (live !== undefined) {
      s.liveOrdinal.delete(ptr);
      s.livePtr.delete(Math.floor(live / 256));
      cls = live % 256;
    }
    s.recent[s.recentHead++ % RECENT] = ptr;
    if (cls < CLASSES) pushFront(s.classes[cls]!, CLASS_DEPTH, ptr);
  }
  s.addr = ptr;
  return ptr;
}

/** A block that begins here (see FORMAT.md, "Addresses"). */
function readNew(c: Cursor, s: State, classBytes: number, request: number): number {
  const v = c.varint();
  const cls = classOf(classBytes);
  let ptr: number;
  if (v % 2 === 1) {
    ptr = s.addr + unzigzag((v - 1) / 2);
  } else if (v % 4 === 0) {
    const found = s.classes[cls]?.[v / 4];
    if (found === undefined || found === 0) {
      throw new RangeError(`reference to unknown free ${v / 4} of size class ${cls}`);
    }
    ptr = found;
  } else if (v === 2) {
    if (s.bumpAddr === 0) throw new RangeError('reference to the block after none');
    const chunk = Math.floor((s.bumpBytes + 8 + 15) / 16) * 16;
    ptr = s.bumpAddr + Math.max(32, chunk);
  } else {
    const k = (v - 2) / 4 - 1;
    const found = k < RECENT ? s.recent[(s.recentHead - 1 - k + RECENT * 2) % RECENT] : undefined;
    if (found === undefined || found === 0)
      throw new RangeError(`reference to unknown recent free ${k}`);
    ptr = found;
  }
  if (ptr !== 0) {
    if (cls < CLASSES) {
      const list = s.classes[cls]!;
      const i = list.indexOf(ptr);
      if (i >= 0) {
        list.splice(i, 1);
        list.push(0);
      }
    }
    s.ordinal++;
    const previous = s.liveOrdinal.get(ptr);
    if (previous !== undefined) s.livePtr.delete(Math.floor(previous / 256));
    s.liveOrdinal.set(ptr, s.ordinal * 256 + cls);
    s.livePtr.set(s.ordinal, ptr);
    s.bumpAddr = ptr;
    s.bumpBytes = request;
  }
  s.addr = ptr;
  return ptr;
}

function decodeRecord(cs: Streams, s: State, out: LogRecord[]): void {
  const tag = cs.tag.u8();
  const c = cs.decl;
  if (tag & 0x80) {
    const op = OPS[tag & 0x0f];
    if (op === undefined) throw new RangeError(`unknown operation ${tag & 0x0f}`);
    s.time += cs.time.svarint() * s.unit;
    if (tag & EVT_THREAD) s.thread = cs.stack.varint();
    const tid = s.threads.get(s.thread);
    if (tid === undefined) throw new RangeError(`event of undeclared thread index ${s.thread}`);
    const carriesStack =
      op !== 'realloc_done' && (op !== 'free' || (s.flags & PF_FREE_STACKS) !== 0);
    let stack = carriesStack ? (s.stacks.get(s.thread) ?? 0) : 0;
    if (tag & EVT_STACK) stack = cs.stack.varint();
    if (carriesStack) s.stacks.set(s.thread, stack);
    let ptr = 0;
    let oldPtr = 0;
    let size = 0;
    let count = 1;
    let align = 0;
    switch (op) {
      case 'malloc':
      case 'valloc':
      case 'pvalloc':
        size = cs.num.varint();
        ptr = readNew(cs.addr, s, size, size);
        break;
      case 'calloc':
        count = cs.num.varint();
        size = cs.num.varint();
        ptr = readNew(cs.addr, s, count * size, count * size);
        break;
      case 'realloc':
      case 'reallocarray': {
        if (op === 'reallocarray') count = cs.num.varint();
        size = cs.num.varint();
        const bytes = op === 'reallocarray' ? count * size : size;
        // A failed call (new block 0 for a size > 0) keeps the old block. The new address
        // follows the old one, so look ahead at it before consuming the old reference.
        const mark = cs.addr.pos;
        const saved = { addr: s.addr, prevRef: s.prevRef };
        oldPtr = readRef(cs.addr, s, false);
        const peek = cs.addr.varint();
        const failed = bytes !== 0 && peek % 2 === 1 && oldPtr + unzigzag((peek - 1) / 2) === 0;
        cs.addr.pos = mark;
        s.addr = saved.addr;
        s.prevRef = saved.prevRef;
        oldPtr = readRef(cs.addr, s, !failed);
        ptr = readNew(cs.addr, s, bytes, bytes);
        break;
      }
      case 'free':
        ptr = readRef(cs.addr, s, true);
        break;
      case 'posix_memalign':
      case 'memalign':
      case 'aligned_alloc':
        align = cs.num.varint();
        size = cs.num.varint();
        ptr = readNew(cs.addr, s, Number.MAX_SAFE_INTEGER, size);
        break;
      case 'realloc_done':
        break;
    }
    let duration: number | undefined;
    let weight: number | undefined;
    if (op !== 'realloc_done') {
      if (s.flags & PF_TIMING) duration = cs.num.varint();
      if (s.flags & PF_SAMPLING && op !== 'free') weight = cs.num.varint();
    }
    const event: EventRecord = {
      type: 'event',
      op,
      time: s.time,
      tid,
      stack,
      ptr,
      oldPtr,
      size,
      count,
      align,
      split: (tag & EVT_SPLIT) !== 0,
      duration,
      weight,
    };
    out.push(event);
    return;
  }
  switch (tag) {
    case TAG_PROCESS: {
      const pid = c.varint();
      const ppid = c.varint();
      const monotonicStartNs = c.varint();
      const realtime = c.varint();
      const flags = c.varint();
      const stackDepth = c.varint();
      const sampleBytes = c.varint();
      const timeUnit = c.varint();
      const tracerVersion = c.string();
      const exe = c.string();
      const cmdline = c.string();
      s.flags = flags;
      s.unit = timeUnit > 0 ? timeUnit : 1;
      const process: ProcessRecord = {
        type: 'process',
        pid,
        ppid,
        monotonicStartNs,
        startTimeMs: Math.round(realtime / 1e6),
        stacks: (flags & PF_STACKS) !== 0,
        timing: (flags & PF_TIMING) !== 0,
        sampling: (flags & PF_SAMPLING) !== 0,
        dropWhenFull: (flags & PF_DROP) !== 0,
        freeStacks: (flags & PF_FREE_STACKS) !== 0,
        forkChild: (flags & PF_FORK_CHILD) !== 0,
        stackDepth,
        sampleBytes,
        timeUnitNs: s.unit,
        tracerVersion,
        exe,
        argv: cmdline.split('\0').filter((a, i, all) => i < all.length - 1 || a !== ''),
      };
      out.push(process);
      return;
    }
    case TAG_MODULE: {
      const base = c.varint();
      const lo = c.varint();
      const hi = c.varint();
      const buildId = c.bytes().toString('hex');
      const path = c.string();
      const module: ModuleRecord = {
        type: 'module',
        base,
        start: base + lo,
        end: base + hi,
        buildId,
        path,
      };
      out.push(module);
      return;
    }
    case TAG_THREAD: {
      const index = c.varint();
      const tid = c.varint();
      s.threads.set(index, tid);
      out.push({ type: 'thread', index, tid });
      return;
    }
    case TAG_NODE: {
      const id = s.node + 1 + c.svarint();
      const parent = id - c.varint();
      s.pc += c.svarint();
      s.node = id;
      out.push({ type: 'stack', id, parent, pc: s.pc });
      return;
    }
    case TAG_END: {
      const reasonCode = c.varint();
      const dropped = c.varint();
      const time = c.varint() * s.unit;
      const events = c.varint();
      const reasons: EndRecord['reason'][] = ['exit', 'lost', 'collector'];
      out.push({
        type: 'end',
        reason: reasons[reasonCode] ?? 'unknown',
        dropped,
        time,
        events,
      });
      return;
    }
    case TAG_LEAK: {
      const check = c.varint();
      const ptr = c.varint();
      const size = c.varint();
      out.push({ type: 'leak', check, ptr, size });
      return;
    }
    case TAG_LEAK_CHECK: {
      const check = c.varint();
      const time = c.varint();
      const triggerCode = c.varint();
      const liveBlocks = c.varint();
      const leakedBlocks = c.varint();
      const leakedBytes = c.varint();
      const reachableBlocks = c.varint();
      const reachableBytes = c.varint();
      const durationNs = c.varint();
      const triggers = ['exit', 'signal', 'api'] as const;
      const trigger = triggers[triggerCode];
      if (trigger === undefined) throw new RangeError(`unknown leak check trigger ${triggerCode}`);
      out.push({
        type: 'leak_check',
        check,
        time,
        trigger,
        liveBlocks,
        leakedBlocks,
        leakedBytes,
        reachableBlocks,
        reachableBytes,
        durationNs,
      });
      return;
    }
    default:
      throw new RangeError(`unknown record tag 0x${tag.toString(16).padStart(2, '0')}`);
  }
}

export interface DecodeOptions {
  /** Bytes read from the file at a time (default 1 MiB). */
  readonly chunkSize?: number;
}

/**
 * Decodes a heaplog block by block: yields the records of each block as an array. Memory use
 * is bounded by the largest block plus one chunk.
 */
export async function* decodeLogBatches(
  path: string,
  options: DecodeOptions = {},
): AsyncGenerator<LogRecord[]> {
  const chunkSize = options.chunkSize ?? 1024 * 1024;
  const file = await open(path, 'r');
  try {
    let pending = Buffer.alloc(0);
    let pendingOffset = 0; // file offset of pending[0]
    let eof = false;
    const fill = async (need: number): Promise<boolean> => {
      while (pending.length < need && !eof) {
        const chunk = Buffer.allocUnsafe(Math.max(chunkSize, need - pending.length));
        const { bytesRead } = await file.read(chunk, 0, chunk.length, null);
        if (bytesRead === 0) eof = true;
        else pending = Buffer.concat([pending, chunk.subarray(0, bytesRead)]);
      }
      return pending.length >= need;
    };
    const consume = (n: number): void => {
      pending = pending.subarray(n);
      pendingOffset += n;
    };

    if (!(await fill(FILE_HEADER_SIZE))) {
      throw new LogFormatError(
        path,
        pending.length,
        `not a heaplog: ${pending.length} bytes, shorter than the ${FILE_HEADER_SIZE}-byte header`,
      );
    }
    if (pending.subarray(0, 8).toString('latin1') !== MAGIC) {
      throw new LogFormatError(path, 0, `not a heaplog (the file does not begin with ${MAGIC})`);
    }
    const version = pending.readUInt8(8);
    if (version !== FORMAT_VERSION) {
      throw new LogFormatError(
        path,
        8,
        `heaplog format version ${version} is not supported (this decoder reads version ${FORMAT_VERSION}); update @heaphook/heaptrack`,
      );
    }
    consume(FILE_HEADER_SIZE);

    let zstdStream: ZstdStream | undefined;
    const state: State = {
      flags: 0,
      unit: 1,
      threads: new Map(),
      time: 0,
      addr: 0,
      pc: 0,
      node: 0,
      thread: 0,
      stacks: new Map(),
      ordinal: 0,
      liveOrdinal: new Map(),
      livePtr: new Map(),
      recent: new Float64Array(RECENT),
      recentHead: 0,
      classes: Array.from({ length: CLASSES }, () => new Array<number>(CLASS_DEPTH).fill(0)),
      bumpAddr: 0,
      bumpBytes: 0,
      prevRef: 0,
    };
    for (;;) {
      if (!(await fill(BLOCK_HEADER_SIZE))) {
        if (pending.length === 0) return;
        throw new LogFormatError(
          path,
          pendingOffset,
          `log truncated: ${pending.length} bytes of a block header`,
        );
      }
      const blockOffset = pendingOffset;
      const lengthWord = pending.readUInt32LE(0);
      const deflated = (lengthWord & BLOCK_DEFLATED) !== 0;
      const zstd = (lengthWord & BLOCK_ZSTD) !== 0;
      const length = lengthWord & BLOCK_LENGTH;
      const crc = pending.readUInt32LE(4);
      if (length === 0 || length > MAX_BLOCK) {
        throw new LogFormatError(path, blockOffset, `corrupt block header (length ${length})`);
      }
      if (!(await fill(BLOCK_HEADER_SIZE + length))) {
        throw new LogFormatError(
          path,
          blockOffset,
          `log truncated: the block here announces ${length} bytes but only ${pending.length - BLOCK_HEADER_SIZE} follow`,
        );
      }
      const stored = pending.subarray(BLOCK_HEADER_SIZE, BLOCK_HEADER_SIZE + length);
      if (crc32(stored) !== crc) {
        throw new LogFormatError(
          path,
          blockOffset,
          `corrupt block (CRC-32 mismatch over bytes ${blockOffset + BLOCK_HEADER_SIZE}..${blockOffset + BLOCK_HEADER_SIZE + length})`,
        );
      }
      let payload = stored;
      if (deflated) {
        try {
          payload = inflateRawSync(stored);
        } catch (error) {
          throw new LogFormatError(
            path,
            blockOffset,
            `corrupt compressed block (${(error as Error).message})`,
          );
        }
      } else if (zstd) {
        // One zstd stream across the file, flushed at every block: <raw length> <zstd bytes>.
        const head = new Cursor(stored, stored.length);
        const chunks: Uint8Array[] = [];
        try {
          const rawLength = head.varint();
          zstdStream ??= new ZstdStream();
          zstdStream.ondata = (chunk) => {
            chunks.push(Buffer.from(chunk));
          };
          zstdStream.push(stored.subarray(head.pos));
          payload = Buffer.concat(chunks);
          if (payload.length !== rawLength) {
            throw new RangeError(`${payload.length} bytes decompressed of ${rawLength}`);
          }
        } catch (error) {
          throw new LogFormatError(
            path,
            blockOffset,
            `corrupt compressed block (${(error as Error).message})`,
          );
        }
      }
      state.time = 0;
      state.addr = 0;
      state.pc = 0;
      state.node = 0;
      state.thread = 0;
      state.stacks.clear();
      const records: LogRecord[] = [];
      let streams: Streams;
      try {
        streams = splitStreams(payload);
      } catch (error) {
        throw new LogFormatError(path, blockOffset, `corrupt block (${(error as Error).message})`);
      }
      let index = 0;
      try {
        while (streams.tag.pos < streams.tag.end) {
          decodeRecord(streams, state, records);
          index++;
        }
        for (const name of STREAM_NAMES) {
          if (streams[name].pos !== streams[name].end) {
            throw new RangeError(
              `${streams[name].end - streams[name].pos} bytes left in its ${name} stream`,
            );
          }
        }
      } catch (error) {
        if (records.length > 0) yield records.splice(0);
        throw new LogFormatError(
          path,
          blockOffset,
          `undecodable record #${index} (${(error as Error).message}) in the block`,
        );
      }
      consume(BLOCK_HEADER_SIZE + length);
      yield records;
    }
  } finally {
    await file.close();
  }
}

/** Decodes a heaplog record by record (see decodeLogBatches). */
export async function* decodeLog(
  path: string,
  options: DecodeOptions = {},
): AsyncGenerator<LogRecord> {
  for await (const batch of decodeLogBatches(path, options)) yield* batch;
}
