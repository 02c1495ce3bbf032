/** The `heaphook record` and `heaphook dump` commands, through the real `heaphook` CLI. */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { findBackend } from '@heaphook/core';
import { skipOutsideCI } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

import { decodeLogColumns, OPS, recordsOf } from '../../src/index.js';
import { heaphookBin, logsIn, packageDir, scratch, workload } from '../helpers.js';
import { damagedInsideBlock } from '../damage.js';

function heaphook(args: string[], cwd = packageDir) {
  return spawnSync(process.execPath, [heaphookBin, ...args], {
    cwd,
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 256 * 1024 * 1024,
  });
}

describe('heaphook record / dump', () => {
  it('record writes a log, dump prints one line per event beginning with the function', () => {
    const dir = scratch('cli');
    const rec = heaphook(['record', '-o', dir, '--', workload, 'counts']);
    expect(rec.status, rec.stderr).toBe(0);
    // record's closing lines name the program once, with its events and its log
    expect(rec.stderr).toMatch(
      /^ {2}\S+ \(pid \d+, the program record started\): 2,789 events, heaplog\.\d+\.log$/m,
    );
    const expected = JSON.parse(rec.stdout) as { malloc: number; free: number };
    const [log] = logsIn(dir);

    const dump = heaphook(['dump', '--no-headers', log!]);
    expect(dump.status, dump.stderr).toBe(0);
    const all = dump.stdout.trimEnd().split('\n');
    // ucm-hooks (preloaded by record) reports the mappings glibc's malloc makes for the program:
    // its heap growing and the 10 MB block it serves with mmap
    const vm = all.filter((l) => l.startsWith('vm_'));
    expect(vm.some((l) => /^vm_mapped .* size=10002432 /.test(l))).toBe(true);
    expect(vm.some((l) => /^vm_unmapped .* size=10002432 /.test(l))).toBe(true);
    const lines = all.filter((l) => !l.startsWith('vm_'));
    expect(lines).toHaveLength(2789);
    const names = new Set<string>(OPS);
    for (const line of lines) expect(names.has(line.split(' ')[0]!)).toBe(true);
    expect(lines.filter((l) => l.startsWith('malloc ')).length).toBe(expected.malloc);
    expect(lines.filter((l) => l.startsWith('free ')).length).toBe(expected.free);
    expect(lines.find((l) => l.startsWith('calloc '))).toMatch(
      /^calloc t=\d+\.\d{9} tid=\d+ ptr=0x[0-9a-f]+ count=1 size=8 stack=\d+$/,
    );
    expect(lines.find((l) => l.startsWith('posix_memalign '))).toMatch(/align=64 size=100/);

    const withStacks = heaphook(['dump', '--stacks', log!]);
    expect(withStacks.status, withStacks.stderr).toBe(0);
    expect(withStacks.stdout).toMatch(/^# process pid=\d+/m);
    expect(withStacks.stdout).toMatch(
      /^ {4}leak_site \(.*workload\.c:\d+\) \[.*hh_test_workload\+0x[0-9a-f]+\]$/m,
    );

    const summary = heaphook(['dump', '--summary', log!]);
    expect(summary.status, summary.stderr).toBe(0);
    expect(summary.stdout).toContain('never freed: 7 blocks, 28000 bytes');
    expect(summary.stdout).toMatch(/^ {4}leak_site /m);
  });

  // Skipped only outside CI when core is not built (npx nx build core); under CI it must run.
  it.skipIf(skipOutsideCI(!findBackend('example').built))(
    'record -b example traces the example backend',
    () => {
      const dir = scratch('cli-backend');
      const rec = heaphook(['record', '-q', '-o', dir, '-b', 'example', '--', workload, 'counts']);
      expect(rec.status, rec.stderr).toBe(0);
      const summary = heaphook(['dump', '--summary', logsIn(dir)[0]!]);
      expect(summary.stdout).toContain('never freed: 7 blocks, 28000 bytes');
    },
  );

  it('record passes the exit status through and takes tracer options', () => {
    const dir = scratch('cli-status');
    const rec = heaphook([
      'record',
      '-q',
      '-o',
      dir,
      '-e',
      'HEAPHOOK_STACKS=0',
      '--',
      '/bin/sh',
      '-c',
      'exit 7',
    ]);
    expect(rec.status).toBe(7);
    expect(rec.stderr).toBe('');
    expect(logsIn(dir).length).toBeGreaterThanOrEqual(1);
  });

  it('dump of a damaged log fails with the offset in the message, exit status 3 (EXIT_DAMAGED_LOG)', () => {
    const dir = scratch('cli-damage');
    const rec = heaphook(['record', '-q', '-o', dir, '--', workload, 'counts']);
    expect(rec.status).toBe(0);
    const [log] = logsIn(dir);
    const bytes = readFileSync(log!);
    writeFileSync(log!, bytes.subarray(0, bytes.length - 10));
    const dump = heaphook(['dump', log!]);
    expect(dump.status).toBe(3);
    expect(dump.stderr).toMatch(/heaphook: .*log truncated.* at byte offset \d+/);
    expect(dump.stdout.split('\n').length).toBeGreaterThan(100); // what came before still printed
  });

  it('dump of a log damaged inside a block prints every event before the damage, then fails (status 3)', async () => {
    const dir = scratch('cli-damage-inside');
    const plain = 'HEAPHOOK_COMPRESS=none';
    const rec = heaphook(['record', '-q', '-o', dir, '-e', plain, '--', workload, 'trade']);
    expect(rec.status, rec.stderr).toBe(0);
    const [log] = logsIn(dir);
    const whole = heaphook(['dump', '--no-headers', log!]);
    expect(whole.status, whole.stderr).toBe(0);
    const { bytes, offset } = damagedInsideBlock(log!);
    const damaged = join(dir, 'damaged.log');
    writeFileSync(damaged, bytes);
    const dump = heaphook(['dump', '--no-headers', damaged]);
    expect(dump.status).toBe(3);
    expect(dump.stderr).toMatch(
      new RegExp(
        `undecodable record #\\d+ .* in the block at byte offset ${offset}; everything before it was decoded`,
      ),
    );
    // the lines of the blocks before the damaged one as the whole log's dump has them, then
    // those of the damaged block's valid part
    let linesBefore = 0;
    for await (const batch of decodeLogColumns(log!)) {
      if (batch.offset >= offset) break;
      for (const r of recordsOf(batch))
        if (r.type === 'vm' || (r.type === 'event' && r.op !== 'realloc_done')) linesBefore++;
    }
    const lines = dump.stdout.split('\n');
    const wholeLines = whole.stdout.split('\n');
    expect(lines.slice(0, linesBefore)).toEqual(wholeLines.slice(0, linesBefore));
    expect(lines.length - 1 - linesBefore).toBeGreaterThan(1000);
    expect(lines.length).toBeLessThan(wholeLines.length);
  });
});
