/**
 * @heaphook/tlsf — the TLSF real-time allocator backend for heaphook.
 *
 *   import { libraryPath, env, TlsfHeap } from '@heaphook/tlsf';
 *   spawn(cmd, args, { env: { ...process.env, ...env({ initialPoolSize: '64M' }), LD_PRELOAD: libraryPath() } });
 *
 *   const heap = new TlsfHeap({ initialPoolSize: 1 << 20, additionalPoolSize: 1 << 20 });
 *   const a = heap.alloc(100);          // an offset, or null
 *   heap.free(a!);
 *   heap.stats().growthCount;
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  checkBoolean,
  checkChoice,
  checkNumber,
  checkOptions,
  checkString,
  nativeFile,
} from '@heaphook/core';

/** The package's folder. */
export const packageDir: string = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Absolute path of the preload library libheaphook_tlsf.so (built by `nx build tlsf`). */
export function libraryPath(): string {
  return nativeFile(packageDir, 'libheaphook_tlsf.so');
}

/** Absolute path of the addon (tlsf_addon.node). */
export function addonPath(): string {
  return nativeFile(packageDir, 'tlsf_addon.node');
}

/** A size in bytes, or a string the heaphook core parses: "100000000", "64M", "1GiB", "1.5G". */
export type Size = number | string;

/** Options of the preload library; each maps to one environment variable. */
export interface TlsfOptions {
  /** INITIAL_MEMPOOL_SIZE: bytes of the first pool (default 100 MB). */
  readonly initialPoolSize?: Size;
  /** ADDITIONAL_MEMPOOL_SIZE: first addition when the pool must grow (default 100 MB). */
  readonly additionalPoolSize?: Size;
  /** HEAPHOOK_TLSF_PREFAULT: touch the pool at start-up (and each addition) so no page faults later. */
  readonly prefault?: boolean;
  /** HEAPHOOK_TLSF_MLOCK: lock the pool in memory (needs RLIMIT_MEMLOCK). */
  readonly mlock?: boolean;
  /** HEAPHOOK_TLSF_CHECK: validate every free/realloc; stop on a double, interior or foreign free. */
  readonly check?: boolean;
  /** HEAPHOOK_TLSF_THREAD_HEAPS: one heap per thread (default true); false = one shared heap. */
  readonly threadHeaps?: boolean;
  /** HEAPHOOK_TLSF_CACHE: blocks kept per small size in each thread's cache (0..65000, default
   * 4096; 0 = none). */
  readonly cache?: number;
  /** HEAPHOOK_TLSF_CACHE_BYTES: bytes each thread's cache keeps at most (default 512K, at most
   * 64M), a number of bytes or a size such as '1M'. */
  readonly cacheBytes?: number | string;
  /** HEAPHOOK_TLSF_RELEASE: give pages back to the system when a heap has been nearly emptied
   * (default true; never with prefault, mlock or check). */
  readonly release?: boolean;
  /** HEAPHOOK_TLSF_TRIM_THRESHOLD: a free that leaves a free block this large gives its pages
   * back at once (glibc's M_TRIM_THRESHOLD; default off; refused with prefault or mlock), a
   * number of bytes or a size such as '1M'. */
  readonly trimThreshold?: number | string;
  /** HEAPHOOK_LOG_LEVEL: 'info' shows every pool growth. */
  readonly logLevel?: 'error' | 'warn' | 'info' | 'debug' | 'trace';
  /** HEAPHOOK_TLSF_ON_GROW: a growth beyond the first pool is named with its stack ('warn') or
   * stops the program ('abort'); default 'ignore'. */
  readonly onGrow?: 'ignore' | 'warn' | 'abort';
  /** HEAPHOOK_TLSF_STATS: count bytes in use, their peak and the largest request; print them at exit. */
  readonly stats?: boolean;
  /** HEAPHOOK_TLSF_COMPAT: 'tier4' for tier4/heaphook's defaults (one heap, one mutex ...). */
  readonly compat?: 'none' | 'tier4';
}

const ENV = 'env(options)';

function sizeValue(name: string, value: unknown): string {
  if (typeof value === 'number') return String(checkNumber(ENV, name, value));
  if (typeof value === 'string') return checkString(ENV, name, value);
  throw new TypeError(
    `${ENV}: ${name} must be a size (bytes, or a string such as '64M'), got ${typeof value}`,
  );
}

const flag = (name: string, value: unknown): string => (checkBoolean(ENV, name, value) ? '1' : '0');

/** The environment variables that configure libheaphook_tlsf.so (only the options given).
 * Wrong options throw at the call: TypeError or RangeError naming the option. */
export function env(options: TlsfOptions = {}): Record<string, string> {
  const o = checkOptions<TlsfOptions>(ENV, 'options', options);
  const out: Record<string, string> = {};
  if (o.initialPoolSize !== undefined) {
    out.INITIAL_MEMPOOL_SIZE = sizeValue('options.initialPoolSize', o.initialPoolSize);
  }
  if (o.additionalPoolSize !== undefined) {
    out.ADDITIONAL_MEMPOOL_SIZE = sizeValue('options.additionalPoolSize', o.additionalPoolSize);
  }
  const flags = {
    prefault: 'HEAPHOOK_TLSF_PREFAULT',
    mlock: 'HEAPHOOK_TLSF_MLOCK',
    check: 'HEAPHOOK_TLSF_CHECK',
    threadHeaps: 'HEAPHOOK_TLSF_THREAD_HEAPS',
    release: 'HEAPHOOK_TLSF_RELEASE',
    stats: 'HEAPHOOK_TLSF_STATS',
  } as const;
  for (const [key, variable] of Object.entries(flags) as [keyof typeof flags, string][]) {
    if (o[key] !== undefined) out[variable] = flag(`options.${key}`, o[key]);
  }
  if (o.cache !== undefined) {
    out.HEAPHOOK_TLSF_CACHE = String(checkNumber(ENV, 'options.cache', o.cache, { max: 65000 }));
  }
  if (o.cacheBytes !== undefined) {
    out.HEAPHOOK_TLSF_CACHE_BYTES = sizeValue('options.cacheBytes', o.cacheBytes);
  }
  if (o.trimThreshold !== undefined) {
    out.HEAPHOOK_TLSF_TRIM_THRESHOLD = sizeValue('options.trimThreshold', o.trimThreshold);
  }
  if (o.logLevel !== undefined) {
    out.HEAPHOOK_LOG_LEVEL = checkChoice(ENV, 'options.logLevel', o.logLevel, logLevels);
  }
  if (o.onGrow !== undefined) {
    out.HEAPHOOK_TLSF_ON_GROW = checkChoice(ENV, 'options.onGrow', o.onGrow, onGrowChoices);
  }
  if (o.compat !== undefined) {
    out.HEAPHOOK_TLSF_COMPAT = checkChoice(ENV, 'options.compat', o.compat, compatChoices);
  }
  return out;
}

const logLevels = ['error', 'warn', 'info', 'debug', 'trace'] as const;
const onGrowChoices = ['ignore', 'warn', 'abort'] as const;
const compatChoices = ['none', 'tier4'] as const;

/** Figures of an in-process heap. Byte counts are block footprints (heads included). */
export interface TlsfHeapStats {
  /** Bytes of all areas: the first pool plus every addition (what INITIAL/ADDITIONAL name). */
  readonly poolSize: number;
  /** Number of areas. */
  readonly areas: number;
  /** Bytes managed by TLSF (areas less alignment trimming). */
  readonly managedBytes: number;
  readonly used: number;
  readonly usedBlocks: number;
  readonly free: number;
  readonly freeBlocks: number;
  /** Usable bytes of the largest free block. */
  readonly largestFree: number;
  /** Highest `used` seen after an allocation. */
  readonly peakUsed: number;
  /** Bytes of per-area bookkeeping. */
  readonly overhead: number;
  /** How many areas were added after the first pool. */
  readonly growthCount: number;
  /** The size of each addition, in order (N, 2N, 4N ... within one growth). */
  readonly additions: readonly number[];
  /** replay(): the highest end (offset + size asked for) of any block it placed; 0 before. */
  readonly highWater: number;
}

/** Operation codes of TlsfHeap.replay (the first of each operation's 4 numbers). */
export const ReplayOp = {
  /** [ALLOC, slot, size, align]: slot = alloc(size, align). */
  ALLOC: 0,
  /** [FREE, slot, 0, 0]: free(slot). */
  FREE: 1,
  /** [REALLOC, slot, size, newSlot]: newSlot = realloc(slot, size), without copying; slot is emptied. */
  REALLOC: 2,
} as const;

/** One block of the heap, in address order (from blocks()). */
export interface TlsfBlock {
  readonly offset: number;
  /** Usable bytes. */
  readonly size: number;
  readonly used: boolean;
}

/** Options of an in-process heap. */
export interface TlsfHeapOptions {
  /** Bytes of the first pool (default 100 MB). */
  readonly initialPoolSize?: number;
  /** First addition when the heap must grow (default 100 MB; 0 = never grow). */
  readonly additionalPoolSize?: number;
  /** Address space reserved for all areas (default 64 GiB); growth beyond it fails. */
  readonly maxPoolSize?: number;
}

/** Error codes of free/realloc/usableSize/fill/verify on a bad offset. */
export type TlsfErrorCode = 'DOUBLE_FREE' | 'INTERIOR' | 'FOREIGN' | 'HEADER';

interface NativeHeap {
  alloc(size: number, align?: number): number | null;
  free(offset: number): void;
  realloc(offset: number, size: number): number | null;
  usableSize(offset: number): number;
  stats(): TlsfHeapStats;
  check(): boolean;
  blocks(): TlsfBlock[];
  fill(offset: number, byte: number, length?: number): void;
  verify(offset: number, byte: number, length?: number): boolean;
  destroy(): void;
  replay(ops: Float64Array, count: number): number;
}

interface NativeAddon {
  TlsfHeap: new (arg: number | TlsfHeapOptions) => NativeHeap;
  blockOverhead: number;
  poolOverhead: number;
  alignment: number;
}

let addon: NativeAddon | undefined;

/** Loads the addon (once). Throws with a hint when it has not been built. */
export function loadAddon(): NativeAddon {
  if (addon === undefined) {
    const path = addonPath();
    if (!existsSync(path)) {
      throw new Error(`${path} is not built: run \`npx nx build tlsf\``);
    }
    addon = createRequire(import.meta.url)(path) as NativeAddon;
  }
  return addon;
}

function checkBlockBytes(where: string, offset: unknown, byte: unknown, length: unknown): void {
  checkNumber(where, 'offset', offset);
  checkNumber(where, 'byte', byte, { max: 255 });
  if (length !== undefined) checkNumber(where, 'length', length);
}

/**
 * A TLSF heap inside this process, run by the same C code as libheaphook_tlsf.so, over memory
 * of its own. Addresses are offsets (numbers); an offset is aligned exactly as the memory it
 * names. `new TlsfHeap(size)` is one pool that never grows; `new TlsfHeap({ initialPoolSize,
 * additionalPoolSize })` grows like the preload library (N, 2N, 4N ... until a request fits).
 */
export class TlsfHeap {
  /** Bytes of bookkeeping in front of every used block (one word). */
  static get blockOverhead(): number {
    return loadAddon().blockOverhead;
  }
  /** Bytes of bookkeeping per area. */
  static get poolOverhead(): number {
    return loadAddon().poolOverhead;
  }
  /** Alignment of every alloc() without an explicit alignment. */
  static get alignment(): number {
    return loadAddon().alignment;
  }

  readonly #native: NativeHeap;

  constructor(sizeOrOptions: number | TlsfHeapOptions) {
    const where = 'new TlsfHeap(sizeOrOptions)';
    if (typeof sizeOrOptions === 'number') {
      checkNumber(where, 'size', sizeOrOptions, { min: 0, minExclusive: true });
    } else {
      const o = checkOptions<TlsfHeapOptions>(where, 'options', sizeOrOptions);
      for (const key of ['initialPoolSize', 'additionalPoolSize', 'maxPoolSize'] as const) {
        if (o[key] !== undefined) checkNumber(where, `options.${key}`, o[key]);
      }
    }
    this.#native = new (loadAddon().TlsfHeap)(sizeOrOptions);
  }

  /** Allocates size bytes (0 counts as 1) aligned to align (a power of two; default 16).
   * Returns the offset, or null when the heap cannot serve it (after growing, if it may). */
  alloc(size: number, align?: number): number | null {
    checkNumber('alloc(size, align)', 'size', size);
    if (align !== undefined) {
      checkNumber('alloc(size, align)', 'align', align, { min: 1 });
      if ((align & (align - 1)) !== 0 || align > 2 ** 30) {
        throw new RangeError(
          `alloc(size, align): align must be a power of two up to 2^30, got ${align}`,
        );
      }
    }
    return align === undefined ? this.#native.alloc(size) : this.#native.alloc(size, align);
  }
  /** Frees a block; throws (error.code: TlsfErrorCode) for a double, interior or foreign free. */
  free(offset: number): void {
    checkNumber('free(offset)', 'offset', offset);
    this.#native.free(offset);
  }
  /** Resizes in place when it can, else moves (keeping the block's alignment); null on failure
   * (the block is then unchanged). */
  realloc(offset: number, size: number): number | null {
    checkNumber('realloc(offset, size)', 'offset', offset);
    checkNumber('realloc(offset, size)', 'size', size);
    return this.#native.realloc(offset, size);
  }
  /** Usable bytes of a used block. */
  usableSize(offset: number): number {
    checkNumber('usableSize(offset)', 'offset', offset);
    return this.#native.usableSize(offset);
  }
  stats(): TlsfHeapStats {
    return this.#native.stats();
  }
  /** Full integrity walk (blocks, free lists, bitmaps, counters); throws on the first problem. */
  check(): true {
    this.#native.check();
    return true;
  }
  /** Every block in address order (areas in the order they were added, newest first). */
  blocks(): TlsfBlock[] {
    return this.#native.blocks();
  }
  /** Writes byte over a used block (its whole usable size unless length is given). */
  fill(offset: number, byte: number, length?: number): void {
    checkBlockBytes('fill(offset, byte, length)', offset, byte, length);
    this.#native.fill(offset, byte, length);
  }
  /** Whether a used block still holds byte (as written by fill). */
  verify(offset: number, byte: number, length?: number): boolean {
    checkBlockBytes('verify(offset, byte, length)', offset, byte, length);
    return this.#native.verify(offset, byte, length);
  }
  /**
   * Runs `count` operations from `ops`, 4 numbers each (see ReplayOp), on blocks named by slot
   * numbers instead of offsets: one call for many operations, for replaying traces. An
   * operation on an empty slot is skipped; an alloc into a used slot frees its block first.
   * Returns the index of the first operation the heap could not serve (after growing, if it
   * may) and stops there, or -1 when all were served.
   */
  replay(ops: Float64Array, count: number = ops.length / 4): number {
    return this.#native.replay(ops, count);
  }
  /** Releases the heap's memory now (otherwise at garbage collection). */
  destroy(): void {
    this.#native.destroy();
  }
}
