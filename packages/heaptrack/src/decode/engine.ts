/**
 * The hot path of the heaplog decoder: reads the events of one block straight from its column
 * streams into typed arrays (EventColumns), with the address coding of FORMAT.md ("Addresses")
 * kept in typed-array hash tables. No object is allocated per event. Declarations (and every
 * other non-event record) are handed back to the caller, which decodes them from the streams.
 */
import type { EventColumns } from './columns.js';
import {
  CHUNK_ALIGN,
  CHUNK_HEADER,
  CHUNK_MIN,
  CLASS_DEPTH,
  CLASS_DEPTH_V2,
  CLASS_MAX_BYTES,
  CLASSES,
  EVT_OP_MASK,
  EVT_SPLIT,
  EVT_STACK,
  EVT_THREAD,
  FIELD_ALIGN_OPS,
  FIELD_COUNT_OPS,
  FIELD_DURATION_FLAG,
  FIELD_DURATION_OPS,
  FIELD_OLD_OPS,
  FIELD_PTR_OPS,
  FIELD_SIZE_OPS,
  FIELD_WEIGHT_FLAG,
  FIELD_WEIGHT_OPS,
  MAX_EXACT,
  MAX_THREAD_INDEX,
  MAX_VARINT_BYTES,
  NO_CLASS,
  OP_FREE,
  OP_REALLOC_DONE,
  ORDINAL_RING,
  OPS_ALIGNED,
  OPS_BEGINNING,
  OPS_ENDING,
  PF_DEEP_CLASSES,
  PF_FREE_STACKS,
  RECENT,
  STREAM_COUNT,
  STREAM_NAMES,
  TAG_EVENT,
} from './format.generated.js';
import { NumberTable } from './table.js';

/** A read position in one stream of a block's payload (absolute offsets into `buf`). */
export class Cursor {
  constructor(
    readonly buf: Buffer,
    public pos: number,
    readonly end: number,
  ) {}

  u8(): number {
    if (this.pos >= this.end) throw new RangeError('record runs past the end of its block');
    return this.buf[this.pos++]!;
  }

  varint(): number {
    const v = varint(this.buf, this.pos, this.end);
    this.pos = rp;
    return v;
  }

  svarint(): number {
    return unzigzag(this.varint());
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
export interface Streams {
  tag: Cursor;
  time: Cursor;
  stack: Cursor;
  num: Cursor;
  addr: Cursor;
  decl: Cursor;
}

export function splitStreams(payload: Buffer): Streams {
  const head = new Cursor(payload, 0, payload.length);
  const n = head.varint();
  if (n !== STREAM_COUNT) throw new RangeError(`block of ${n} streams (expected ${STREAM_COUNT})`);
  const lengths = STREAM_NAMES.map(() => head.varint());
  let at = head.pos;
  const out: Partial<Streams> = {};
  STREAM_NAMES.forEach((name, i) => {
    const len = lengths[i]!;
    if (at + len > payload.length) throw new RangeError('stream lengths exceed the block');
    out[name] = new Cursor(payload, at, at + len);
    at += len;
  });
  if (at !== payload.length) throw new RangeError('bytes after the last stream');
  return out as Streams;
}

/** Where the last varint read ended (a second return value without an allocation). */
let rp = 0;

function varintSlow(b: Uint8Array, p: number, end: number): number {
  let result = 0;
  let mul = 1;
  for (let i = 0; i < MAX_VARINT_BYTES; i++) {
    if (p >= end) throw new RangeError('record runs past the end of its block');
    const x = b[p++]!;
    result += (x & 0x7f) * mul;
    if (x < 0x80) {
      rp = p;
      return result;
    }
    mul *= 128;
  }
  throw new RangeError('varint longer than 10 bytes');
}

/** Reads the varint at `p` (before `end`); the position after it is left in `rp`. */
function varint(b: Uint8Array, p: number, end: number): number {
  if (p < end - 1) {
    const x = b[p]!;
    if (x < 0x80) {
      rp = p + 1;
      return x;
    }
    const y = b[p + 1]!;
    if (y < 0x80) {
      rp = p + 2;
      return (x & 0x7f) | (y << 7);
    }
  }
  return varintSlow(b, p, end);
}

/** A varint of the time, stack or addr stream (see MAX_EXACT). */
function varint53(b: Uint8Array, p: number, end: number): number {
  const v = varint(b, p, end);
  if (v > MAX_EXACT) throw new RangeError('value out of range');
  return v;
}

/** An address a reference codes: in [0, 2^53) (see MAX_EXACT). */
function address(a: number): number {
  if (!(a >= 0 && a <= MAX_EXACT)) throw new RangeError('address out of range');
  return a;
}

export function unzigzag(z: number): number {
  if (z <= 0x7fffffff) return (z >>> 1) ^ -(z & 1);
  return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
}

const RING = ORDINAL_RING;
const RING_MASK = RING - 1;
/** The request given for aligned calls: larger than any with a size class. */
const NO_CLASS_BYTES = Number.MAX_SAFE_INTEGER;

/**
 * Decoder state: the delta state restarts at each block (startBlock), the declarations and
 * the address state persist for the whole file.
 */
export class DecodeState {
  flags = 0;
  unit = 1; // ns per time tick
  readonly threads = new Map<number, number>(); // index -> tid (persists)
  time = 0;
  addr = 0; // previous address
  pc = 0;
  node = 0; // id of the previous NODE record in the block
  thread = 0; // current thread index
  /** Each thread's previous stack in this block, by thread index. */
  threadStack = new Float64Array(64);
  private maxThread = 0;
  // Address coding (persists across blocks).
  ordinal = 0;
  readonly liveOrdinal = new NumberTable(); // address -> ordinal * 256 + size class
  /**
   * Ordinal -> address of the live blocks: the last RING ordinals in a direct-mapped ring
   * (slot o & (RING - 1); 0 = not live), older live ones in a hash table. Frees name recent
   * blocks mostly, so most lookups are one array access.
   */
  readonly ringPtr = new Float64Array(RING);
  readonly oldPtr = new NumberTable();
  /** A ring: entry k (0 = freed last) is recent[(recentHead - 1 - k) & (RECENT - 1)]. */
  readonly recent = new Float64Array(RECENT);
  recentHead = 0;
  /**
   * Per size class, a ring of the addresses freed last: entry k (0 = freed last) of class c is
   * classes[c * CLASS_DEPTH + ((classHead[c] + k) & (CLASS_DEPTH - 1))]; a log without
   * PF_DEEP_CLASSES (version 2) uses the first CLASS_DEPTH_V2 entries and keeps the rest 0.
   */
  readonly classes = new Float64Array(CLASSES * CLASS_DEPTH);
  readonly classHead = new Uint8Array(CLASSES);
  bumpAddr = 0; // the last new block and its request: the next may follow it directly
  bumpBytes = 0;
  prevRef = 0; // ordinal of the block named by the last reference

  startBlock(): void {
    this.time = 0;
    this.addr = 0;
    this.pc = 0;
    this.node = 0;
    this.thread = 0;
    this.threadStack.fill(0, 0, this.maxThread + 1);
    this.maxThread = 0;
  }

  /** Makes room for thread index `t` in threadStack. */
  touchThread(t: number): void {
    if (t >= this.threadStack.length) {
      if (t > MAX_THREAD_INDEX) throw new RangeError(`thread index ${t} out of range`);
      const grown = new Float64Array(Math.max(t + 1, this.threadStack.length * 2));
      grown.set(this.threadStack);
      this.threadStack = grown;
    }
    if (t > this.maxThread) this.maxThread = t;
  }
}

/** The address of live block `ordinal`, or -1. */
function ptrOf(s: DecodeState, ordinal: number): number {
  if (ordinal > s.ordinal || ordinal < 1) return -1;
  if (ordinal > s.ordinal - RING) {
    const p = s.ringPtr[ordinal & RING_MASK]!;
    return p !== 0 ? p : -1;
  }
  return s.oldPtr.get(ordinal);
}

function forgetOrdinal(s: DecodeState, ordinal: number): void {
  if (ordinal > s.ordinal - RING) s.ringPtr[ordinal & RING_MASK] = 0;
  else s.oldPtr.delete(ordinal);
}

/** The size class of a request (as the writer computes it). */
function classOf(bytes: number): number {
  return bytes <= CLASS_MAX_BYTES
    ? Math.floor((bytes + CHUNK_HEADER + (CHUNK_ALIGN - 1)) / CHUNK_ALIGN)
    : NO_CLASS;
}

/** The block named by an `old` reference `v`; updates the previous reference and address. */
function resolveRef(s: DecodeState, v: number): number {
  let ptr: number;
  if (v <= 0x7fffffff ? (v & 1) === 0 : v % 2 === 0) {
    const ordinal = s.prevRef + 1 + unzigzag(v / 2);
    const found = ptrOf(s, ordinal);
    if (found < 0) throw new RangeError(`reference to unknown block #${ordinal}`);
    ptr = found;
    s.prevRef = ordinal;
  } else {
    ptr = address(s.addr + unzigzag((v - 1) / 2));
  }
  s.addr = ptr;
  return ptr;
}

/** The block at `ptr` ends: it leaves the live set and joins the free lists. */
function endBlock(s: DecodeState, ptr: number): void {
  const live = s.liveOrdinal.delete(ptr);
  let cls = NO_CLASS;
  if (live >= 0) {
    const ordinal = Math.floor(live / 256);
    forgetOrdinal(s, ordinal);
    cls = live - ordinal * 256;
  }
  s.recent[s.recentHead] = ptr;
  s.recentHead = (s.recentHead + 1) & (RECENT - 1);
  if (cls < CLASSES) {
    const depth = classDepth(s);
    const head = (s.classHead[cls]! - 1) & CLASS_MASK;
    s.classHead[cls] = head;
    const base = cls * CLASS_DEPTH;
    if (depth < CLASS_DEPTH) s.classes[base + ((head + depth) & CLASS_MASK)] = 0;
    s.classes[base + head] = ptr;
  }
}

const CLASS_MASK = CLASS_DEPTH - 1;

/** How many entries each size class's list of recent frees has in this log. */
function classDepth(s: DecodeState): number {
  return (s.flags & PF_DEEP_CLASSES) !== 0 ? CLASS_DEPTH : CLASS_DEPTH_V2;
}

/** Entry k (0 = freed last) of size class cls's list. */
function classEntry(s: DecodeState, cls: number, k: number): number {
  return s.classes[cls * CLASS_DEPTH + ((s.classHead[cls]! + k) & CLASS_MASK)]!;
}

/** A block that begins here, from its `new` reference `v` (see FORMAT.md, "Addresses"). */
function newBlock(s: DecodeState, v: number, classBytes: number, request: number): number {
  const cls = classOf(classBytes);
  let ptr: number;
  const low = v <= 0x7fffffff ? v & 3 : v % 4;
  if ((low & 1) === 1) {
    ptr = address(s.addr + unzigzag((v - 1) / 2));
  } else if (low === 0) {
    const k = v / 4;
    const found = cls < CLASSES && k < classDepth(s) ? classEntry(s, cls, k) : 0;
    if (found === 0) throw new RangeError(`reference to unknown free ${k} of size class ${cls}`);
    ptr = found;
  } else if (v === 2) {
    if (s.bumpAddr === 0) throw new RangeError('reference to the block after none');
    const chunk =
      Math.floor((s.bumpBytes + CHUNK_HEADER + (CHUNK_ALIGN - 1)) / CHUNK_ALIGN) * CHUNK_ALIGN;
    ptr = address(s.bumpAddr + Math.max(CHUNK_MIN, chunk));
  } else {
    const k = (v - 2) / 4 - 1;
    const found = k < RECENT ? s.recent[(s.recentHead - 1 - k) & (RECENT - 1)]! : 0;
    if (found === 0) throw new RangeError(`reference to unknown recent free ${k}`);
    ptr = found;
  }
  if (ptr !== 0) {
    // The address leaves its class list. A deep-class log's writer codes every address its
    // class list holds from the list, so one coded otherwise is not there.
    const depth = classDepth(s);
    if (cls < CLASSES && (low === 0 || depth < CLASS_DEPTH)) {
      const base = cls * CLASS_DEPTH;
      const head = s.classHead[cls]!;
      for (let i = 0; i < depth; i++) {
        if (s.classes[base + ((head + i) & CLASS_MASK)] === ptr) {
          for (let j = i; j > 0; j--) {
            s.classes[base + ((head + j) & CLASS_MASK)] =
              s.classes[base + ((head + j - 1) & CLASS_MASK)]!;
          }
          s.classes[base + head] = 0;
          s.classHead[cls] = (head + 1) & CLASS_MASK;
          break;
        }
      }
    }
    const ordinal = ++s.ordinal;
    // The ring slot of the new ordinal held the one RING before: keep it if still live.
    const slot = ordinal & RING_MASK;
    const evicted = s.ringPtr[slot]!;
    if (evicted !== 0) s.oldPtr.set(ordinal - RING, evicted);
    s.ringPtr[slot] = ptr;
    const previous = s.liveOrdinal.set(ptr, ordinal * 256 + cls);
    if (previous >= 0) forgetOrdinal(s, Math.floor(previous / 256));
    s.bumpAddr = ptr;
    s.bumpBytes = request;
  }
  s.addr = ptr;
  return ptr;
}

/**
 * Decodes the records of a block into `out` (whose capacity must be at least the length of
 * the tag stream), from the streams' current positions to the end of the tag stream. Every
 * record that is not an event is left to `onRecord`, called with the tag stream positioned on
 * its tag and the state (time, thread, address) up to date; it must consume the record.
 * On an error, out.length counts the events decoded before it.
 */
export function decodeBlockEvents(
  s: DecodeState,
  cs: Streams,
  out: EventColumns,
  onRecord: (eventsBefore: number) => void,
): void {
  const b = cs.tag.buf;
  const tEnd = cs.tag.end;
  const timeEnd = cs.time.end;
  const stEnd = cs.stack.end;
  const numEnd = cs.num.end;
  const adEnd = cs.addr.end;
  const oOp = out.op;
  const oSplit = out.split;
  const oTime = out.time;
  const oTid = out.tid;
  const oStack = out.stack;
  const oPtr = out.ptr;
  const oOld = out.oldPtr;
  const oSize = out.size;
  const oCount = out.count;
  const oAlign = out.align;
  const oDur = out.duration;
  const oWeight = out.weight;
  let tp = cs.tag.pos;
  let timeP = cs.time.pos;
  let stP = cs.stack.pos;
  let numP = cs.num.pos;
  let adP = cs.addr.pos;
  let n = out.length;
  let time = s.time;
  let thread = s.thread;
  let tid = s.threads.get(thread) ?? -1;
  let flags = s.flags;
  let unit = s.unit;
  let threadStack = s.threadStack;
  try {
    while (tp < tEnd) {
      const tag = b[tp]!;
      if ((tag & TAG_EVENT) === 0) {
        cs.tag.pos = tp;
        cs.time.pos = timeP;
        cs.stack.pos = stP;
        cs.num.pos = numP;
        cs.addr.pos = adP;
        s.time = time;
        s.thread = thread;
        out.length = n;
        onRecord(n);
        tp = cs.tag.pos;
        timeP = cs.time.pos;
        stP = cs.stack.pos;
        numP = cs.num.pos;
        adP = cs.addr.pos;
        time = s.time;
        thread = s.thread;
        tid = s.threads.get(thread) ?? -1;
        flags = s.flags;
        unit = s.unit;
        threadStack = s.threadStack;
        continue;
      }
      tp++;
      const op = tag & EVT_OP_MASK;
      if (op > OP_REALLOC_DONE) throw new RangeError(`unknown operation ${op}`);
      time += unzigzag(varint53(b, timeP, timeEnd)) * unit;
      timeP = rp;
      if (tag & EVT_THREAD) {
        thread = varint53(b, stP, stEnd);
        stP = rp;
        tid = s.threads.get(thread) ?? -1;
        if (tid >= 0) {
          s.touchThread(thread);
          threadStack = s.threadStack;
        }
      }
      if (tid < 0) throw new RangeError(`event of undeclared thread index ${thread}`);
      const carriesStack =
        op !== OP_REALLOC_DONE && (op !== OP_FREE || (flags & PF_FREE_STACKS) !== 0);
      let stack = carriesStack ? threadStack[thread]! : 0;
      if (tag & EVT_STACK) {
        stack = varint53(b, stP, stEnd);
        stP = rp;
      }
      if (carriesStack) threadStack[thread] = stack;
      // The fields after the common part, in the order of native/format/fields.h (its
      // FIELD_*_OPS and _FLAG; test/integration/format.test.ts checks the order against the table).
      let ptr = 0;
      let oldPtr = 0;
      let size = 0;
      let count = 1;
      let align = 0;
      let duration = NaN;
      let weight = NaN;
      const bit = 1 << op;
      if (FIELD_COUNT_OPS & bit) {
        count = varint(b, numP, numEnd);
        numP = rp;
      }
      if (FIELD_ALIGN_OPS & bit) {
        align = varint(b, numP, numEnd);
        numP = rp;
      }
      if (FIELD_SIZE_OPS & bit) {
        size = varint(b, numP, numEnd);
        numP = rp;
      }
      const bytes = count * size;
      const ends = (OPS_ENDING & bit) !== 0;
      const begins = (OPS_BEGINNING & bit) !== 0;
      if (FIELD_OLD_OPS & bit) {
        oldPtr = resolveRef(s, varint53(b, adP, adEnd));
        adP = rp;
        // A block that ends and none begins (free): it ends here, before the fields after it.
        if (!begins && oldPtr !== 0) endBlock(s, oldPtr);
      }
      if (FIELD_PTR_OPS & bit) {
        const v = varint53(b, adP, adEnd);
        adP = rp;
        if (ends) {
          // A failed call (new block 0 for a size > 0) keeps the old block.
          const failed =
            bytes !== 0 &&
            (v <= 0x7fffffff ? (v & 1) === 1 : v % 2 === 1) &&
            oldPtr + unzigzag((v - 1) / 2) === 0;
          if (!failed && oldPtr !== 0) endBlock(s, oldPtr);
        }
        ptr =
          OPS_ALIGNED & bit ? newBlock(s, v, NO_CLASS_BYTES, size) : newBlock(s, v, bytes, bytes);
      }
      if (FIELD_DURATION_OPS & bit && (flags & FIELD_DURATION_FLAG) === FIELD_DURATION_FLAG) {
        duration = varint(b, numP, numEnd);
        numP = rp;
      }
      if (FIELD_WEIGHT_OPS & bit && (flags & FIELD_WEIGHT_FLAG) === FIELD_WEIGHT_FLAG) {
        weight = varint(b, numP, numEnd);
        numP = rp;
      }
      if (ends && !begins) {
        // free: the event's block is the one it ended
        ptr = oldPtr;
        oldPtr = 0;
      }
      oOp[n] = op;
      oSplit[n] = tag & EVT_SPLIT ? 1 : 0;
      oTime[n] = time;
      oTid[n] = tid;
      oStack[n] = stack;
      oPtr[n] = ptr;
      oOld[n] = oldPtr;
      oSize[n] = size;
      oCount[n] = count;
      oAlign[n] = align;
      oDur[n] = duration;
      oWeight[n] = weight;
      n++;
    }
  } finally {
    out.length = n;
    cs.tag.pos = tp;
    cs.time.pos = timeP;
    cs.stack.pos = stP;
    cs.num.pos = numP;
    cs.addr.pos = adP;
    s.time = time;
    s.thread = thread;
  }
}
