/**
 * The frames a process sends to the agent (native/frames.h is the one definition of their
 * layout; this decoder follows it field by field). Every byte is untrusted: a frame whose
 * length, type or fields do not fit the layout ends the connection with a FrameError, and
 * nothing in a frame is ever used as a path, a size to allocate or an index without a bound.
 */

export const AGENT_PROTOCOL_VERSION = 1;
export const MAX_FRAME_BYTES = 4096;
export const MAX_DEPTH = 64;
const HEADER_BYTES = 8;
const COMM_BYTES = 16;
const BACKEND_BYTES = 32;

export const FrameType = {
  hello: 1,
  alloc: 2,
  free: 3,
  symbol: 4,
  stats: 5,
} as const;

export interface HelloFrame {
  readonly type: 'hello';
  readonly version: number;
  readonly sampleBytes: number;
  readonly comm: string;
  readonly backend: string;
}
export interface AllocFrame {
  readonly type: 'alloc';
  readonly address: bigint;
  readonly size: number;
  readonly pcs: readonly bigint[];
}
export interface FreeFrame {
  readonly type: 'free';
  readonly address: bigint;
}
export interface SymbolFrame {
  readonly type: 'symbol';
  readonly pc: bigint;
  readonly functionStart: bigint;
  readonly name: string;
  readonly module: string;
}
/** The allocator's figures (heaphook_stats), when the backend keeps them. */
export interface BackendStats {
  readonly poolBytes: number;
  readonly usedBytes: number;
  readonly freeBytes: number;
  readonly usedBlocks: number;
  readonly freeBlocks: number;
  readonly largestFreeBlock: number;
  readonly mmappedBytes: number;
  readonly mmappedBlocks: number;
  readonly growthCount: number;
  readonly peakUsedBytes: number;
  readonly largestRequest: number;
}
/** ucm-hooks' VM events, counted by the client since it started (when ucm-hooks is loaded). */
export interface VmFigures {
  readonly mappedBytesTotal: number;
  readonly unmappedBytesTotal: number;
}
/** heaptrack's leak checking (when it is on): checks so far, the last one's leaks. */
export interface LeakFigures {
  readonly checksTotal: number;
  readonly leakedBlocks: number;
  readonly leakedBytes: number;
}
export interface StatsFrame {
  readonly type: 'stats';
  readonly allocsTotal: number;
  readonly freesTotal: number;
  readonly samplesTotal: number;
  readonly droppedSamplesTotal: number;
  readonly reconnectsTotal: number;
  readonly backend: BackendStats | undefined;
  readonly vm: VmFigures | undefined;
  readonly leaks: LeakFigures | undefined;
}
export type Frame = HelloFrame | AllocFrame | FreeFrame | SymbolFrame | StatsFrame;

/** A frame that breaks the layout: the agent closes the connection and counts it. */
export class FrameError extends Error {
  override readonly name = 'FrameError';
}

const HELLO_BYTES = HEADER_BYTES + 16 + COMM_BYTES + BACKEND_BYTES;
const ALLOC_BYTES = HEADER_BYTES + 24;
const FREE_BYTES = HEADER_BYTES + 8;
const SYMBOL_BYTES = HEADER_BYTES + 24;
/* A client of before the extras sends the first 17 fields only (HH_AGENT_STATS_V1_BYTES). */
const STATS_V1_BYTES = HEADER_BYTES + 17 * 8;
const STATS_BYTES = HEADER_BYTES + 23 * 8;
const EXTRA_VM = 1;
const EXTRA_LEAKS = 2;

/** A C string field: up to the first NUL, printable ASCII only (anything else becomes '?'). */
function cString(buf: Buffer, start: number, bytes: number): string {
  let end = start;
  while (end < start + bytes && buf[end] !== 0) end++;
  return safeText(buf.subarray(start, end));
}

function safeText(bytes: Buffer): string {
  let out = '';
  for (const b of bytes) out += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '?';
  return out;
}

/** A counter or size: exact up to 2^53, which no real figure reaches; beyond, saturated. */
function u64(buf: Buffer, at: number): number {
  const v = buf.readBigUInt64LE(at);
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
}

function expectLength(type: string, length: number, expected: number): void {
  if (length !== expected) {
    throw new FrameError(`${type} frame of ${length} bytes (its layout has ${expected})`);
  }
}

/** Decodes one whole frame (header included); throws FrameError when it breaks the layout. */
export function decodeFrame(frame: Buffer): Frame {
  if (frame.length < HEADER_BYTES) throw new FrameError('frame shorter than its header');
  const type = frame.readUInt16LE(0);
  const length = frame.readUInt32LE(4);
  if (length !== frame.length) throw new FrameError('frame length differs from its header');
  if (frame.readUInt16LE(2) !== 0) throw new FrameError('reserved header bits set');
  switch (type) {
    case FrameType.hello: {
      expectLength('HELLO', length, HELLO_BYTES);
      return {
        type: 'hello',
        version: frame.readUInt32LE(8),
        sampleBytes: u64(frame, 16),
        comm: cString(frame, 24, COMM_BYTES),
        backend: cString(frame, 24 + COMM_BYTES, BACKEND_BYTES),
      };
    }
    case FrameType.alloc: {
      if (length < ALLOC_BYTES) throw new FrameError('ALLOC frame shorter than its fields');
      const depth = frame.readUInt32LE(24);
      if (depth > MAX_DEPTH)
        throw new FrameError(`ALLOC frame with ${depth} frames (at most ${MAX_DEPTH})`);
      expectLength('ALLOC', length, ALLOC_BYTES + depth * 8);
      const pcs: bigint[] = [];
      for (let i = 0; i < depth; i++) pcs.push(frame.readBigUInt64LE(ALLOC_BYTES + i * 8));
      return { type: 'alloc', address: frame.readBigUInt64LE(8), size: u64(frame, 16), pcs };
    }
    case FrameType.free:
      expectLength('FREE', length, FREE_BYTES);
      return { type: 'free', address: frame.readBigUInt64LE(8) };
    case FrameType.symbol: {
      if (length < SYMBOL_BYTES) throw new FrameError('SYMBOL frame shorter than its fields');
      const nameBytes = frame.readUInt16LE(24);
      const moduleBytes = frame.readUInt16LE(26);
      const text = SYMBOL_BYTES + nameBytes + moduleBytes;
      expectLength('SYMBOL', length, (text + 7) & ~7);
      return {
        type: 'symbol',
        pc: frame.readBigUInt64LE(8),
        functionStart: frame.readBigUInt64LE(16),
        name: safeText(frame.subarray(SYMBOL_BYTES, SYMBOL_BYTES + nameBytes)),
        module: safeText(frame.subarray(SYMBOL_BYTES + nameBytes, text)),
      };
    }
    case FrameType.stats: {
      if (length !== STATS_V1_BYTES) expectLength('STATS', length, STATS_BYTES);
      const f = (i: number): number => u64(frame, HEADER_BYTES + i * 8);
      const extras = length === STATS_BYTES ? f(17) : 0;
      return {
        type: 'stats',
        allocsTotal: f(0),
        freesTotal: f(1),
        samplesTotal: f(2),
        droppedSamplesTotal: f(3),
        reconnectsTotal: f(4),
        backend:
          f(5) === 0
            ? undefined
            : {
                poolBytes: f(6),
                usedBytes: f(7),
                freeBytes: f(8),
                usedBlocks: f(9),
                freeBlocks: f(10),
                largestFreeBlock: f(11),
                mmappedBytes: f(12),
                mmappedBlocks: f(13),
                growthCount: f(14),
                peakUsedBytes: f(15),
                largestRequest: f(16),
              },
        vm:
          (extras & EXTRA_VM) === 0
            ? undefined
            : { mappedBytesTotal: f(18), unmappedBytesTotal: f(19) },
        leaks:
          (extras & EXTRA_LEAKS) === 0
            ? undefined
            : { checksTotal: f(20), leakedBlocks: f(21), leakedBytes: f(22) },
      };
    }
    default:
      throw new FrameError(`unknown frame type ${type}`);
  }
}

/**
 * Cuts a byte stream into frames. Holds at most one partial frame (MAX_FRAME_BYTES), so a
 * process cannot make the agent buffer more than that per connection.
 */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);

  /** The whole frames that chunk completes, decoded; throws FrameError at the first bad one. */
  push(chunk: Buffer): Frame[] {
    let buf = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const frames: Frame[] = [];
    while (buf.length >= HEADER_BYTES) {
      const length = buf.readUInt32LE(4);
      if (length < HEADER_BYTES || length > MAX_FRAME_BYTES || length % 8 !== 0) {
        throw new FrameError(`frame length ${length} (a multiple of 8, 8 to ${MAX_FRAME_BYTES})`);
      }
      if (buf.length < length) break;
      frames.push(decodeFrame(buf.subarray(0, length)));
      buf = buf.subarray(length);
    }
    this.pending = Buffer.from(buf);
    return frames;
  }
}
