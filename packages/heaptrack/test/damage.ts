/** Logs damaged on purpose, for the tests of what a reader does with the part before it. */
import { readFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';

/**
 * A plain log (HEAPHOOK_COMPRESS=none) damaged inside its first block of events: a byte in the
 * middle of its addr stream, the block given a valid CRC again, so that the record decoder (not
 * the block check) meets the damage. The damaged bytes, and the offset of the damaged block.
 */
export function damagedInsideBlock(log: string): { bytes: Buffer; offset: number } {
  const bytes = readFileSync(log);
  for (let at = 16; at + 8 <= bytes.length;) {
    const length = bytes.readUInt32LE(at) & 0x3fffffff;
    const payload = bytes.subarray(at + 8, at + 8 + length);
    if (length > 4096) {
      let p = 1; // varint 6
      const lengths: number[] = [];
      for (let i = 0; i < 6; i++) {
        let v = 0;
        let shift = 0;
        for (;;) {
          const x = payload[p++]!;
          v += (x & 0x7f) * 2 ** shift;
          shift += 7;
          if (x < 0x80) break;
        }
        lengths.push(v);
      }
      const addrStart = p + lengths[0]! + lengths[1]! + lengths[2]! + lengths[3]!;
      const target = addrStart + Math.floor(lengths[4]! / 2);
      // Eleven bytes with the continuation bit: whichever varint of the stream reaches them
      // runs past the longest a varint may be, so the decoder stops there whatever the log's
      // addresses were (two such bytes made a wrong reference that a log recorded at other
      // addresses could decode past).
      payload.fill(0xff, target, target + 11);
      bytes.writeUInt32LE(crc32(payload), at + 4);
      return { bytes, offset: at };
    }
    at += 8 + length;
  }
  throw new Error(`${log} has no block of events over 4 KiB to damage`);
}
