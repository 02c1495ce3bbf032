// attach() checks its options before anything native runs: a NUL byte in a path used to be
// cut by the C side (attach({ path: 'a\0b' }) wrote the log 'a').
import { describe, expect, it } from 'vitest';

import { attach } from '../../src/index.js';

type Attach = (...args: unknown[]) => unknown;

describe('attach checks its options at the call', () => {
  it.each([
    [
      { path: 'a\0b' },
      /attach\(options\): options.path must be a string without NUL bytes, got 'a\\x00b'/,
    ],
    [{ outputDir: 'traces\0x' }, /options.outputDir must be a string without NUL bytes/],
    [{ path: 42 }, /options.path must be a string, got 42/],
    [{ outputDir: ['a'] }, /options.outputDir must be a string/],
    ['traces', /options must be an object, got 'traces'/],
  ])('%j → TypeError', (options, message) => {
    expect(() => (attach as unknown as Attach)(options)).toThrow(TypeError);
    expect(() => (attach as unknown as Attach)(options)).toThrow(message);
  });
});
