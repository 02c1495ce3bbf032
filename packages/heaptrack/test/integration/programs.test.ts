/**
 * Real programs built without frame pointers run correctly under the tracer, standalone and
 * under `heaphook record`, and their logs decode.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { framesOf, record, summarize, Symbolizer } from '../../src/index.js';
import { logsIn, python3, scratch, traced } from '../helpers.js';

async function decodesCleanly(log: string): Promise<void> {
  const s = await summarize(log);
  expect(s.events).toBeGreaterThan(0);
  expect(s.anomalies).toBe(0);
  expect(s.end?.reason).toBe('exit');
  // Stacks are recorded and reach past the allocator into the program.
  const deepest = Math.max(...[...s.stacks.keys()].map((id) => framesOf(s.stacks, id).length));
  expect(deepest).toBeGreaterThan(5);
}

const pyScript =
  'import json, collections\n' +
  'd = collections.Counter(json.dumps(list(range(i))) for i in range(400))\n' +
  'print(sum(len(k) for k in d))';

describe('real programs', () => {
  it('python3 standalone', async () => {
    const dir = scratch('python');
    const run = traced(dir, python3, ['-c', pyScript]);
    expect(run.status, run.stderr).toBe(0);
    const untraced = traced(dir, python3, ['-c', pyScript], {}, []);
    expect(run.stdout).toBe(untraced.stdout);
    const logs = logsIn(dir);
    expect(logs).toHaveLength(1);
    await decodesCleanly(logs[0]!);
  });

  it('python3 starting subprocesses (vfork + exec) standalone: a log per program', async () => {
    const dir = scratch('python-subprocess');
    const script =
      'import subprocess\n' +
      "print(subprocess.run(['sh', '-c', 'echo hi; seq 3 | wc -l'], capture_output=True, text=True).stdout, end='')";
    const run = traced(dir, python3, ['-c', script]);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('hi\n3\n');
    const programs: string[] = [];
    for (const log of logsIn(dir)) {
      const s = await summarize(log);
      expect(s.anomalies).toBe(0);
      programs.push(s.process?.argv[0] ?? '?');
    }
    for (const p of [python3, 'sh', 'seq', 'wc']) expect(programs).toContain(p);
  });

  it('python3 multiprocessing workers (fork, then os._exit) standalone: every log complete', async () => {
    const dir = scratch('python-multiprocessing');
    // Each worker keeps 50 buffers of 100,000 bytes (above pymalloc's limit: one malloc each)
    // alive until it leaves through os._exit, as multiprocessing's workers always do.
    const script =
      'import multiprocessing as mp\n' +
      'def work(q):\n' +
      '    global kept\n' +
      '    kept = [bytearray(100000) for _ in range(50)]\n' +
      '    q.put(sum(len(b) for b in kept))\n' +
      "if __name__ == '__main__':\n" +
      "    mp.set_start_method('fork')\n" +
      '    q = mp.Queue()\n' +
      '    ps = [mp.Process(target=work, args=(q,)) for _ in range(3)]\n' +
      '    for p in ps: p.start()\n' +
      '    print(sum(q.get() for _ in ps))\n' +
      '    for p in ps: p.join()';
    const run = traced(dir, python3, ['-c', script]);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('15000000\n');
    const logs = logsIn(dir);
    expect(logs).toHaveLength(4);
    const workers = [];
    for (const log of logs) {
      const s = await summarize(log);
      expect(s.anomalies).toBe(0);
      if (s.process?.forkChild === true) workers.push(s);
      else expect(s.end?.reason).toBe('exit');
    }
    expect(workers).toHaveLength(3);
    for (const s of workers) {
      expect(s.end?.reason).toBe('lost'); // os._exit: no exit path, every record written
      expect(s.liveBytes).toBeGreaterThanOrEqual(50 * 100000);
    }
  });

  it('node under heaphook record', async () => {
    const dir = scratch('node');
    const script =
      'const m = new Map(); for (let i = 0; i < 20000; i++) m.set(i, String(i)); process.stdout.write(String(m.size))';
    const result = await record(process.execPath, ['-e', script], {
      outputDir: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe('20000');
    expect(result.logs).toHaveLength(1);
    await decodesCleanly(result.logs[0]!.path);
    // Stacks cross V8's JIT frames (no unwind tables) down to node's own main.
    const s = await summarize(result.logs[0]!.path);
    const symbolizer = new Symbolizer(s.modules);
    const parents = new Set([...s.stacks.values()].map((n) => n.parent));
    let crossed = 0;
    for (const id of s.stacks.keys()) {
      if (parents.has(id)) continue;
      const pcs = framesOf(s.stacks, id);
      const first = pcs.findIndex((pc) => symbolizer.moduleOf(pc) === undefined);
      if (first < 0 || !pcs.slice(first).some((pc) => symbolizer.moduleOf(pc) !== undefined))
        continue;
      const frames = await symbolizer.symbolize(pcs);
      const names = pcs.flatMap((pc) => (frames.get(pc) ?? []).map((f) => f.function));
      if (names.some((n) => n.startsWith('node::Start'))) crossed++;
      if (crossed > 0) break;
    }
    expect(crossed).toBeGreaterThan(0);
  });

  it('a compiler under heaphook record: gcc, cc1, as, collect2 and ld each get a log', async () => {
    const dir = scratch('compiler');
    writeFileSync(
      join(dir, 'hi.c'),
      '#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n',
    );
    const result = await record('gcc', ['-O2', '-o', join(dir, 'hi'), join(dir, 'hi.c')], {
      outputDir: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(result.status, result.stderr).toBe(0);
    expect(spawnSync(join(dir, 'hi'), { encoding: 'utf8' }).stdout).toBe('hi\n');
    const programs: string[] = [];
    for (const log of result.logs) {
      const s = await summarize(log.path);
      expect(s.anomalies).toBe(0);
      expect(s.end?.reason).toBe('exit');
      programs.push(basename(s.process?.argv[0] ?? '?'));
    }
    for (const p of ['gcc', 'cc1', 'as', 'ld']) expect(programs).toContain(p);
  });

  it('a forking shell pipeline under heaphook record: one log per process', async () => {
    const dir = scratch('pipeline');
    const result = await record(
      '/bin/sh',
      ['-c', 'seq 1 20000 | sort -rn | head -3 | tr "\\n" " "'],
      { outputDir: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe('20000 19999 19998');
    // sh, seq, sort, head, tr (the forked shells exec them: the same pid gets a second log)
    expect(result.logs.length).toBeGreaterThanOrEqual(5);
    const programs = new Set<string>();
    for (const log of result.logs) {
      const s = await summarize(log.path);
      expect(s.anomalies).toBe(0);
      if (s.process !== undefined) programs.add(s.process.argv[0] ?? '');
    }
    for (const p of ['seq', 'sort', 'head', 'tr']) expect(programs).toContain(p);
  });

  it('a forking shell pipeline standalone', async () => {
    const dir = scratch('pipeline-standalone');
    const run = traced(dir, '/bin/sh', ['-c', 'seq 1 5000 | sort -rn | head -2']);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('5000\n4999\n');
    const logs = logsIn(dir);
    expect(logs.length).toBeGreaterThanOrEqual(4);
    for (const log of logs) await summarize(log);
  });
});
