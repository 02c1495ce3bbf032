// `heaphook watch -- COMMAND`: the command runs with libheaphook_ucm.so preloaded and
// HEAPHOOK_MEM_WATCH_SOCKET set; every process of it that execs streams its events.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  cleanEnv,
  heaphookBin,
  jsonLines,
  pythonExecutable,
  release,
} from '../helpers/watch-target.js';

let work: string;
let python: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'heaphook-watch-command-'));
  python = pythonExecutable();
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

function watch(args: string[]) {
  const result = spawnSync(process.execPath, [heaphookBin, 'watch', ...args], {
    env: cleanEnv(),
    encoding: 'utf8',
    timeout: 100_000,
  });
  if (result.error) throw result.error;
  return result;
}

describe('heaphook watch -- COMMAND', () => {
  it('the C target: its sequence, exact, in JSON lines; the summary adds up', async () => {
    const output = join(work, 'target.jsonl');
    const cli = spawn(
      process.execPath,
      [heaphookBin, 'watch', '--json', '-o', output, '--', release('ucm_watch_target'), '300'],
      { env: cleanEnv() },
    );
    let stdout = '';
    cli.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const exited = new Promise<number | null>((resolve) => cli.on('close', resolve));
    const deadline = Date.now() + 30_000;
    while (!/^ready \d+$/m.test(stdout) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const pid = Number(/^ready (\d+)$/m.exec(stdout)![1]);
    process.kill(pid, 'SIGUSR1');
    while (!stdout.includes('sequence done') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    process.kill(pid, 'SIGTERM');
    expect(await exited).toBe(0);
    const lines = jsonLines(readFileSync(output, 'utf8'));
    const events = lines.filter(
      (l) => l.pid === pid && !['ATTACHED', 'DETACHED', 'SUMMARY'].includes(l.type),
    );
    const page = 4096;
    const of = (type: string, size: number) =>
      events.filter((e) => e.type === type && e.size === size);
    expect(of('MMAP', 4 * page)).toHaveLength(300);
    for (const e of of('MMAP', 4 * page)) {
      expect(e).toMatchObject({ prot: 'rw-', flags: ['PRIVATE', 'ANONYMOUS'], fd: -1, tid: pid });
      expect(e.address).toMatch(/^0x[0-9a-f]+$/);
    }
    expect(of('MUNMAP', 4 * page).length + of('MUNMAP', 8 * page).length).toBe(300);
    expect(events.filter((e) => e.type === 'MREMAP' && e.oldSize === 4 * page)).toHaveLength(1);
    expect(
      events.filter((e) => e.type === 'MADVISE' && e.advice === 'DONTNEED').length,
    ).toBeGreaterThanOrEqual(1);
    expect(events.filter((e) => e.type === 'SHMAT')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'SHMDT')).toHaveLength(1);
    expect(lines.find((l) => l.type === 'ATTACHED')).toMatchObject({ pid, mode: 'preload' });
    expect(lines.find((l) => l.type === 'DETACHED')).toMatchObject({
      pid,
      reason: 'exit',
      dropped: 0,
    });
    const summary = lines.at(-1)!;
    expect(summary.type).toBe('SUMMARY');
    const counts = summary.counts as Record<string, number>;
    for (const [type, count] of Object.entries(counts)) {
      expect(events.filter((e) => e.type === type)).toHaveLength(count);
    }
    expect(summary).toMatchObject({ processes: 1, events: events.length, dropped: 0 });
  });

  it('a forking shell pipeline: each process streams its own events, the output is right', () => {
    const output = join(work, 'pipeline.jsonl');
    const script =
      'python3 -c \'import sys; b = bytearray(64 << 20); sys.stdout.write("x" * 100000)\' | wc -c';
    const run = watch(['--json', '-o', output, '--', 'sh', '-c', script]);
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toBe('100000');
    const lines = jsonLines(readFileSync(output, 'utf8'));
    const attached = lines.filter((l) => l.type === 'ATTACHED');
    const comms = attached.map((l) => l.comm);
    expect(comms).toContain('wc');
    expect(comms.some((c) => typeof c === 'string' && c.startsWith('python3'))).toBe(true);
    expect(new Set(attached.map((l) => l.pid)).size).toBeGreaterThanOrEqual(3);
    // glibc's malloc maps the 64 MiB bytearray itself (through the C library's patched mmap).
    const big = lines.filter((l) => l.type === 'MMAP' && (l.size as number) >= 64 << 20);
    expect(big.length).toBeGreaterThanOrEqual(1);
    // Every process ended with END or closed on exec, and nothing was dropped.
    const summary = lines.at(-1)!;
    expect(summary).toMatchObject({ type: 'SUMMARY', dropped: 0 });
    expect(summary.processes).toBe(
      new Set(lines.filter((l) => l.pid !== undefined).map((l) => l.pid)).size,
    );
  });

  it('a child forked without exec is not watched, and runs and exits normally', () => {
    const output = join(work, 'fork.jsonl');
    const script = [
      'import mmap, os',
      'pid = os.fork()',
      'if pid == 0:',
      '    m = mmap.mmap(-1, 3 << 20); m[0] = 1; os._exit(7)',
      '_, status = os.waitpid(pid, 0)',
      'print("child", os.waitstatus_to_exitcode(status), pid)',
      'm = mmap.mmap(-1, 5 << 20)',
    ].join('\n');
    const run = watch(['--json', '-o', output, '--', python, '-c', script]);
    expect(run.status).toBe(0);
    const [, code, childPid] = /^child (\d+) (\d+)$/m.exec(run.stdout)!;
    expect(code).toBe('7');
    const lines = jsonLines(readFileSync(output, 'utf8'));
    expect(lines.filter((l) => l.pid === Number(childPid))).toEqual([]);
    expect(lines.filter((l) => l.type === 'MMAP' && l.size === 5 << 20)).toHaveLength(1);
    expect(lines.filter((l) => l.type === 'MMAP' && l.size === 3 << 20)).toHaveLength(0);
  });

  it('text lines, the summary on stderr, --events filters, and the exit status passes through', () => {
    const run = watch([
      '--events',
      'mmap,vm_mapped',
      '--',
      python,
      '-c',
      'import sys; bytearray(16 << 20); sys.exit(3)',
    ]);
    expect(run.status).toBe(3);
    const [header, ...lines] = run.stdout.trimEnd().split('\n');
    // The columns are named once, above the first event.
    expect(header).toMatch(/^ +time \(s\) {2}pid\/tid +event +address +bytes {2}details$/);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).toMatch(
        /^\s+\d+\.\d{6} {2}\d+\/\d+ +(MMAP|VM_MAPPED) +0x[0-9a-f]+ +\d+( {2}.*)?$/,
      );
    }
    expect(run.stderr).toMatch(/^heaphook watch: pid \d+ \(python3\): watching, preload mode$/m);
    const summary =
      /^heaphook watch: 1 process, (\d+) events in [\d.]+ s, 0 dropped\n {2}MMAP (\d+), VM_MAPPED (\d+)$/m.exec(
        run.stderr,
      );
    expect(summary).not.toBeNull();
    expect(Number(summary![1])).toBe(lines.length);
    expect(Number(summary![2]) + Number(summary![3])).toBe(lines.length);
  });

  it('--duration detaches (counted from the attach), and the command runs on to its end', () => {
    const run = watch([
      '--json',
      '--duration',
      '300ms',
      '--',
      'sh',
      '-c',
      // 300 ms after the shell's attach, it is still sleeping, on a loaded machine too
      'sleep 2; echo finished',
    ]);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^finished$/m);
    const lines = jsonLines(run.stdout);
    // Preloaded: the hooks stay first in the process, the C library's patched entries are restored.
    expect(lines.find((l) => l.type === 'DETACHED')).toMatchObject({
      reason: 'detached',
      restored: true,
    });
  });

  it('refuses bad options with one line and exit status 2', () => {
    const cases: Array<[string[], RegExp]> = [
      [['--', 'true'].slice(2), /name a process \(-p PID\) or a command/],
      [['--events', 'mmap,bogus', '--', 'true'], /--events: unknown event "bogus"/],
      [['--buffer', '1000', '--', 'true'], /--buffer: "1000" is not a power of two/],
      [['--duration', 'soon', '--', 'true'], /--duration: "soon" is not a duration/],
      [['-p', '12x'], /-p: "12x" is not a process id/],
    ];
    for (const [args, message] of cases) {
      const run = watch(args);
      expect(run.status).toBe(2);
      expect(run.stderr).toMatch(new RegExp(`^heaphook watch: ${message.source}`));
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});
