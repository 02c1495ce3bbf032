// `heaphook watch -p PID`: libheaphook_ucm.so injected into a running process by
// heaphook-inject (@heaphook/core), its events streamed, and a clean detach: counts exact
// between attach and detach, the GOT entry and the C library's code back to before, the
// library's thread gone, the process working on. Refusals come from the injector, passed through.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { injectorPath, INJECT_EXIT_CODES } from '@heaphook/core';
import { settledValue, threadNames } from '@heaphook/core/testing';

import { libraryPath } from '../../src/index.js';
import {
  cleanEnv,
  expectedCounts,
  heaphookBin,
  jsonLines,
  pythonExecutable,
  release,
  Target,
  watchThreadRemains,
} from '../helpers/watch-target.js';

let work: string;
let python: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'heaphook-watch-pid-'));
  python = pythonExecutable();
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

let cleanup: Array<() => void> = [];
afterEach(() => {
  for (const f of cleanup) f();
  cleanup = [];
});

/** `heaphook watch --json -p pid -o file [args]`, running; resolves its exit status. */
class Watch {
  readonly child: ChildProcessWithoutNullStreams;
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(
    readonly pid: number,
    readonly output: string,
    args: string[] = [],
  ) {
    this.child = spawn(
      process.execPath,
      [heaphookBin, 'watch', '--json', '-p', String(pid), '-o', output, ...args],
      { env: cleanEnv() },
    );
    this.child.stderr.setEncoding('utf8').on('data', (c: string) => (this.stderr += c));
    this.child.stdout.resume();
    this.exited = new Promise((resolve) => this.child.on('close', resolve));
    cleanup.push(() => this.child.kill('SIGKILL'));
  }

  lines() {
    try {
      return jsonLines(readFileSync(this.output, 'utf8'));
    } catch {
      return [];
    }
  }

  /** Waits until the target's stream has started (ATTACHED written). */
  async attached(): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (!this.lines().some((l) => l.type === 'ATTACHED')) {
      if (Date.now() > deadline) throw new Error(`no ATTACHED line; stderr: ${this.stderr}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Ctrl-C: detach; resolves the exit status. */
  async detach(): Promise<number | null> {
    this.child.kill('SIGINT');
    return this.exited;
  }

  countsOf(pid: number): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const l of this.lines()) {
      if (l.pid !== pid || ['ATTACHED', 'DETACHED', 'DROPPED', 'SUMMARY'].includes(l.type))
        continue;
      counts[l.type] = (counts[l.type] ?? 0) + 1;
    }
    return counts;
  }
}

describe('heaphook watch -p PID', () => {
  it('the C target: exact counts between attach and detach, five times in a row; hooks, GOT and thread gone after each', async () => {
    const target = new Target(['400']);
    cleanup.push(() => target.child.kill('SIGKILL'));
    await target.line(/^ready \d+$/);
    for (let round = 0; round < 5; round++) {
      const watch = new Watch(target.pid, join(work, `c-${round}.jsonl`));
      await watch.attached();
      expect(watch.lines().find((l) => l.type === 'ATTACHED')).toMatchObject({
        pid: target.pid,
        mode: 'reloc',
      });
      expect(await target.ask('SIGWINCH', /^state /)).toBe(
        'state mode=reloc got=hooked code=patched dlopen=hooked',
      );
      expect(threadNames(target.pid)).toContain('heaphook-watch');
      await target.ask('SIGUSR1', /^sequence done$/);
      expect(await watch.detach()).toBe(0);
      expect(watch.countsOf(target.pid)).toEqual(expectedCounts(400));
      expect(watch.lines().find((l) => l.type === 'DETACHED')).toMatchObject({
        reason: 'detached',
        restored: true,
        dropped: 0,
      });
      expect(watch.lines().at(-1)).toMatchObject({ type: 'SUMMARY', processes: 1, dropped: 0 });
      expect(await target.ask('SIGWINCH', /^state /)).toBe(
        'state mode=none got=libc code=original dlopen=libc',
      );
      expect(await settledValue(() => threadNames(target.pid), ['ucm_watch_targe'])).toEqual([
        'ucm_watch_targe',
      ]);
    }
    await target.ask('SIGUSR1', /^sequence done$/);
    await target.ask('SIGTERM', /^exiting$/);
    expect(await target.exited).toBe(0);
  });

  it('a second watch of a watched process is refused with one line and status 1; the first goes on', async () => {
    const target = new Target(['20']);
    cleanup.push(() => target.child.kill('SIGKILL'));
    await target.line(/^ready \d+$/);
    const first = new Watch(target.pid, join(work, 'first.jsonl'));
    await first.attached();
    const second = spawnSync(process.execPath, [heaphookBin, 'watch', '-p', String(target.pid)], {
      env: cleanEnv(),
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(second.status).toBe(1);
    expect(second.stderr).toBe(
      `heaphook watch: pid ${target.pid} cannot be watched: it is already being watched (another heaphook watch is attached, or still detaching): detach that one first\n`,
    );
    await target.ask('SIGUSR1', /^sequence done$/);
    expect(await first.detach()).toBe(0);
    expect(first.countsOf(target.pid)).toEqual(expectedCounts(20));
    target.child.kill('SIGTERM');
    expect(await target.exited).toBe(0);
  });

  it('--duration detaches on its own; a target that exits while watched ends the watch (exit, status 0)', async () => {
    const target = new Target(['50']);
    cleanup.push(() => target.child.kill('SIGKILL'));
    await target.line(/^ready \d+$/);
    const timed = new Watch(target.pid, join(work, 'timed.jsonl'), ['--duration', '1s']);
    await timed.attached();
    await target.ask('SIGUSR1', /^sequence done$/);
    expect(await timed.exited).toBe(0);
    expect(timed.countsOf(target.pid)).toEqual(expectedCounts(50));
    expect(timed.lines().find((l) => l.type === 'DETACHED')).toMatchObject({ reason: 'detached' });

    const untilExit = new Watch(target.pid, join(work, 'exit.jsonl'));
    await untilExit.attached();
    await target.ask('SIGUSR1', /^sequence done$/);
    target.child.kill('SIGTERM');
    expect(await target.exited).toBe(0);
    expect(await untilExit.exited).toBe(0);
    expect(untilExit.countsOf(target.pid)).toEqual(expectedCounts(50));
    expect(untilExit.lines().find((l) => l.type === 'DETACHED')).toMatchObject({ reason: 'exit' });
  });

  const services = [
    {
      name: 'python3',
      command: () => python,
      args: [
        '-c',
        [
          'import sys',
          'for line in sys.stdin:',
          '    b = bytearray(int(line))',
          '    del b',
          '    print("ok", flush=True)',
        ].join('\n'),
      ],
      // del frees it at once: glibc's malloc unmaps the block in the same request
      unmapsAtOnce: true,
    },
    {
      name: 'node',
      command: () => process.execPath,
      args: [
        '-e',
        "require('readline').createInterface({ input: process.stdin }).on('line', (l) => " +
          "{ Buffer.allocUnsafeSlow(Number(l)).fill(1); console.log('ok'); })",
      ],
      // a Buffer's memory is freed when the garbage collector gets to it
      unmapsAtOnce: false,
    },
  ];
  for (const service of services) {
    it(`${service.name} serving requests: its big allocations seen while watched, and it answers after each detach`, async () => {
      const child = spawn(service.command(), service.args, { env: cleanEnv() });
      cleanup.push(() => child.kill('SIGKILL'));
      let answers = 0;
      child.stdout.setEncoding('utf8').on('data', (c: string) => {
        answers += c.split('\n').filter((l) => l === 'ok').length;
      });
      const ask = async (bytes: number): Promise<void> => {
        const want = answers + 1;
        child.stdin.write(`${bytes}\n`);
        const deadline = Date.now() + 30_000;
        while (answers < want && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        expect(answers).toBe(want);
      };
      await ask(1000);
      for (let round = 0; round < 3; round++) {
        const watch = new Watch(child.pid!, join(work, `${service.name}-${round}.jsonl`));
        await watch.attached();
        await ask(48 << 20);
        expect(await watch.detach()).toBe(0);
        const lines = watch.lines();
        // glibc's malloc maps the 48 MiB itself: seen through the C library's patched entries.
        // (node's V8 also reserves large ranges of its own: not read-write, or of other sizes)
        const big = lines.filter(
          (l) =>
            l.type === 'MMAP' &&
            l.prot === 'rw-' &&
            (l.size as number) >= 48 << 20 &&
            (l.size as number) < (48 << 20) + (1 << 20),
        );
        expect(big).toHaveLength(1);
        if (service.unmapsAtOnce) {
          const address = big[0]!.address;
          expect(lines.filter((l) => l.type === 'MUNMAP' && l.address === address)).toHaveLength(1);
        }
        expect(lines.find((l) => l.type === 'DETACHED')).toMatchObject({ restored: true });
        await ask(48 << 20); // unwatched: it still answers
      }
      child.stdin.end();
      expect(await new Promise((resolve) => child.on('close', resolve))).toBe(0);
    });
  }

  it('a process forking while watched: the child (not watched) maps and exits with its status, the parent streams on', async () => {
    const script = [
      'import mmap, os, sys',
      'for line in sys.stdin:',
      '    pid = os.fork()',
      '    if pid == 0:',
      '        m = mmap.mmap(-1, 3 << 20); m[0] = 1; os._exit(7)',
      '    _, status = os.waitpid(pid, 0)',
      '    m = mmap.mmap(-1, 5 << 20); m.close()',
      '    print("child", os.waitstatus_to_exitcode(status), pid, flush=True)',
    ].join('\n');
    const service = spawn(python, ['-c', script], { env: cleanEnv() });
    cleanup.push(() => service.kill('SIGKILL'));
    let out = '';
    service.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    // Whole lines only: with PYTHONUNBUFFERED=1 in the environment (CI machines set it),
    // print() writes "child", " ", "7", ... one write(2) each, and a read can end mid-line.
    const childLines = (): string[] => out.match(/^child [^\n]*\n/gm) ?? [];
    const request = async (): Promise<number> => {
      const before = childLines().length;
      service.stdin.write('go\n');
      const deadline = Date.now() + 30_000;
      while (childLines().length === before) {
        if (Date.now() > deadline) throw new Error(`no child line in 30 s; stdout: ${out}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      const last = /^child (\d+) (\d+)\n$/.exec(childLines().at(-1)!);
      expect(last, out).not.toBeNull();
      expect(last![1]).toBe('7');
      return Number(last![2]);
    };
    await request();
    const watch = new Watch(service.pid!, join(work, 'fork.jsonl'));
    await watch.attached();
    const children = [await request(), await request()];
    expect(await watch.detach()).toBe(0);
    const lines = watch.lines();
    for (const child of children) expect(lines.filter((l) => l.pid === child)).toEqual([]);
    expect(lines.filter((l) => l.type === 'MMAP' && l.size === 3 << 20)).toEqual([]);
    expect(lines.filter((l) => l.type === 'MMAP' && l.size === 5 << 20)).toHaveLength(2);
    expect(lines.find((l) => l.type === 'DETACHED')).toMatchObject({ restored: true });
    await request(); // after the detach, forks still work
    service.stdin.end();
    expect(await new Promise((resolve) => service.on('close', resolve))).toBe(0);
  });

  it('refusals come from the injector: no such process, a statically linked target (left running)', async () => {
    const injector = (pid: number) =>
      spawnSync(injectorPath(), [String(pid), libraryPath(), 'heaphook_ucm_stream_start', '/x'], {
        encoding: 'utf8',
      });
    const watchSync = (pid: number) =>
      spawnSync(process.execPath, [heaphookBin, 'watch', '-p', String(pid)], {
        env: cleanEnv(),
        encoding: 'utf8',
        timeout: 60_000,
      });
    const gone = spawnSync('true').pid!;
    const noProcess = watchSync(gone);
    expect(noProcess.status).toBe(INJECT_EXIT_CODES['no-such-process']);
    const direct = injector(gone);
    expect(direct.status).toBe(INJECT_EXIT_CODES['no-such-process']);
    expect(noProcess.stderr).toBe(
      `heaphook watch: ${direct.stderr.replace(/^heaphook-inject: /, '')}`,
    );

    const staticTarget = spawn(release('ucm_watch_static'), [], { env: cleanEnv() });
    cleanup.push(() => staticTarget.kill('SIGKILL'));
    let out = '';
    staticTarget.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    while (!out.includes('ready')) await new Promise((r) => setTimeout(r, 5));
    const refused = watchSync(staticTarget.pid!);
    expect(refused.status).toBe(INJECT_EXIT_CODES.static);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/^heaphook watch: .*static/);
    staticTarget.stdin.write('still there?\n');
    while (!out.includes('alive')) await new Promise((r) => setTimeout(r, 5));
    staticTarget.stdin.end();
    expect(await new Promise((resolve) => staticTarget.on('close', resolve))).toBe(0);
  });
});

describe('heaphook watch -p PID on a busy process', () => {
  it('8 threads mapping, filling, checking and unmapping while attached and detached three times: every thread seen, nothing broken', async () => {
    const target = new Target(['--busy', '8', '1']);
    cleanup.push(() => target.child.kill('SIGKILL'));
    await target.line(/^ready \d+$/);
    for (let round = 0; round < 3; round++) {
      const watch = new Watch(target.pid, join(work, `busy-${round}.jsonl`), [
        '--events',
        'mmap,munmap',
        '--duration',
        '500ms',
      ]);
      await watch.attached();
      expect(await watch.exited, watch.stderr).toBe(0);
      const lines = watch.lines();
      const tids = new Set(lines.filter((l) => l.type === 'MMAP').map((l) => l.tid));
      expect(tids.size).toBe(8);
      expect(lines.find((l) => l.type === 'DETACHED')).toMatchObject({
        reason: 'detached',
        restored: true,
      });
      expect(await target.ask('SIGWINCH', /^state /)).toBe(
        'state mode=none got=libc code=original dlopen=libc',
      );
      expect(await watchThreadRemains(target.pid)).toBe(false);
    }
    target.child.kill('SIGTERM');
    expect(await target.exited).toBe(0);
    expect(Number(/^busy (\d+)$/m.exec(target.lines.join('\n'))![1])).toBeGreaterThan(0);
  });
});
