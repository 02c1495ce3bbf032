/**
 * The agent's frame decoder on its own: the layout of native/frames.h, and what it does with
 * bytes that break it. Random and mutated frames (a seeded generator, so a failure replays)
 * never crash the decoder: each either decodes or ends in a FrameError.
 */
import { describe, expect, it } from 'vitest';

import { FrameError, FrameReader, decodeFrame, MAX_FRAME_BYTES } from '../../src/agent/frames.js';
import { alloc, header, hello, random, symbol } from '../helpers/frames.js';

describe('frame decoder', () => {
  it('decodes each frame of the layout', () => {
    const frames = new FrameReader().push(
      Buffer.concat([
        hello('svc'),
        symbol(0x1000n, 'main', '/bin/svc'),
        alloc(0xabc0n, 5000, [0x1000n, 0x2000n]),
      ]),
    );
    expect(frames.map((f) => f.type)).toEqual(['hello', 'symbol', 'alloc']);
    expect(frames[0]).toMatchObject({
      comm: 'svc',
      backend: 'tlsf',
      sampleBytes: 524288,
      version: 1,
    });
    expect(frames[1]).toMatchObject({ pc: 0x1000n, name: 'main', module: '/bin/svc' });
    expect(frames[2]).toMatchObject({ address: 0xabc0n, size: 5000, pcs: [0x1000n, 0x2000n] });
  });

  it("decodes STATS with the extras (ucm-hooks' mapped bytes, leak figures) and without", () => {
    const stats = (length: number, fields: number[]): Buffer => {
      const b = header(5, length);
      fields.forEach((v, i) => b.writeBigUInt64LE(BigInt(v), 8 + i * 8));
      return b;
    };
    const counters = [10, 9, 8, 7, 6, 0, ...new Array<number>(11).fill(0)];
    const [before, vmOnly, both] = new FrameReader().push(
      Buffer.concat([
        stats(144, counters), // a client of before the extras
        stats(192, [...counters, 1, 4096, 1024, 0, 0, 0]),
        stats(192, [...counters, 3, 4096, 1024, 2, 5, 5000]),
      ]),
    );
    expect(before).toMatchObject({ allocsTotal: 10, vm: undefined, leaks: undefined });
    expect(vmOnly).toMatchObject({
      vm: { mappedBytesTotal: 4096, unmappedBytesTotal: 1024 },
      leaks: undefined,
    });
    expect(both).toMatchObject({ leaks: { checksTotal: 2, leakedBlocks: 5, leakedBytes: 5000 } });
    expect(() => new FrameReader().push(stats(160, counters))).toThrow(FrameError);
  });

  it('joins frames split across reads at any byte', () => {
    const bytes = Buffer.concat([hello(), alloc(16n, 100, [1n, 2n, 3n])]);
    for (let cut = 1; cut < bytes.length; cut++) {
      const reader = new FrameReader();
      const frames = [...reader.push(bytes.subarray(0, cut)), ...reader.push(bytes.subarray(cut))];
      expect(frames.map((f) => f.type)).toEqual(['hello', 'alloc']);
    }
  });

  it('refuses lengths, types and fields outside the layout', () => {
    const bad: [string, Buffer][] = [
      ['length beyond the largest frame', header(2, 8).fill(0xff, 4, 8)],
      ['unknown type', header(99, 16)],
      [
        'depth beyond 64',
        (() => {
          const b = alloc(1n, 1, []);
          b.writeUInt32LE(65, 24);
          return b;
        })(),
      ],
      [
        'depth disagreeing with the length',
        (() => {
          const b = alloc(1n, 1, [1n]);
          b.writeUInt32LE(0, 24);
          return b;
        })(),
      ],
      [
        'symbol text longer than the frame',
        (() => {
          const b = symbol(1n, 'f', 'm');
          b.writeUInt16LE(4000, 24);
          return b;
        })(),
      ],
      ['hello of the wrong size', header(1, 64)],
      [
        'reserved bits',
        (() => {
          const b = header(3, 16);
          b.writeUInt16LE(1, 2);
          return b;
        })(),
      ],
    ];
    for (const [what, frame] of bad) {
      expect(() => new FrameReader().push(frame), what).toThrow(FrameError);
    }
  });

  it('never holds more than one frame of a stream that has not ended', () => {
    const reader = new FrameReader();
    expect(reader.push(alloc(1n, 1, new Array<bigint>(64).fill(1n)).subarray(0, 100))).toEqual([]);
    expect(() => reader.push(Buffer.alloc(MAX_FRAME_BYTES * 4, 0xff))).toThrow(FrameError);
  });

  it('survives 20,000 random and mutated frames: each decodes or ends in a FrameError', () => {
    const next = random(0x5eed);
    const valid = [
      hello(),
      alloc(0x1000n, 64, [1n, 2n]),
      symbol(5n, 'fn', 'lib'),
      header(3, 16),
      header(5, 144),
      header(5, 192),
    ];
    let decoded = 0;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      let bytes: Buffer;
      if (i % 2 === 0) {
        bytes = Buffer.alloc(next() % 300);
        for (let j = 0; j < bytes.length; j++) bytes[j] = next() & 0xff;
        if (bytes.length >= 8 && i % 4 === 0) bytes.writeUInt32LE(bytes.length & ~7, 4); // plausible lengths
      } else {
        bytes = Buffer.from(valid[next() % valid.length]!);
        for (let flips = 1 + (next() % 4); flips > 0; flips--)
          bytes[next() % bytes.length] = next() & 0xff;
      }
      try {
        new FrameReader().push(bytes);
        decoded++;
      } catch (error) {
        expect(error).toBeInstanceOf(FrameError);
        refused++;
      }
      try {
        if (bytes.length >= 8) decodeFrame(bytes);
      } catch (error) {
        expect(error).toBeInstanceOf(FrameError);
      }
    }
    expect(decoded + refused).toBe(20_000);
    expect(refused).toBeGreaterThan(1000);
  });
});
