/**
 * The streaming heaplog decoder. Reads the file block by block (each block is
 * length + CRC-32 + records), so memory stays bounded by one block whatever the log's size.
 * Damage is reported as a LogFormatError naming the byte offset; every record before it has
 * been yielded already.
 */
import { open } from 'node:fs/promises';
import { crc32, inflateRawSync } from 'node:zlib';

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

const TAG_PROCESS = 0x01;
const TAG_MODULE = 0x02;
const TAG_THREAD = 0x03;
const TAG_NODE = 0x04;
const TAG_END = 0x05;
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

/** Delta state of the decoder: restarted at each block, except what persists by design. */
interface State {
  flags: number;
  unit: number; // ns per time tick
  threads: Map<number, number>; // index -> tid (persists)
  time: number;
  addr: number;
  pc: number;
  thread: number; // current thread index
  stacks: Map<number, number>; // thread index -> previous stack, this block
  // Address coding (persists across blocks): live blocks by address -> ordinal, and back.
  ordinal: number;
  liveOrdinal: Map<number, { ordinal: number; cls: number }>;
  livePtr: Map<number, number>;
  recent: number[];
  classes: number[][];
}

const RECENT = 8;
const CLASSES = 64;
const CLASS_DEPTH = 4;
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
    const ordinal = s.ordinal - v / 2;
    const found = s.livePtr.get(ordinal);
    if (found === undefined)
      throw new RangeError(`reference to unknown block ${v / 2} allocations back`);
    ptr = found;
  } else {
    ptr = s.addr + unzigzag((v - 1) / 2);
  }
  if (ptr !== 0 && remove) {
    const live = s.liveOrdinal.get(ptr);
    if (live !== undefined) {
      s.liveOrdinal.delete(ptr);
      s.livePtr.delete(live.ordinal);
    }
    pushFront(s.recent, RECENT, ptr);
    const cls = live?.cls ?? NO_CLASS;
    if (cls < CLASSES) pushFront(s.classes[cls]!, CLASS_DEPTH, ptr);
  }
  s.addr = ptr;
  return ptr;
}

/** A block of `bytes` that begins here. */
function readNew(c: Cursor, s: State, bytes: number): number {
  const v = c.varint();
  const cls = classOf(bytes);
  let ptr: number;
  if (v % 2 === 1) {
    ptr = s.addr + unzigzag((v - 1) / 2);
  } else {
    const k = Math.floor(v / 4);
    const list = v % 4 === 0 ? s.classes[cls] : s.recent;
    const found = list?.[k];
    if (found === undefined || found === 0) {
      throw new RangeError(`reference to unknown recent free ${k}`);
    }
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
    if (previous !== undefined) s.livePtr.delete(previous.ordinal);
    s.liveOrdinal.set(ptr, { ordinal: s.ordinal, cls });
    s.livePtr.set(s.ordinal, ptr);
  }
  s.addr = ptr;
  return ptr;
}

function decodeRecord(c: Cursor, s: State, out: LogRecord[]): void {
  const tag = c.u8();
  if (tag & 0x80) {
    const op = OPS[tag & 0x0f];
    if (op === undefined) throw new RangeError(`unknown operation ${tag & 0x0f}`);
    s.time += c.svarint() * s.unit;
    if (tag & EVT_THREAD) s.thread = c.varint();
    const tid = s.threads.get(s.thread);
    if (tid === undefined) throw new RangeError(`event of undeclared thread index ${s.thread}`);
    const carriesStack =
      op !== 'realloc_done' && (op !== 'free' || (s.flags & PF_FREE_STACKS) !== 0);
    let stack = carriesStack ? (s.stacks.get(s.thread) ?? 0) : 0;
    if (tag & EVT_STACK) stack = c.varint();
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
        size = c.varint();
        ptr = readNew(c, s, size);
        break;
      case 'calloc':
        count = c.varint();
        size = c.varint();
        ptr = readNew(c, s, count * size);
        break;
      case 'realloc':
      case 'reallocarray': {
        if (op === 'reallocarray') count = c.varint();
        size = c.varint();
        const bytes = op === 'reallocarray' ? count * size : size;
        // A failed call (new block 0 for a size > 0) keeps the old block. The new address
        // follows the old one, so look ahead at it before consuming the old reference.
        const mark = c.pos;
        const savedAddr = s.addr;
        oldPtr = readRef(c, s, false);
        const peek = c.varint();
        const failed = bytes !== 0 && peek % 2 === 1 && oldPtr + unzigzag((peek - 1) / 2) === 0;
        c.pos = mark;
        s.addr = savedAddr;
        oldPtr = readRef(c, s, !failed);
        ptr = readNew(c, s, bytes);
        break;
      }
      case 'free':
        ptr = readRef(c, s, true);
        break;
      case 'posix_memalign':
      case 'memalign':
      case 'aligned_alloc':
        align = c.varint();
        size = c.varint();
        ptr = readNew(c, s, Number.MAX_SAFE_INTEGER);
        break;
      case 'realloc_done':
        break;
    }
    let duration: number | undefined;
    let weight: number | undefined;
    if (op !== 'realloc_done') {
      if (s.flags & PF_TIMING) duration = c.varint();
      if (s.flags & PF_SAMPLING && op !== 'free') weight = c.varint();
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
      ...(duration !== undefined ? { duration } : {}),
      ...(weight !== undefined ? { weight } : {}),
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
      const id = c.varint();
      const parent = c.varint();
      s.pc += c.svarint();
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

    const state: State = {
      flags: 0,
      unit: 1,
      threads: new Map(),
      time: 0,
      addr: 0,
      pc: 0,
      thread: 0,
      stacks: new Map(),
      ordinal: 0,
      liveOrdinal: new Map(),
      livePtr: new Map(),
      recent: new Array<number>(RECENT).fill(0),
      classes: Array.from({ length: CLASSES }, () => new Array<number>(CLASS_DEPTH).fill(0)),
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
      const length = lengthWord & ~BLOCK_DEFLATED;
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
      }
      state.time = 0;
      state.addr = 0;
      state.pc = 0;
      state.thread = 0;
      state.stacks.clear();
      const cursor = new Cursor(payload, payload.length);
      const records: LogRecord[] = [];
      while (cursor.pos < cursor.end) {
        const at = cursor.pos;
        try {
          decodeRecord(cursor, state, records);
        } catch (error) {
          if (records.length > 0) yield records.splice(0);
          throw new LogFormatError(
            path,
            blockOffset + BLOCK_HEADER_SIZE + at,
            `undecodable record (${(error as Error).message})`,
          );
        }
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
