/**
 * A log reader that is safe on any file (issue 22, section 3): compression bombs are refused
 * by the format's block limit in flat memory, with the valid part before them still read; a
 * path that is not a log is one line with exit status 2; a damaged log is exit status 3 for
 * every command; a run that did not end normally says so, and its live blocks are not leaks.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateRawSync } from 'node:zlib';

import { describe, expect, it } from 'vitest';

import { HeaphookError } from '@heaphook/core';

import { MAX_BLOCK_PAYLOAD } from '../../src/decode/format.generated.js';
import { logInputError } from '../../src/decode/input.js';
import { record, report, reportText } from '../../src/index.js';
import {
  block,
  blocksOf,
  deflateBomb,
  fileHeader,
  varint,
  zstdFrameHeader,
  zstdRleBlocks,
} from '../fuzz/corpus.js';
import {
  expectCleanError,
  HANG_TIMEOUT_MS,
  heaphookCli,
  MEMORY_BOUND,
  readInChild,
} from '../fuzz/harness.js';
import { logsIn, scratch, traced, workload } from '../helpers.js';

const ZSTD = 0x40000000;
const DEFLATED = 0x80000000;

function realLog(codec: 'zstd' | 'deflate' | 'none', args = ['counts']): Buffer {
  const dir = scratch(`safety-${codec}`);
  const run = traced(dir, workload, args, { HEAPHOOK_COMPRESS: codec, HEAPHOOK_STACKS: '0' });
  expect(run.status, run.stderr).toBe(0);
  return readFileSync(logsIn(dir)[0]!);
}

function writeLog(name: string, ...parts: Buffer[]): string {
  const path = join(scratch('safety'), name);
  writeFileSync(path, Buffer.concat(parts));
  return path;
}

describe('compression bombs', () => {
  // 8,400 zstd RLE blocks of 128 KiB: 33 KB that decompress to 1.1 GB.
  const zstdBomb = (claim: number): Buffer =>
    block(ZSTD, Buffer.concat([varint(claim), zstdFrameHeader(17), zstdRleBlocks(8400, false)]));

  it('a 33 KB zstd block announcing 1.1 GB: dump --summary says "corrupt compressed block at byte offset 16", exit 3, in ≤ 256 MB', () => {
    const log = writeLog('zstd-bomb.log', fileHeader(), zstdBomb(8400 * 131072));
    const run = heaphookCli(['dump', '--summary', log]);
    expectCleanError(run, 3, 'dump --summary');
    expect(run.errorLines[0]).toMatch(
      new RegExp(
        `corrupt compressed block \\(it announces \\d+ bytes; a payload holds 1 to ${MAX_BLOCK_PAYLOAD}\\) at byte offset 16`,
      ),
    );
    if (run.maxRssBytes !== undefined) expect(run.maxRssBytes).toBeLessThanOrEqual(MEMORY_BOUND);
  });

  it('a zstd block announcing 1,000 bytes that decompresses to 1.1 GB: corrupt, in ≤ 256 MB, through the zstd program and fzstd', () => {
    const log = writeLog('zstd-bomb-small-claim.log', fileHeader(), zstdBomb(1000));
    const { outcomes, maxRssBytes } = readInChild([log]);
    for (const o of outcomes) {
      expect(o.outcome, `${o.reader}: ${o.message}`).toBe('error');
      expect(o.message, o.reader).toMatch(/corrupt .*block.* at byte offset 16/);
    }
    expect(maxRssBytes).toBeLessThanOrEqual(MEMORY_BOUND);
  });

  it('a 270 KB deflate block that inflates to 270 MiB: report says "corrupt compressed block", exit 3, in ≤ 256 MB', () => {
    const log = writeLog('deflate-bomb.log', fileHeader(), block(DEFLATED, deflateBomb(270)));
    const run = heaphookCli(['report', log]);
    expect(run.status).toBe(3);
    expect(run.errorLines.join('\n')).toMatch(
      new RegExp(
        `corrupt compressed block \\(it decompresses to more than the ${MAX_BLOCK_PAYLOAD} bytes it may hold\\) at byte offset 16`,
      ),
    );
    if (run.maxRssBytes !== undefined) expect(run.maxRssBytes).toBeLessThanOrEqual(MEMORY_BOUND);
  });

  for (const codec of ['zstd', 'deflate'] as const) {
    it(`a ${codec} bomb after a real log: the log before it is reported whole, the bomb is damage at its offset`, async () => {
      const good = realLog(codec);
      const bomb =
        codec === 'zstd'
          ? block(ZSTD, Buffer.concat([varint(1000), zstdRleBlocks(8400, false)])) // continues the log's frame
          : block(DEFLATED, deflateBomb(64));
      const whole = await report(writeLog(`good-${codec}.log`, good), { symbolize: false });
      const log = writeLog(`bombed-${codec}.log`, good, bomb);
      const damaged = await report(log, { symbolize: false });
      expect(damaged.error?.offset).toBe(good.length);
      expect(damaged.json.events).toBe(whole.json.events);
      expect(damaged.json.calls).toEqual(whole.json.calls);
      const { outcomes, maxRssBytes } = readInChild([log]);
      for (const o of outcomes.filter((x) => x.reader !== 'recommend')) {
        expect(o.message, o.reader).toContain(`at byte offset ${good.length}`);
      }
      expect(maxRssBytes).toBeLessThanOrEqual(MEMORY_BOUND);
    });
  }

  it('a THREAD record of index 16,777,215 (60 bytes) is damage, read in ≤ 256 MB by every reader', () => {
    const streams = [[0x03, 0x90], [0], [0xff, 0xff, 0xff, 7], [16], [1], [0xff, 0xff, 0xff, 7, 1]];
    const payload = Buffer.from([6, ...streams.map((x) => x.length), ...streams.flat()]);
    const log = writeLog('thread-index.log', fileHeader(), block(0, payload));
    const { outcomes, maxRssBytes } = readInChild([log]);
    for (const o of outcomes.filter((x) => x.reader !== 'recommend')) {
      expect(o.message, o.reader).toMatch(/thread index 16777215 out of range \(at most 65535\)/);
    }
    expect(maxRssBytes).toBeLessThanOrEqual(MEMORY_BOUND);
  });

  it('a block longer than the format allows is refused from its header, before it is read', () => {
    const header = Buffer.alloc(8);
    header.writeUInt32LE(MAX_BLOCK_PAYLOAD + 1, 0);
    const log = writeLog(
      'long-block.log',
      fileHeader(),
      header,
      Buffer.alloc(MAX_BLOCK_PAYLOAD + 1),
    );
    const run = heaphookCli(['dump', log]);
    expectCleanError(run, 3, 'dump');
    expect(run.errorLines[0]).toMatch(
      new RegExp(
        `corrupt block header \\(length ${MAX_BLOCK_PAYLOAD + 1}; a block stores 1 to ${MAX_BLOCK_PAYLOAD} bytes\\) at byte offset 16`,
      ),
    );
  });
});

describe('live blocks: the replay holds at most HEAPHOOK_MAX_LIVE_BLOCKS (default 4,194,304)', () => {
  /** `blocks` deflate blocks of 290,000 identical malloc records of thread index `thread`: each
   * a new block at the address after the previous one, ~1.2 KB a block. */
  function mallocFlood(blocks: number, thread: number): Buffer {
    const n = 290_000;
    const parts: Buffer[] = [];
    for (let b = 0; b < blocks; b++) {
      const tag = Buffer.alloc(n, 0x80); // malloc
      tag[0] = 0x90; // ... naming its thread
      const addr = Buffer.concat([
        varint(1 + 4 * (0x10000000 + b * n * 32)),
        Buffer.alloc(n - 1, 2),
      ]);
      const streams = [
        tag,
        Buffer.alloc(n),
        varint(thread),
        Buffer.alloc(n, 16),
        addr,
        Buffer.alloc(0),
      ];
      const payload = Buffer.concat([
        varint(6),
        ...streams.map((s) => varint(s.length)),
        ...streams,
      ]);
      parts.push(block(DEFLATED, deflateRawSync(payload, { level: 9 })));
    }
    return Buffer.concat(parts);
  }

  /** A real log (thread index 1 declared) and the flood after it. */
  function floodedLog(name: string, blocks: number): { log: string; bytes: number } {
    const good = realLog('deflate');
    const log = writeLog(name, good, mallocFlood(blocks, 1));
    return { log, bytes: good.length };
  }

  it('4.6 M live blocks in 20 KB: report stops at the default limit, names it, reports the part before it', () => {
    const { log } = floodedLog('flood.log', 16);
    expect(readFileSync(log).length).toBeLessThan(40_000);
    const run = heaphookCli(['report', '--json', log]);
    expect(run.status).toBe(3);
    expect(run.errorLines).toHaveLength(1);
    expect(run.errorLines[0]).toMatch(
      /more than 4194304 blocks live at once, the analyser's limit \(HEAPHOOK_MAX_LIVE_BLOCKS=4194304; set it higher for a log that really holds more\) in the block at byte offset \d+; everything before it was decoded; the report covers the part before byte \d+$/,
    );
    const json = JSON.parse(run.stdout) as { events: number; neverFreedBlocks: number };
    expect(json.neverFreedBlocks).toBeGreaterThanOrEqual(4_194_304 - 290_000);
    expect(json.neverFreedBlocks).toBeLessThanOrEqual(4_194_304);
    // ~100 bytes a block in the replay (README, "A reader that is safe on any file")
    if (run.maxRssBytes !== undefined) expect(run.maxRssBytes).toBeLessThan(640 * 1024 * 1024);
  });

  it('HEAPHOOK_MAX_LIVE_BLOCKS sets the limit: report, dump --summary and recommend stop at it, in ≤ 256 MB', () => {
    const { log, bytes } = floodedLog('flood-small.log', 4);
    const env = { HEAPHOOK_MAX_LIVE_BLOCKS: '500000' };
    const limit =
      /more than 500000 blocks live at once, the analyser's limit \(HEAPHOOK_MAX_LIVE_BLOCKS=500000;/;
    const rep = heaphookCli(['report', log], HANG_TIMEOUT_MS, env);
    expect(rep.status).toBe(3);
    expect(rep.errorLines.join('\n')).toMatch(limit);
    expect(rep.stdout).toMatch(/^this run did not end normally/);
    const summary = heaphookCli(['dump', '--summary', log], HANG_TIMEOUT_MS, env);
    expect(summary.status).toBe(3);
    expect(summary.errorLines.join('\n')).toMatch(limit);
    const rec = heaphookCli(['recommend', log], HANG_TIMEOUT_MS, env);
    expect(rec.status).toBe(3);
    expect(rec.errorLines.join('\n')).toMatch(limit);
    for (const run of [rep, summary, rec]) {
      // in the flood, after the real log
      const offset = Number(/at byte offset (\d+)/.exec(run.errorLines.join('\n'))?.[1]);
      expect(offset).toBeGreaterThanOrEqual(bytes);
      if (run.maxRssBytes !== undefined) expect(run.maxRssBytes).toBeLessThanOrEqual(MEMORY_BOUND);
    }
    const bad = heaphookCli(['report', log], HANG_TIMEOUT_MS, { HEAPHOOK_MAX_LIVE_BLOCKS: 'many' });
    expectCleanError(bad, 2, 'report');
    expect(bad.errorLines[0]).toContain('HEAPHOOK_MAX_LIVE_BLOCKS=many: give a whole number');
  });
});

describe('paths that are not logs: one line naming the path, exit status 2', () => {
  const dir = scratch('paths');
  const fifo = join(dir, 'heaplog.fifo');
  spawnSync('mkfifo', [fifo]);
  const folder = join(dir, 'a-folder');
  mkdirSync(folder);
  const file = join(dir, 'a-file');
  writeFileSync(file, '');
  symlinkSync(join(dir, 'loop-b'), join(dir, 'loop-a'));
  symlinkSync(join(dir, 'loop-a'), join(dir, 'loop-b'));
  const cases: [string, string, RegExp][] = [
    [
      'a directory with no log',
      folder,
      / is a directory with no heaplog\.<pid>\.log and no session manifest; give a heaplog file \(heaplog\.<pid>\.log\)/,
    ],
    ['a FIFO', fifo, / is a FIFO \(named pipe\), not a regular file; give a heaplog file/],
    ['a device', '/dev/null', / is a character device, not a regular file/],
    ['a missing file', join(dir, 'heaplog.404.log'), / does not exist; give a heaplog file/],
    [
      'a path through a file',
      join(file, 'heaplog.1.log'),
      /a component of the path is not a directory \(ENOTDIR\)/,
    ],
    ['a symbolic link loop', join(dir, 'loop-a'), /too many levels of symbolic links .*\(ELOOP\)/],
  ];
  for (const command of [['dump'], ['dump', '--summary'], ['report'], ['recommend']]) {
    for (const [what, path, message] of cases) {
      it(`${command.join(' ')} of ${what}`, () => {
        // A FIFO without a writer would block a reader forever: 20 s is a hang detector.
        const run = heaphookCli([...command, path], 20_000);
        expectCleanError(run, 2, `${command.join(' ')} ${what}`);
        expect(run.errorLines[0]).toContain(`heaphook ${command[0]}: ${path}`);
        expect(run.errorLines[0]).toMatch(message);
      });
    }
  }

  it('a log that cannot be read for permission names the problem (EACCES, also as root)', () => {
    const denied = Object.assign(new Error('EACCES: permission denied'), {
      code: 'EACCES',
      path: '/x/heaplog.1.log',
    });
    const error = logInputError('/x/heaplog.1.log', denied);
    expect(error).toBeInstanceOf(HeaphookError);
    expect((error as HeaphookError).exitStatus).toBe(2);
    expect((error as Error).message).toBe(
      '/x/heaplog.1.log cannot be read: permission denied (EACCES); give a heaplog file (heaplog.<pid>.log, written by heaphook record)',
    );
  });

  it('report -o <an existing file>: one line naming it, exit status 2, no stack trace', () => {
    const log = writeLog('normal-for-o.log', realLog('none'));
    const run = heaphookCli(['report', '-o', file, log]);
    expectCleanError(run, 2, 'report -o file');
    expect(run.errorLines[0]).toBe(`heaphook report: ${file}: already exists (EEXIST)`);
  });

  it('record -o <an existing file>: one line, exit status 2, nothing run', () => {
    const run = heaphookCli(['record', '-o', file, '--', workload, 'counts']);
    expectCleanError(run, 2, 'record -o file');
    expect(run.errorLines[0]).toBe(
      `heaphook record: -o ${file} is a file (or lies under one), not a directory; give a directory for the logs`,
    );
    expect(run.stdout).toBe('');
  });
});

describe('a damaged log is exit status 3 for every command', () => {
  const log = writeLog('cut.log', realLog('zstd'));
  truncateSync(log, readFileSync(log).length - 10);
  for (const command of [['dump'], ['dump', '--summary'], ['report'], ['recommend']]) {
    it(command.join(' '), () => {
      const run = heaphookCli([...command, log]);
      expectCleanError(run, 3, command.join(' '));
      expect(run.errorLines[0]).toMatch(/log truncated.* at byte offset \d+/);
    });
  }
});

describe('a run that did not end normally', () => {
  it('crashed (END reason lost): the report says so at the top and calls its live blocks "live at the end"', async () => {
    const rec = await record(workload, ['crash', 'segv'], {
      outputDir: scratch('crash'),
      stdio: 'pipe',
    });
    expect(rec.logs[0]!.reason).toBe('lost');
    const r = await report(rec.logs[0]!.path, { symbolize: false });
    const lines = r.text.split('\n');
    expect(lines[0]).toBe(
      'this run did not end normally: the process ended without its exit path (a crash, a signal, _exit or exec); blocks still live are "live at the end", not leaks',
    );
    expect(r.text).toMatch(/^live at the end: 100 blocks, 2\.34 KiB \(2,400 bytes\)$/m);
    expect(r.text).not.toMatch(/^leaked/m);
    expect(r.json.endedNormally).toBe(false);
    expect(r.json.end).toBe('lost');
    // The JSON keeps its field names (other tools read them); endedNormally is added.
    expect(r.json.leakedBlocks).toBe(100);
    expect(r.json.leakSource).toBe('never-freed');
  });

  it('a log without its END record (cut at a block boundary) says the END record is missing', async () => {
    const good = realLog('none', ['churn', '200000']);
    const blocks = blocksOf(good);
    expect(blocks.length).toBeGreaterThan(2);
    const log = writeLog('no-end.log', good.subarray(0, blocks.at(-1)!.offset));
    const r = await report(log, { symbolize: false });
    expect(r.error).toBeUndefined();
    expect(r.json.end).toBeNull();
    expect(r.json.endedNormally).toBe(false);
    expect(r.text.split('\n')[0]).toMatch(
      /^this run did not end normally: the log has no END record/,
    );
  });

  it('a run that exited normally: no such line, its live blocks are leaks', async () => {
    const r = await report(writeLog('normal.log', realLog('zstd')), { symbolize: false });
    expect(r.json.endedNormally).toBe(true);
    expect(r.text).not.toContain('did not end normally');
    // the exact-count workload's seven leaks, of which the check finds three at least (those of
    // 2000, 4000 and 6000 bytes; see counts() in test/native/workload.c)
    expect(r.text).toMatch(/^leaked \(leak-check\): [3-7] blocks/m);
    expect(reportText(r.json)).toBe(r.text);
  });
});
