// The TypeScript API refuses wrong arguments at the call with a TypeError or RangeError naming
// the argument (before, NaN, fractions and strings reached the addon or the environment).
import { afterEach, describe, expect, it } from 'vitest';

import { TlsfHeap, env } from '../../src/index.js';

type Call = (...args: unknown[]) => unknown;

describe('env checks its options', () => {
  it.each([
    [
      { initialPoolSize: Number.NaN },
      RangeError,
      /options.initialPoolSize must be an integer >= 0, got NaN/,
    ],
    [{ initialPoolSize: -1 }, RangeError, /options.initialPoolSize must be an integer/],
    [{ additionalPoolSize: 1.5 }, RangeError, /options.additionalPoolSize must be an integer/],
    [
      { initialPoolSize: '64\0M' },
      TypeError,
      /options.initialPoolSize must be a string without NUL bytes/,
    ],
    [{ initialPoolSize: true }, TypeError, /options.initialPoolSize must be a size/],
    [{ prefault: 'yes' }, TypeError, /options.prefault must be true or false, got 'yes'/],
    [{ cache: 65001 }, RangeError, /options.cache must be an integer from 0 to 65000, got 65001/],
    [{ cache: 1.5 }, RangeError, /options.cache must be an integer from 0 to 65000/],
    [{ logLevel: 'loud' }, TypeError, /options.logLevel must be one of error, warn/],
    [7, TypeError, /env\(options\): options must be an object, got 7/],
  ] as [unknown, typeof TypeError, RegExp][])('%j', (options, Kind, message) => {
    expect(() => (env as unknown as Call)(options)).toThrow(Kind);
    expect(() => (env as unknown as Call)(options)).toThrow(message);
  });

  it('valid options still give the variables', () => {
    expect(env({ initialPoolSize: '64M', cache: 0, prefault: true })).toEqual({
      INITIAL_MEMPOOL_SIZE: '64M',
      HEAPHOOK_TLSF_PREFAULT: '1',
      HEAPHOOK_TLSF_CACHE: '0',
    });
  });
});

describe('TlsfHeap checks its arguments', () => {
  let heap: TlsfHeap | undefined;
  afterEach(() => heap?.destroy());

  it('constructor', () => {
    const make = (arg: unknown) => () => new TlsfHeap(arg as number);
    expect(make(Number.NaN)).toThrow(
      /new TlsfHeap\(sizeOrOptions\): size must be an integer > 0, got NaN/,
    );
    expect(make(-5)).toThrow(RangeError);
    expect(make({ initialPoolSize: 'big' })).toThrow(
      /options.initialPoolSize must be an integer >= 0, got 'big'/,
    );
    expect(make('1M')).toThrow(TypeError);
  });

  it('methods', () => {
    heap = new TlsfHeap(1 << 20);
    const h = heap as unknown as Record<string, Call>;
    const call =
      (name: string, ...args: unknown[]) =>
      () =>
        h[name]!.call(heap, ...args);
    expect(call('alloc', -1)).toThrow(/alloc\(size, align\): size must be an integer >= 0, got -1/);
    expect(call('alloc', '10')).toThrow(TypeError);
    expect(call('alloc', 10, 3)).toThrow(/align must be a power of two/);
    expect(call('free', Number.NaN)).toThrow(
      /free\(offset\): offset must be an integer >= 0, got NaN/,
    );
    expect(call('realloc', 0, 1.5)).toThrow(/realloc\(offset, size\): size must be an integer/);
    expect(call('usableSize', undefined)).toThrow(TypeError);
    const a = heap.alloc(64)!;
    expect(call('fill', a, 300)).toThrow(
      /fill\(offset, byte, length\): byte must be an integer from 0 to 255, got 300/,
    );
    expect(call('verify', a, 1, -2)).toThrow(RangeError);
    heap.fill(a, 7);
    expect(heap.verify(a, 7)).toBe(true);
  });
});
