// Configuration from the environment: a bad value stops the program before main with one line
// (variable, value, example) and exit status 78; good values, suffixes included, work.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { backendLibrary, built, lines, run } from '../helpers/native.js';

const EXIT_CONFIG = 78;

/** A program whose output proves main ran. */
const PROGRAM = ['/bin/echo', 'main ran'];

function runExample(env: Record<string, string>) {
  const [command, ...args] = PROGRAM;
  return run(command!, args, { preload: backendLibrary('example'), env });
}

describe('bad values stop the program before main', () => {
  const cases: Array<[string, string, RegExp]> = [
    [
      'HEAPHOOK_LOG_LEVEL',
      'loud',
      /^heaphook: HEAPHOOK_LOG_LEVEL="loud" is not a log level; expected one of error, warn, info, debug, trace or 0\.\.4, e\.g\. HEAPHOOK_LOG_LEVEL=debug$/,
    ],
    [
      'HEAPHOOK_LOG_LEVEL',
      '7',
      /^heaphook: HEAPHOOK_LOG_LEVEL="7" is not a log level; .* e\.g\. HEAPHOOK_LOG_LEVEL=debug$/,
    ],
    [
      'HEAPHOOK_EXAMPLE_CHUNK_SIZE',
      'abc',
      /^heaphook: HEAPHOOK_EXAMPLE_CHUNK_SIZE="abc" is not a size; expected bytes or a number with a suffix, e\.g\. HEAPHOOK_EXAMPLE_CHUNK_SIZE=100M$/,
    ],
    [
      'HEAPHOOK_EXAMPLE_CHUNK_SIZE',
      '-5',
      /^heaphook: HEAPHOOK_EXAMPLE_CHUNK_SIZE="-5" is not a size; expected bytes or a number with a suffix, e\.g\. HEAPHOOK_EXAMPLE_CHUNK_SIZE=100M$/,
    ],
    [
      'HEAPHOOK_EXAMPLE_CHUNK_SIZE',
      '10Q',
      /^heaphook: HEAPHOOK_EXAMPLE_CHUNK_SIZE="10Q" is not a size; /,
    ],
    [
      'HEAPHOOK_EXAMPLE_CHUNK_SIZE',
      '3M',
      /^heaphook: HEAPHOOK_EXAMPLE_CHUNK_SIZE="3M" is not a power of two from 64KiB to 1GiB, e\.g\. HEAPHOOK_EXAMPLE_CHUNK_SIZE=1MiB$/,
    ],
  ];
  for (const [name, value, expected] of cases) {
    it(`${name}=${value}`, () => {
      const result = runExample({ [name]: value });
      expect(result.stdout).toBe(''); // main never ran
      expect(lines(result.stderr)).toHaveLength(1);
      expect(lines(result.stderr)[0]).toMatch(expected);
      expect(result.status).toBe(EXIT_CONFIG);
    });
  }

  it('names the variable and value in one printable line even for a hostile value', () => {
    const result = runExample({ HEAPHOOK_EXAMPLE_CHUNK_SIZE: '12\nGiB' });
    expect(lines(result.stderr)).toEqual([
      'heaphook: HEAPHOOK_EXAMPLE_CHUNK_SIZE="12?GiB" is not a size; expected bytes or a number with a suffix, e.g. HEAPHOOK_EXAMPLE_CHUNK_SIZE=100M',
    ]);
    expect(result.status).toBe(EXIT_CONFIG);
  });

  it('also prints the line on stderr when logs go to HEAPHOOK_LOG_FILE', () => {
    const dir = mkdtempSync(join(tmpdir(), 'heaphook-config-'));
    try {
      const logFile = join(dir, 'heaphook.log');
      const result = runExample({ HEAPHOOK_LOG_FILE: logFile, HEAPHOOK_EXAMPLE_CHUNK_SIZE: 'abc' });
      expect(result.status).toBe(EXIT_CONFIG);
      expect(lines(result.stderr)).toHaveLength(1);
      expect(readFileSync(logFile, 'utf8')).toBe(result.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('good values work', () => {
  for (const value of ['4MiB', '256KiB', '1048576', '0.5MiB', '1GiB']) {
    it(`HEAPHOOK_EXAMPLE_CHUNK_SIZE=${value}`, () => {
      const result = runExample({
        HEAPHOOK_EXAMPLE_CHUNK_SIZE: value,
        HEAPHOOK_LOG_LEVEL: 'debug',
      });
      expect(result.stdout).toBe('main ran\n');
      expect(result.status).toBe(0);
      const bytes = {
        '4MiB': 4 << 20,
        '256KiB': 256 << 10,
        '1048576': 1 << 20,
        '0.5MiB': 512 << 10,
        '1GiB': 1 << 30,
      }[value];
      expect(result.stderr).toContain(`example: chunk size ${bytes} bytes`);
    });
  }

  it('an empty value counts as unset', () => {
    const result = runExample({ HEAPHOOK_EXAMPLE_CHUNK_SIZE: '', HEAPHOOK_LOG_LEVEL: '' });
    expect(result.stdout).toBe('main ran\n');
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  for (const level of ['error', 'WARN', 'info', 'debug', 'trace', '0', '3', '4']) {
    it(`HEAPHOOK_LOG_LEVEL=${level}`, () => {
      const result = runExample({ HEAPHOOK_LOG_LEVEL: level });
      expect(result.stdout).toBe('main ran\n');
      expect(result.status).toBe(0);
      const debug = ['debug', 'trace', '3', '4'].includes(level);
      expect(result.stderr.includes('debug: backend example ready')).toBe(debug);
    });
  }

  it('an HEAPHOOK_LOG_FILE that cannot be opened is reported, and the log stays on stderr', () => {
    const result = runExample({
      HEAPHOOK_LOG_FILE: '/nonexistent-dir/heaphook.log',
      HEAPHOOK_LOG_LEVEL: 'debug',
    });
    expect(result.stdout).toBe('main ran\n');
    expect(result.status).toBe(0);
    expect(result.stderr).toMatch(
      /^heaphook\[\d+\] warn: cannot open HEAPHOOK_LOG_FILE="\/nonexistent-dir\/heaphook.log" \(errno 2\); logging to stderr$/m,
    );
    expect(result.stderr).toMatch(/debug: backend example ready/);
  });

  it('HEAPHOOK_LOG_FILE receives the log instead of stderr', () => {
    const dir = mkdtempSync(join(tmpdir(), 'heaphook-config-'));
    try {
      const logFile = join(dir, 'heaphook.log');
      const result = runExample({ HEAPHOOK_LOG_FILE: logFile, HEAPHOOK_LOG_LEVEL: 'debug' });
      expect(result.status).toBe(0);
      expect(result.stderr).toBe('');
      expect(readFileSync(logFile, 'utf8')).toMatch(
        /^heaphook\[\d+\] debug: backend example ready/m,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
