/**
 * The fuzz corpus of the log readers, generated at test time from real logs (never committed):
 * truncations, bit flips, flips with the block's CRC-32 recomputed (so the damage reaches the
 * decompressor and the record decoder), hand-made headers and compression bombs. Deterministic:
 * the same sources and seed give the same files.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { constants, crc32, deflateRawSync } from 'node:zlib';

export type CorpusKind = 'truncation' | 'bitflip' | 'flip-crc' | 'header' | 'bomb';

export interface CorpusEntry {
  readonly name: string;
  readonly path: string;
  readonly kind: CorpusKind;
}

/** A real log the corpus is made from, and the codec of its blocks. */
export interface CorpusSource {
  readonly codec: 'zstd' | 'deflate' | 'none';
  readonly bytes: Buffer;
}

const HEADER = 16;
const DEFLATED = 0x80000000;
const ZSTD = 0x40000000;

/** Random numbers in [0, 1) from a seed (SHA-256 of seed and counter): the same every run. */
export function prng(seed: number): () => number {
  let n = 0;
  return () => createHash('sha256').update(`${seed}:${n++}`).digest().readUInt32LE(0) / 2 ** 32;
}

export interface BlockSpan {
  readonly offset: number;
  readonly flags: number;
  readonly length: number;
}

/** The blocks of a well-formed log (FORMAT.md, "Blocks"). */
export function blocksOf(log: Buffer): BlockSpan[] {
  const out: BlockSpan[] = [];
  for (let at = HEADER; at + 8 <= log.length;) {
    const word = log.readUInt32LE(at);
    const length = word & 0x3fffffff;
    out.push({ offset: at, flags: word & (DEFLATED | ZSTD), length });
    at += 8 + length;
  }
  return out;
}

export function varint(value: number): Buffer {
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

/** A block: its length word (with the codec flags), its CRC-32, then the stored bytes. */
export function block(flags: number, stored: Buffer, crc = crc32(stored)): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32LE((stored.length | flags) >>> 0, 0);
  head.writeUInt32LE(crc >>> 0, 4);
  return Buffer.concat([head, stored]);
}

export function fileHeader(version = 2): Buffer {
  const h = Buffer.alloc(HEADER);
  h.write('HHEAPLOG', 0, 'latin1');
  h[8] = version;
  return h;
}

/** `count` zstd RLE blocks of 128 KiB of zeros (4 bytes each): 32,768 bytes out per byte in. */
export function zstdRleBlocks(count: number, lastEndsFrame: boolean): Buffer {
  const out = Buffer.alloc(count * 4);
  for (let i = 0; i < count; i++) {
    const last = lastEndsFrame && i === count - 1 ? 1 : 0;
    const h = (131072 << 3) | (1 << 1) | last; // Block_Size, RLE, Last_Block
    out.writeUIntLE(h, i * 4, 3);
    out[i * 4 + 3] = 0;
  }
  return out;
}

/** A zstd frame header without content size, with window 2^windowLog. */
export function zstdFrameHeader(windowLog: number): Buffer {
  return Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (windowLog - 10) << 3]);
}

/** Raw deflate of `mib` MiB of zeros, made from one sync-flushed MiB repeated (fast). */
export function deflateBomb(mib: number): Buffer {
  const one = deflateRawSync(Buffer.alloc(1 << 20), {
    level: 9,
    finishFlush: constants.Z_SYNC_FLUSH,
  });
  return Buffer.concat([...Array<Buffer>(mib).fill(one), Buffer.from([0x03, 0x00])]);
}

/** A zstd block of the log's stream: <raw length varint> <zstd bytes>. */
function zstdBlock(raw: number, bytes: Buffer): Buffer {
  return block(ZSTD, Buffer.concat([varint(raw), bytes]));
}

/** The hand-made files: headers and blocks a writer never produces. */
function handMade(): [string, Buffer][] {
  const h = fileHeader();
  const plain = (stored: Buffer): Buffer => Buffer.concat([h, block(0, stored)]);
  const streams = (n: number, lengths: number[], body: Buffer): Buffer =>
    plain(Buffer.concat([varint(n), ...lengths.map(varint), body]));
  const reserved = Buffer.from(h);
  reserved[12] = 7;
  return [
    ['empty', Buffer.alloc(0)],
    ['magic-only', Buffer.from('HHEAPLOG')],
    ['header-only', h],
    ['version-0', fileHeader(0)],
    ['version-3', fileHeader(3)],
    ['version-255', fileHeader(255)],
    ['reserved-bytes', reserved],
    ['not-a-log', Buffer.from('#!/bin/sh\necho this is not a heaplog\n')],
    ['block-length-0', Buffer.concat([h, Buffer.alloc(8)])],
    ['block-length-max', Buffer.concat([h, Buffer.from([0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0])])],
    ['block-both-codecs', Buffer.concat([h, block(DEFLATED | ZSTD, Buffer.from([1, 2, 3]))])],
    ['plain-64MiB-claim', Buffer.concat([h, Buffer.from([0, 0, 0, 4, 0, 0, 0, 0]), h])],
    ['seven-streams', streams(7, [0, 0, 0, 0, 0, 0, 0], Buffer.alloc(0))],
    ['streams-overrun', streams(6, [100, 0, 0, 0, 0, 0], Buffer.from([0x80]))],
    ['unknown-tag', streams(6, [1, 0, 0, 0, 0, 0], Buffer.from([0x7f]))],
    ['event-without-process', streams(6, [1, 1, 0, 1, 1, 0], Buffer.from([0x80, 2, 8, 3]))],
    // A thread index of 16 M: readers keep tables by thread index.
    [
      'thread-index-16M',
      streams(
        6,
        [2, 1, 4, 1, 1, 5],
        Buffer.from([0x03, 0x90, 0, 0xff, 0xff, 0xff, 7, 16, 1, 0xff, 0xff, 0xff, 7, 1]),
      ),
    ],
    ['varint-11-bytes', streams(6, [0, 0, 0, 0, 0, 11], Buffer.alloc(11, 0xff))],
    ['zstd-raw-varint-11-bytes', Buffer.concat([h, block(ZSTD, Buffer.alloc(11, 0xff))])],
    ['zstd-not-a-frame', Buffer.concat([h, zstdBlock(100, Buffer.from('not zstd at all'))])],
    ['zstd-window-2GiB', Buffer.concat([h, zstdBlock(100, zstdFrameHeader(31))])],
    [
      'zstd-reserved-block',
      Buffer.concat([
        h,
        zstdBlock(100, Buffer.concat([zstdFrameHeader(19), Buffer.from([6, 0, 0])])),
      ]),
    ],
    ['deflate-garbage', Buffer.concat([h, block(DEFLATED, Buffer.from([0xff, 0xff, 0xff, 0xff]))])],
  ];
}

/** zstd bombs: a frame of 1 GiB of zeros in 33 KB, claimed honestly or as a small block. */
function bombs(sources: readonly CorpusSource[]): [string, Buffer][] {
  const h = fileHeader();
  const rle = zstdRleBlocks(8192, false);
  const frame = Buffer.concat([zstdFrameHeader(17), rle]);
  const out: [string, Buffer][] = [
    ['zstd-bomb-1GiB-claimed', Buffer.concat([h, zstdBlock(8192 * 131072, frame)])],
    ['zstd-bomb-1GiB-in-a-small-block', Buffer.concat([h, zstdBlock(1000, frame)])],
    ['deflate-bomb-270MiB', Buffer.concat([h, block(DEFLATED, deflateBomb(270))])],
  ];
  // After a real log: its valid part comes first, then the bomb continues its stream.
  for (const s of sources) {
    if (s.codec === 'zstd')
      out.push(['zstd-bomb-after-a-log', Buffer.concat([s.bytes, zstdBlock(1000, rle)])]);
    if (s.codec === 'deflate')
      out.push([
        'deflate-bomb-after-a-log',
        Buffer.concat([s.bytes, block(DEFLATED, deflateBomb(64))]),
      ]);
  }
  return out;
}

/** Damage to a real log: truncations, flips, flips behind a recomputed CRC. */
function damaged(s: CorpusSource, random: () => number): [string, CorpusKind, Buffer][] {
  const out: [string, CorpusKind, Buffer][] = [];
  const log = s.bytes;
  const at = (lo: number, hi: number): number => lo + Math.floor(random() * (hi - lo));
  const cuts = [0, 7, 16, 20, 24, log.length - 1, at(24, log.length), at(24, log.length)];
  for (const n of cuts) out.push([`${s.codec}-cut-${n}`, 'truncation', log.subarray(0, n)]);
  for (let i = 0; i < 5; i++) {
    const copy = Buffer.from(log);
    const p = at(0, log.length);
    copy[p] = copy[p]! ^ (1 << at(0, 8));
    out.push([`${s.codec}-flip-${i}-at-${p}`, 'bitflip', copy]);
  }
  const blocks = blocksOf(log);
  for (let i = 0; i < 8; i++) {
    const b = blocks[at(0, blocks.length)]!;
    const copy = Buffer.from(log);
    const from = b.offset + 8;
    // Every other flip in the first bytes: the stream table, the zstd length, the frame header.
    const p =
      i % 2 === 0 ? at(from, Math.min(from + 24, from + b.length)) : at(from, from + b.length);
    copy[p] = copy[p]! ^ (1 << at(0, 8));
    copy.writeUInt32LE(crc32(copy.subarray(from, from + b.length)), b.offset + 4);
    out.push([`${s.codec}-flip-crc-${i}-at-${p}`, 'flip-crc', copy]);
  }
  return out;
}

/** Writes the corpus into `dir` and lists it. */
export function generateCorpus(
  sources: readonly CorpusSource[],
  dir: string,
  seed = 22,
): CorpusEntry[] {
  const random = prng(seed);
  const files: [string, CorpusKind, Buffer][] = [
    ...sources.flatMap((s) => damaged(s, random)),
    ...handMade().map(([n, b]): [string, CorpusKind, Buffer] => [n, 'header', b]),
    ...bombs(sources).map(([n, b]): [string, CorpusKind, Buffer] => [n, 'bomb', b]),
  ];
  return files.map(([name, kind, bytes]) => {
    const path = join(dir, `${name}.log`);
    writeFileSync(path, bytes);
    return { name, path, kind };
  });
}
