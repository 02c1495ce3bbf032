// Wrong arguments are refused at the call, with an error naming the argument: before, a
// callback that is not a function killed the process 100 ms later from the drain timer, and a
// mask that is not a number silently watched nothing.
import { describe, expect, it } from 'vitest';

import { MemoryEvent, env, testMemoryEvents, watchMemoryEvents } from '../../src/index.js';

const cb = () => {};
type Watch = (...args: unknown[]) => unknown;
const watch = watchMemoryEvents as unknown as Watch;

describe('watchMemoryEvents checks its arguments at the call', () => {
  it.each([
    [
      [MemoryEvent.MMAP, 'notafunction'],
      TypeError,
      /callback must be a function, got 'notafunction'/,
    ],
    [
      ['abc', cb],
      TypeError,
      /mask: unknown event name 'abc'; expected MemoryEvent bits or names of MMAP/,
    ],
    [[['MMAP', 'nope'], cb], TypeError, /unknown event name 'nope'/],
    [[[], cb], RangeError, /no event named/],
    [[Number.NaN, cb], RangeError, /mask must be an integer from 0 \(excluded\) to \d+, got NaN/],
    [[-1, cb], RangeError, /mask must be an integer/],
    [[1.5, cb], RangeError, /mask must be an integer/],
    [[0, cb], RangeError, /mask must be an integer from 0 \(excluded\)/],
    [[1 << 20, cb], RangeError, /mask has bits that are no event \(0x100000\)/],
    [[MemoryEvent.MMAP, cb, { intervalMs: -5 }], RangeError, /options.intervalMs must be a number/],
    [
      [MemoryEvent.MMAP, cb, { intervalMs: '10' }],
      TypeError,
      /options.intervalMs must be a number/,
    ],
    [[MemoryEvent.MMAP, cb, 'fast'], TypeError, /options must be an object, got 'fast'/],
  ] as [unknown[], typeof TypeError, RegExp][])('%j → %o', (args, Kind, message) => {
    expect(() => watch(...args)).toThrow(Kind);
    expect(() => watch(...args)).toThrow(message);
  });

  it('event names are accepted as well as bits', () => {
    const watcher = watchMemoryEvents(['VM_MAPPED', 'VM_UNMAPPED'], cb, { intervalMs: 10 });
    expect(watcher.mode).toBe('reloc');
    watcher.stop();
  });

  it('testMemoryEvents checks its mask the same way', () => {
    expect(() => (testMemoryEvents as unknown as Watch)('bogus')).toThrow(
      /testMemoryEvents\(mask\): mask: unknown event name 'bogus'/,
    );
  });
});

describe('env checks its options', () => {
  it.each([
    [{ events: 'yes' }, /options.events must be true or false, got 'yes'/],
    [{ logLevel: 'loud' }, /options.logLevel must be one of error, warn, info, debug, trace/],
    ['events', /options must be an object/],
  ])('%j', (options, message) => {
    expect(() => (env as unknown as Watch)(options)).toThrow(TypeError);
    expect(() => (env as unknown as Watch)(options)).toThrow(message);
  });
});
