/**
 * The streaming heaplog reader. Reads the file block by block (each block is
 * length + CRC-32 + records), checks and decompresses each, so memory stays bounded by one
 * block whatever the log's size. Damage is reported as a LogFormatError naming the byte offset;
 * every block before it has been handed on already. The records in the blocks are decoded by
 * replay.ts and events.ts: the events in C (native/analyze/), the declarations in TypeScript
 * (declarations.ts).
 */
import { crc32, inflateRawSync } from 'node:zlib';

import { describeFileSystemError, HeaphookError } from '@heaphook/core';
import { Decompress as ZstdStream } from 'fzstd';

import { decodeRecord, DeclarationState } from './declarations.js';
import {
  BLOCK_DEFLATED,
  BLOCK_HEADER_SIZE,
  BLOCK_LENGTH,
  BLOCK_ZSTD,
  FILE_HEADER_SIZE,
  FORMAT_VERSION,
  FORMAT_VERSION_MIN,
  LOG_MAGIC,
  MAX_BLOCK_PAYLOAD,
  MAX_BLOCK_STORED,
  STREAM_NAMES,
  TAG_PROCESS,
} from './format.generated.js';
import { logInputError, openLogFile } from './input.js';
import type { LogRecord, ProcessRecord } from './records.js';
import { Cursor, splitStreams, type Streams } from './streams.js';
import { ZstdStreamGuard } from './zstdguard.js';
import { zstdProgram, ZstdPipe } from './zstdpipe.js';

/** Logs smaller than this go through fzstd (DecodeOptions.zstd 'auto'): in a fresh process
 * fzstd took 5 ms on a 641-byte log where starting the zstd program took 13 ms, but 22 ms on a
 * 55 KB log against the program's 12 ms (its code warms up). */
export const ZSTD_PROGRAM_MIN_BYTES = 16 * 1024;
/** Stored bytes read ahead of the block being decoded. */
const LOOKAHEAD = 1024 * 1024;

/** The message of a block that decompresses to more than it may. */
function moreThan(limit: number): string {
  return `it decompresses to more than the ${limit} bytes it may hold`;
}

/**
 * The CLI's exit status when the log is damaged or truncated (a LogFormatError): every command
 * that reads a log uses it, whether it still printed the valid part (report, dump) or refused
 * the log (recommend). 2 stays for usage errors, a path that is not a readable log among them.
 */
export const EXIT_DAMAGED_LOG = 3;

/**
 * A log that cannot be decoded past `offset`. A HeaphookError with the status EXIT_DAMAGED_LOG,
 * so a command that lets it through exits like every other error, in @heaphook/core's main().
 */
export class LogFormatError extends HeaphookError {
  constructor(
    readonly path: string,
    readonly offset: number,
    detail: string,
  ) {
    super(`${path}: ${detail} at byte offset ${offset}; everything before it was decoded`, {
      exitStatus: EXIT_DAMAGED_LOG,
    });
  }
}

export interface DecodeOptions {
  /** Bytes read from the file at a time (default 1 MiB). */
  readonly chunkSize?: number;
  /**
   * zstd blocks: 'auto' (default) decompresses them with the `zstd` program in a child process
   * when it is on PATH (Debian package zstd; much faster) and the log has at least
   * ZSTD_PROGRAM_MIN_BYTES, else with fzstd; 'program': with the program whenever it is on
   * PATH; 'js': always fzstd.
   */
  readonly zstd?: 'auto' | 'program' | 'js';
}

/** A block payload's six streams; a payload that does not split is damage at the block. */
export function blockStreams(path: string, offset: number, payload: Buffer): Streams {
  try {
    return splitStreams(payload);
  } catch (error) {
    throw new LogFormatError(path, offset, `corrupt block (${(error as Error).message})`);
  }
}

/** Every stream of a decoded block must be consumed exactly (FORMAT.md). */
export function expectStreamsConsumed(streams: Streams): void {
  for (const name of STREAM_NAMES) {
    if (streams[name].pos !== streams[name].end) {
      throw new RangeError(
        `${streams[name].end - streams[name].pos} bytes left in its ${name} stream`,
      );
    }
  }
}

/** Damage met by a record decoder: record `index` of the block at `offset` (0-based). */
export function undecodableRecord(
  path: string,
  offset: number,
  index: number,
  error: Error,
): LogFormatError {
  return new LogFormatError(
    path,
    offset,
    `undecodable record #${index} (${error.message}) in the block`,
  );
}

/**
 * A read of the log, its error made one line: at the first byte, the file cannot be read at
 * all (`/proc/self/mem`: EIO; a file that waits for data: EAGAIN), a LogInputError (exit 2);
 * later, the log is read up to there, as at any damage (a LogFormatError at that offset).
 */
async function readOrFail<T>(path: string, offset: number, read: Promise<T>): Promise<T> {
  try {
    return await read;
  } catch (error) {
    if (describeFileSystemError(error) === undefined) throw error;
    if (offset === 0) throw logInputError(path, error);
    const { code } = error as NodeJS.ErrnoException;
    throw new LogFormatError(path, offset, `the file cannot be read on (${code})`);
  }
}

/** One block of a heaplog, checked (CRC) and decompressed: its payload (FORMAT.md, "Blocks"). */
export interface LogPayload {
  /** File offset of the block's header. */
  readonly offset: number;
  readonly payload: Buffer;
}

/**
 * The blocks of a heaplog, one payload at a time, after the file header has been checked: the
 * part of decoding every reader shares (replay.ts's LogWalk then decodes the records: the
 * events in C, the declarations here). Memory is bounded by the look-ahead plus one chunk. At the
 * first damaged block (truncated, CRC mismatch, undecompressable) it throws a LogFormatError
 * naming the block's offset, after yielding every block before it.
 */
export async function* readLogPayloads(
  path: string,
  options: DecodeOptions = {},
): AsyncGenerator<LogPayload> {
  const chunkSize = options.chunkSize ?? 1024 * 1024;
  const file = await openLogFile(path);
  let pipe: ZstdPipe | undefined;
  let pipeFailed = false;
  try {
    let pending = Buffer.alloc(0);
    let pendingOffset = 0; // file offset of pending[0]
    let eof = false;
    const fill = async (need: number): Promise<boolean> => {
      while (pending.length < need && !eof) {
        const chunk = Buffer.allocUnsafe(Math.max(chunkSize, need - pending.length));
        const { bytesRead } = await readOrFail(
          path,
          pendingOffset + pending.length,
          file.read(chunk, 0, chunk.length, null),
        );
        if (bytesRead === 0) eof = true;
        else
          pending =
            pending.length === 0
              ? chunk.subarray(0, bytesRead)
              : Buffer.concat([pending, chunk.subarray(0, bytesRead)]);
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
    if (pending.subarray(0, LOG_MAGIC.length).toString('latin1') !== LOG_MAGIC) {
      throw new LogFormatError(
        path,
        0,
        `not a heaplog (the file does not begin with ${LOG_MAGIC})`,
      );
    }
    const version = pending.readUInt8(LOG_MAGIC.length);
    if (version < FORMAT_VERSION_MIN || version > FORMAT_VERSION) {
      throw new LogFormatError(
        path,
        LOG_MAGIC.length,
        `heaplog format version ${version} is not supported (this decoder reads versions ${FORMAT_VERSION_MIN} to ${FORMAT_VERSION}); update @heaphook/heaptrack`,
      );
    }
    consume(FILE_HEADER_SIZE);

    // Blocks are read ahead of decoding (up to LOOKAHEAD stored bytes) so that the zstd
    // program, when used, always has input past the block being waited for.
    interface Block {
      offset: number;
      kind: 'plain' | 'deflate' | 'zstd';
      stored: Buffer; // empty for zstd blocks given to the pipe
      raw: number; // zstd: the raw payload's length
      bytes: number;
    }
    // A small log decompresses in fzstd faster than a child process starts.
    const mode = options.zstd ?? 'auto';
    const useProgram =
      mode === 'program' || (mode === 'auto' && (await file.stat()).size >= ZSTD_PROGRAM_MIN_BYTES)
        ? zstdProgram()
        : undefined;
    const zstdGuard = new ZstdStreamGuard();
    const queue: Array<Block | LogFormatError> = [];
    let queued = 0;
    let done = false;
    const readBlock = async (): Promise<Block | LogFormatError | undefined> => {
      if (!(await fill(BLOCK_HEADER_SIZE))) {
        if (pending.length === 0) return undefined;
        return new LogFormatError(
          path,
          pendingOffset,
          `log truncated: ${pending.length} bytes of a block header`,
        );
      }
      const blockOffset = pendingOffset;
      const lengthWord = pending.readUInt32LE(0);
      const length = lengthWord & BLOCK_LENGTH;
      const crc = pending.readUInt32LE(4);
      const compressed = (lengthWord & (BLOCK_DEFLATED | BLOCK_ZSTD)) !== 0;
      if (length === 0 || length > (compressed ? MAX_BLOCK_STORED : MAX_BLOCK_PAYLOAD)) {
        return new LogFormatError(
          path,
          blockOffset,
          `corrupt block header (length ${length}; a block stores 1 to ${compressed ? MAX_BLOCK_STORED : MAX_BLOCK_PAYLOAD} bytes)`,
        );
      }
      if (!(await fill(BLOCK_HEADER_SIZE + length))) {
        return new LogFormatError(
          path,
          blockOffset,
          `log truncated: the block here announces ${length} bytes but only ${pending.length - BLOCK_HEADER_SIZE} follow`,
        );
      }
      const stored = pending.subarray(BLOCK_HEADER_SIZE, BLOCK_HEADER_SIZE + length);
      if (crc32(stored) !== crc) {
        return new LogFormatError(
          path,
          blockOffset,
          `corrupt block (CRC-32 mismatch over bytes ${blockOffset + BLOCK_HEADER_SIZE}..${blockOffset + BLOCK_HEADER_SIZE + length})`,
        );
      }
      consume(BLOCK_HEADER_SIZE + length);
      if ((lengthWord & BLOCK_DEFLATED) !== 0) {
        return { offset: blockOffset, kind: 'deflate', stored, raw: 0, bytes: length };
      }
      if ((lengthWord & BLOCK_ZSTD) === 0) {
        return { offset: blockOffset, kind: 'plain', stored, raw: 0, bytes: length };
      }
      // One zstd stream across the file, flushed at every block: <raw length> <zstd bytes>.
      const head = new Cursor(stored, 0, stored.length);
      let raw: number;
      try {
        raw = head.varint();
        if (raw === 0 || raw > MAX_BLOCK_PAYLOAD) {
          throw new RangeError(
            `it announces ${raw} bytes; a payload holds 1 to ${MAX_BLOCK_PAYLOAD}`,
          );
        }
        // Before any decompressor allocates for it (see ZstdStreamGuard).
        zstdGuard.check(stored.subarray(head.pos));
      } catch (error) {
        return new LogFormatError(
          path,
          blockOffset,
          `corrupt compressed block (${(error as Error).message})`,
        );
      }
      if (useProgram !== undefined && !pipeFailed) {
        pipe ??= new ZstdPipe(useProgram);
        pipe.write(stored.subarray(head.pos));
        return { offset: blockOffset, kind: 'zstd', stored: Buffer.alloc(0), raw, bytes: length };
      }
      return {
        offset: blockOffset,
        kind: 'zstd',
        stored: stored.subarray(head.pos),
        raw,
        bytes: length,
      };
    };

    let zstdStream: ZstdStream | undefined;
    let zstdChunks: Uint8Array[] = [];
    /** The zstd bytes of a block given to the pipe, read again from the file. */
    const zstdBytesAt = async (offset: number, length: number): Promise<Buffer> => {
      const buf = Buffer.allocUnsafe(length);
      const { bytesRead } = await readOrFail(
        path,
        offset,
        file.read(buf, 0, length, offset + BLOCK_HEADER_SIZE),
      );
      const head = new Cursor(buf, 0, bytesRead);
      head.varint();
      return buf.subarray(head.pos, bytesRead);
    };
    const zstdDone: Array<{ offset: number; length: number }> = []; // blocks the pipe gave
    let lastZstd: number | undefined; // offset and announced length of the last zstd block
    let lastZstdRaw = 0;
    let zstdProduced = 0;
    let zstdLimit = 0;
    /** Decompresses a block's zstd bytes; stops as soon as they give more than `limit` bytes. */
    const fzstd = (stored: Buffer, limit: number): Buffer => {
      if (zstdStream === undefined) {
        zstdStream = new ZstdStream();
        zstdStream.ondata = (chunk) => {
          zstdProduced += chunk.length;
          if (zstdProduced > zstdLimit) throw new RangeError(moreThan(zstdLimit));
          zstdChunks.push(chunk);
        };
      }
      zstdChunks = [];
      zstdProduced = 0;
      zstdLimit = limit;
      zstdStream.push(stored);
      // fzstd may hand out views of its window: copy them before the next push.
      return Buffer.concat(zstdChunks);
    };
    for (;;) {
      while (!done && (queue.length === 0 || queued < LOOKAHEAD)) {
        const next = await readBlock();
        if (next === undefined || next instanceof LogFormatError) {
          done = true;
          pipe?.end(); // zstd writes out everything before the end or the damage
          if (next !== undefined) queue.push(next);
          break;
        }
        queue.push(next);
        queued += next.bytes;
      }
      const block = queue.shift();
      if (block === undefined) {
        // The stream must end with the last block: more output means a block gave more than
        // it announced (the program's output is not split by block, so it is checked here).
        if (
          pipe !== undefined &&
          !pipeFailed &&
          lastZstd !== undefined &&
          (await pipe.producesMore())
        )
          throw new LogFormatError(
            path,
            lastZstd,
            `corrupt compressed block (${moreThan(lastZstdRaw)})`,
          );
        return;
      }
      if (block instanceof LogFormatError) throw block;
      queued -= block.bytes;
      const blockOffset = block.offset;
      if (block.kind === 'zstd') {
        lastZstd = blockOffset;
        lastZstdRaw = block.raw;
      }
      let payload = block.stored;
      try {
        if (block.kind === 'deflate') {
          try {
            payload = inflateRawSync(block.stored, { maxOutputLength: MAX_BLOCK_PAYLOAD });
          } catch (error) {
            const tooLarge = (error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE';
            throw tooLarge ? new RangeError(moreThan(MAX_BLOCK_PAYLOAD)) : error;
          }
        } else if (block.kind === 'zstd') {
          let stored = block.stored;
          if (pipe !== undefined && !pipeFailed) {
            try {
              payload = await pipe.read(block.raw);
              zstdDone.push({ offset: blockOffset, length: block.bytes });
              stored = Buffer.alloc(0);
            } catch {
              // The zstd program drops the output it holds when the stream ends unfinished
              // (the log of a running or crashed writer): go on with fzstd, first fed every
              // block the program decoded (the stream refers back to them).
              pipeFailed = true;
              pipe.close();
              for (const b of zstdDone.splice(0))
                fzstd(await zstdBytesAt(b.offset, b.length), MAX_BLOCK_PAYLOAD);
            }
          }
          if (pipeFailed && stored.length === 0)
            stored = await zstdBytesAt(blockOffset, block.bytes);
          if (stored.length > 0 || pipe === undefined) payload = fzstd(stored, block.raw);
          if (payload.length !== block.raw) {
            throw new RangeError(`${payload.length} bytes decompressed of ${block.raw}`);
          }
        }
      } catch (error) {
        throw new LogFormatError(
          path,
          blockOffset,
          `corrupt compressed block (${(error as Error).message})`,
        );
      }
      yield { offset: blockOffset, payload };
    }
  } finally {
    pipe?.close();
    await file.close();
  }
}

/**
 * The PROCESS record a log opens with (FORMAT.md: the first record of every log), or undefined
 * when it has none (damaged, empty). Reads the first block alone and decodes no event, so
 * `heaphook record` describes its logs without the log reader's addon (the arm64 package has
 * none).
 */
export async function readProcessRecord(
  path: string,
  options: DecodeOptions = {},
): Promise<ProcessRecord | undefined> {
  try {
    for await (const { offset, payload } of readLogPayloads(path, options)) {
      const streams = blockStreams(path, offset, payload);
      if (streams.tag.pos >= streams.tag.end || payload[streams.tag.pos] !== TAG_PROCESS) break;
      const out: LogRecord[] = [];
      decodeRecord(streams, new DeclarationState(), out);
      return out[0] as ProcessRecord;
    }
  } catch {
    // a damaged log: no process record to read
  }
  return undefined;
}
