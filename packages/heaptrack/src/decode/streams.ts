/**
 * A block payload's ten streams (six before version 4; FORMAT.md, "Blocks") and a read position
 * in each, for the records TypeScript decodes itself: the declarations (declarations.ts) and the
 * zstd block's length prefix. The events are decoded in C only (native/analyze/, through
 * replay.ts).
 */
import {
  MAX_VARINT_BYTES,
  STREAM_COUNT,
  STREAM_COUNT_SHARED_ADDR,
  STREAM_NAMES,
} from './format.generated.js';

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

  /** A varint (FORMAT.md: at most MAX_VARINT_BYTES bytes), as a double. */
  varint(): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < MAX_VARINT_BYTES; i++) {
      if (this.pos >= this.end) throw new RangeError('record runs past the end of its block');
      const x = this.buf[this.pos++]!;
      result += (x & 0x7f) * mul;
      if (x < 0x80) return result;
      mul *= 128;
    }
    throw new RangeError('varint longer than 10 bytes');
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

/**
 * The streams of a block (FORMAT.md, "Blocks"), by name, and how many the block stored: a block
 * of STREAM_COUNT_SHARED_ADDR (versions 1 to 3) keeps its old addresses in `addr` and its
 * varints whole, and the streams it lacks (`old` and the `_more` streams) are empty here.
 */
type StreamName = (typeof STREAM_NAMES)[number];
export type Streams = Record<StreamName, Cursor> & { readonly count: number };

export function splitStreams(payload: Buffer): Streams {
  const head = new Cursor(payload, 0, payload.length);
  const n = head.varint();
  if (n !== STREAM_COUNT && n !== STREAM_COUNT_SHARED_ADDR) {
    throw new RangeError(
      `block of ${n} streams (expected ${STREAM_COUNT}, or ${STREAM_COUNT_SHARED_ADDR} before version 4)`,
    );
  }
  const stored = STREAM_NAMES.slice(0, n);
  const lengths = stored.map(() => head.varint());
  let at = head.pos;
  const out: Partial<Record<StreamName, Cursor>> = {};
  stored.forEach((name, i) => {
    const len = lengths[i]!;
    if (at + len > payload.length) throw new RangeError('stream lengths exceed the block');
    out[name] = new Cursor(payload, at, at + len);
    at += len;
  });
  if (at !== payload.length) throw new RangeError('bytes after the last stream');
  for (const name of STREAM_NAMES.slice(n)) out[name] = new Cursor(payload, at, at);
  return { ...(out as Record<StreamName, Cursor>), count: n };
}

export function unzigzag(z: number): number {
  if (z <= 0x7fffffff) return (z >>> 1) ^ -(z & 1);
  return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
}
