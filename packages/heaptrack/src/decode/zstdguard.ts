/**
 * Checks the structure of the log's zstd stream (RFC 8878) before a decompressor sees it,
 * without decompressing: frame headers, block headers and their sizes. It refuses a frame whose
 * window is larger than MAX_ZSTD_WINDOW, because both decompressors allocate the window up front
 * (fzstd up to 2 GiB, and it copies the whole window per block), and a reserved block type or
 * an oversized block. Bytes may arrive split anywhere; the state carries over.
 */
import { MAX_ZSTD_WINDOW } from './format.generated.js';

const FRAME_MAGIC = 0xfd2fb528;
const SKIPPABLE_MASK = 0xfffffff0;
const SKIPPABLE_MAGIC = 0x184d2a50;
/** RFC 8878, Block_Maximum_Size: no block decompresses to more. */
export const ZSTD_BLOCK_MAX = 128 * 1024;

type Phase = 'magic' | 'descriptor' | 'header' | 'block' | 'skip' | 'checksum' | 'skipSize';

export class ZstdStreamGuard {
  private phase: Phase = 'magic';
  private need = 4; // bytes to collect (magic, header fields) or skip (block content)
  private got: number[] = [];
  private skipping = 0;
  private descriptor = 0;
  private checksum = false;
  private blockMax = ZSTD_BLOCK_MAX;
  private lastBlock = false;

  /** Feeds the next bytes of the stream; throws a RangeError naming what is wrong. */
  check(bytes: Uint8Array): void {
    let i = 0;
    while (i < bytes.length) {
      if (this.skipping > 0) {
        const n = Math.min(this.skipping, bytes.length - i);
        this.skipping -= n;
        i += n;
        if (this.skipping === 0) this.afterSkip();
        continue;
      }
      this.got.push(bytes[i++]!);
      if (this.got.length === this.need) {
        const field = this.got;
        this.got = [];
        this.take(field);
      }
    }
  }

  private afterSkip(): void {
    if (this.phase === 'skip') this.expect('magic', 4);
    else this.endBlock();
  }

  private expect(phase: Phase, need: number): void {
    this.phase = phase;
    this.need = need;
  }

  private endBlock(): void {
    if (!this.lastBlock) this.expect('block', 3);
    else if (this.checksum) this.expect('checksum', 4);
    else this.expect('magic', 4);
  }

  private take(b: number[]): void {
    switch (this.phase) {
      case 'magic': {
        const magic = (b[0]! | (b[1]! << 8) | (b[2]! << 16) | (b[3]! << 24)) >>> 0;
        if (magic === FRAME_MAGIC) this.expect('descriptor', 1);
        else if ((magic & SKIPPABLE_MASK) >>> 0 === SKIPPABLE_MAGIC) this.expect('skipSize', 4);
        else throw new RangeError('not a zstd frame');
        return;
      }
      case 'skipSize': {
        this.phase = 'skip';
        this.skipping = (b[0]! | (b[1]! << 8) | (b[2]! << 16)) + b[3]! * 2 ** 24;
        if (this.skipping === 0) this.afterSkip();
        return;
      }
      case 'descriptor': {
        const d = b[0]!;
        if ((d & 0x08) !== 0) throw new RangeError('zstd frame header with the reserved bit set');
        if ((d & 0x03) !== 0) throw new RangeError('zstd frame with a dictionary (logs use none)');
        this.descriptor = d;
        this.checksum = (d & 0x04) !== 0;
        const single = (d & 0x20) !== 0;
        const fcsBytes = [single ? 1 : 0, 2, 4, 8][d >> 6]!;
        const length = (single ? 0 : 1) + fcsBytes;
        if (length === 0) this.frameWindow([]);
        else this.expect('header', length);
        return;
      }
      case 'header':
        this.frameWindow(b);
        return;
      case 'block': {
        const h = b[0]! | (b[1]! << 8) | (b[2]! << 16);
        this.lastBlock = (h & 1) === 1;
        const type = (h >> 1) & 3;
        const size = h >>> 3;
        if (type === 3) throw new RangeError('zstd block of the reserved type');
        if (size > this.blockMax) {
          throw new RangeError(`zstd block of ${size} bytes (at most ${this.blockMax})`);
        }
        const content = type === 1 ? 1 : size; // an RLE block stores its byte once
        if (content === 0) this.endBlock();
        else {
          this.phase = 'block';
          this.skipping = content;
        }
        return;
      }
      case 'checksum':
        this.expect('magic', 4);
        return;
      default:
        return;
    }
  }

  /** The frame's window (RFC 8878, 3.1.1.1.2), from the header fields after the descriptor. */
  private frameWindow(fields: number[]): void {
    const d = this.descriptor;
    let window: number;
    if ((d & 0x20) === 0) {
      const w = fields[0]!;
      const base = 2 ** (10 + (w >> 3));
      window = base + (base / 8) * (w & 7);
    } else {
      // Single segment: the window is the frame's content size.
      let size = 0;
      for (let k = fields.length - 1; k >= 0; k--) size = size * 256 + fields[k]!;
      window = fields.length === 2 ? size + 256 : size;
    }
    if (window > MAX_ZSTD_WINDOW) {
      throw new RangeError(
        `zstd frame with a ${window}-byte window (a heaplog's is at most ${MAX_ZSTD_WINDOW})`,
      );
    }
    this.blockMax = Math.min(ZSTD_BLOCK_MAX, window);
    this.lastBlock = false;
    this.expect('block', 3);
  }
}
