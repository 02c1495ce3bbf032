/**
 * `heaphook recommend`: the pool size it prints is proven on the real backend. A program is
 * recorded, the recommendation computed, and the program run again under libheaphook_tlsf.so
 * with the recommended environment (through `heaphook run`, as printed): the backend logs no
 * pool growth at info level, and the program's output is right. A pool clearly below the
 * replayed minimum does log a growth, so the check is not vacuous.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  footprint,
  launchPython,
  launchXml,
  recommend,
  requestOf,
  runCommand,
  type Recommendation,
} from '../../src/index.js';
import type { EventRecord } from '../../src/decode/records.js';
import { heaphookBin, logsIn, python3, scratch, traced, workload } from '../helpers.js';

/** The line libheaphook_tlsf.so writes at info level on every growth (backend_pool.c). */
const GROWTH = /heaphook\[\d+\] info: tlsf: pool grew by \d+ bytes to \d+ bytes \(growth \d+\)/;
/** Stated in the README: the recommendation is at most this many times the recorded peak of
 * live bytes (for programs whose peak is a few MiB or more; the 1 MiB rounding dominates below). */
const MAX_RATIO_TO_PEAK = 2.5;

function heaphook(args: readonly string[], cwd: string, env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [heaphookBin, ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
}

function recordOne(name: string, command: string, args: string[], env = {}) {
  const dir = scratch(name);
  const run = traced(dir, command, args, env);
  expect(run.status, run.stderr).toBe(0);
  const logs = logsIn(dir);
  expect(logs).toHaveLength(1);
  return { dir, log: logs[0]!, stdout: run.stdout };
}

/** Runs the recorded command under the TLSF backend with these pool settings, info logging. */
function underTlsf(dir: string, r: Recommendation, env: Record<string, string>) {
  const e = Object.entries({ ...env, HEAPHOOK_LOG_LEVEL: 'info' }).flatMap(([k, v]) => [
    '-e',
    `${k}=${v}`,
  ]);
  return heaphook(['run', '-b', 'tlsf', ...e, '--', ...r.argv], dir);
}

/** The recommended command line, parsed back: `heaphook run -b tlsf -e K=V ... -- argv`. */
function printedRun(text: string): { env: Record<string, string>; argv: string[] } {
  const line = text.split('\n').find((l) => l.startsWith('heaphook run: '))!;
  const words = line.slice('heaphook run: '.length).split(' ');
  const dash = words.indexOf('--');
  const env: Record<string, string> = {};
  for (let i = 0; i < dash; i++) {
    if (words[i] === '-e') {
      const [k, v] = words[i + 1]!.split('=') as [string, string];
      env[k] = v;
    }
  }
  return { env, argv: words.slice(dash + 1) };
}

const PY_SCRIPT = `
import json
data = [{"k": i, "v": "x" * (i % 50), "l": list(range(i % 20))} for i in range(20000)]
text = json.dumps(data)
back = json.loads(text)
big = bytearray(3_000_000)
print(len(back), sum(d["k"] for d in back), len(text))
`;

/** Two threads, one after the other, each allocating and freeing ~10 MB of 600-byte objects
 * (through malloc: pymalloc keeps only objects up to 512 bytes); the first waits, alive, until
 * the second is done. */
const PY_THREADS = `
import threading
first_done, release = threading.Event(), threading.Event()
def work():
    keep = [bytes(600 + i % 7) for i in range(16000)]
    return sum(len(b) for b in keep)
result = []
def first():
    result.append(work())
    first_done.set()
    release.wait()
a = threading.Thread(target=first)
a.start()
first_done.wait()
print(result[0], work())
release.set()
a.join()
`;

describe('heaphook recommend', () => {
  it('workload: the printed recommendation runs without pool growth; below the minimum it grows', async () => {
    // Recorded through the collector, as the README shows.
    const dir = scratch('rec-workload');
    const rec = heaphook(['record', '-q', '-o', dir, '--', workload, 'counts'], dir);
    expect(rec.status, rec.stderr).toBe(0);
    const stdout = rec.stdout;
    const log = logsIn(dir)[0]!;
    const expected = JSON.parse(stdout) as { peakBytes: number };

    const cli = heaphook(['recommend', log], dir);
    expect(cli.status, cli.stderr).toBe(0);
    const r = await recommend(log);
    // The text carries the environment lines, the command, both launch forms and the figures.
    expect(cli.stdout).toContain(`\nINITIAL_MEMPOOL_SIZE=${r.initialPoolSize}\n`);
    expect(cli.stdout).toContain(`\nADDITIONAL_MEMPOOL_SIZE=${r.additionalPoolSize}\n`);
    expect(cli.stdout).toContain('\nHEAPHOOK_TLSF_THREAD_HEAPS=0\n');
    expect(cli.stdout).toContain(`heaphook run: ${runCommand(r)}\n`);
    expect(cli.stdout).toMatch(/<node pkg="[^"]+" exec="hh_test_workload" args="counts"[^>]*>/);
    expect(cli.stdout).toContain("    arguments=['counts'],\n");
    expect(cli.stdout).toMatch(/<env name="LD_PRELOAD" value="[^"]*libheaphook_tlsf\.so"\/>/);
    expect(cli.stdout).toContain(`<env name="INITIAL_MEMPOOL_SIZE" value="${r.initialPoolSize}"/>`);
    expect(cli.stdout).toContain('from launch_ros.actions import Node');
    expect(cli.stdout).toContain(`'INITIAL_MEMPOOL_SIZE': '${r.initialPoolSize}',`);
    expect(cli.stdout).toContain(`peak live bytes:      ${expected.peakBytes} `);
    expect(cli.stdout).toContain(`replayed minimum:     ${r.replayedMinimum} `);
    expect(cli.stdout).toMatch(/recommended \/ peak: {3}\d+\.\d\d\n/);

    // The figures: the tracer's peak is the workload's own count; the search's bracket is tight.
    expect(r.peakLiveBytes).toBe(expected.peakBytes);
    expect(r.lowerBound).toBeGreaterThan(r.peakLiveBytes);
    expect(r.replayedMinimum).toBeGreaterThanOrEqual(r.lowerBound);
    expect(r.replayedMinimum - r.largestFailing).toBeLessThanOrEqual(r.precision);
    // The first pass's prior (how far the log reached into a pool too large to fill) brackets
    // the minimum within 4%, so one more pass finds it and confirms the recommendation.
    expect(r.prior).toBeLessThanOrEqual(r.replayedMinimum);
    expect(r.replayedMinimum).toBeLessThanOrEqual(r.prior * 1.04 + 8192);
    expect(r.passes).toBe(2);
    expect(r.initialPoolSize).toBeGreaterThanOrEqual(r.replayedMinimum * 1.25);
    expect(r.initialPoolSize % (1 << 20)).toBe(0);
    expect(r.initialPoolSize).toBeLessThanOrEqual(MAX_RATIO_TO_PEAK * r.peakLiveBytes);
    expect(r.additionalPoolSize).toBeGreaterThanOrEqual(r.largestRequest);
    expect(r.threads).toBe(1);

    // The printed command, run as printed (plus info logging): no growth, the right output.
    const printed = printedRun(cli.stdout);
    expect(printed.argv).toEqual([workload, 'counts']);
    const ok = underTlsf(dir, r, printed.env);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toBe(stdout);
    expect(ok.stderr).not.toMatch(GROWTH);

    // The replay is exact for this deterministic program: its minimum serves, the largest pool
    // the search found too small grows, and so does one clearly below.
    const atMinimum = underTlsf(dir, r, {
      ...printed.env,
      INITIAL_MEMPOOL_SIZE: String(r.replayedMinimum),
    });
    expect(atMinimum.stderr).not.toMatch(GROWTH);
    for (const small of [r.largestFailing, Math.floor(r.replayedMinimum * 0.8)]) {
      const grew = underTlsf(dir, r, { ...printed.env, INITIAL_MEMPOOL_SIZE: String(small) });
      expect(grew.status, grew.stderr).toBe(0);
      expect(grew.stdout).toBe(stdout);
      expect(grew.stderr).toMatch(GROWTH);
    }
  });

  it('python3: the recommendation runs the script without pool growth; 80% of the minimum grows', async () => {
    const dir = scratch('rec-python');
    const script = join(dir, 'work.py');
    writeFileSync(script, PY_SCRIPT);
    const env = { PYTHONHASHSEED: '0' };
    const rec = traced(dir, python3, [script], env);
    expect(rec.status, rec.stderr).toBe(0);
    expect(rec.stdout).toBe('20000 199990000 1695890\n');
    const [log] = logsIn(dir);

    const r = await recommend(log!);
    expect(r.argv).toEqual([python3, script]);
    expect(r.peakLiveBytes).toBeGreaterThan(3_000_000); // the bytearray at least
    expect(r.initialPoolSize).toBeLessThanOrEqual(MAX_RATIO_TO_PEAK * r.peakLiveBytes);

    const ok = underTlsf(dir, r, { ...r.env, ...env });
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toBe('20000 199990000 1695890\n');
    expect(ok.stderr).not.toMatch(GROWTH);

    const small = Math.floor(r.replayedMinimum * 0.8);
    const grew = underTlsf(dir, r, { ...r.env, ...env, INITIAL_MEMPOOL_SIZE: String(small) });
    expect(grew.status, grew.stderr).toBe(0);
    expect(grew.stdout).toBe('20000 199990000 1695890\n');
    expect(grew.stderr).toMatch(GROWTH);
  });

  it('a multithreaded program gets one shared heap (HEAPHOOK_TLSF_THREAD_HEAPS=0), said in the output', async () => {
    const { dir, log, stdout } = recordOne('rec-threads', workload, ['trade', '2', '5000']);
    const cli = heaphook(['recommend', '--json', log], dir);
    expect(cli.status, cli.stderr).toBe(0);
    const json = JSON.parse(cli.stdout) as Recommendation & { threadHeaps: boolean };
    expect(json.threads).toBeGreaterThanOrEqual(2);
    expect(json.threadHeaps).toBe(false);
    expect(json.env.HEAPHOOK_TLSF_THREAD_HEAPS).toBe('0');
    const text = heaphook(['recommend', log], dir).stdout;
    expect(text).toContain(`This program has ${json.threads} threads.`);

    const ok = underTlsf(dir, json, json.env);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toBe(stdout);
    expect(ok.stderr).not.toMatch(GROWTH);
  });

  it('why thread heaps are off: two threads peaking one after the other need the sum of their peaks with them on', async () => {
    const dir = scratch('rec-python-threads');
    const script = join(dir, 'threads.py');
    writeFileSync(script, PY_THREADS);
    const rec = traced(dir, python3, [script]);
    expect(rec.status, rec.stderr).toBe(0);
    expect(rec.stdout).toBe('9647995 9647995\n');
    const r = await recommend(logsIn(dir)[0]!);
    expect(r.threads).toBe(2);
    expect(r.env.HEAPHOOK_TLSF_THREAD_HEAPS).toBe('0');

    const ok = underTlsf(dir, r, r.env);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toBe('9647995 9647995\n');
    expect(ok.stderr).not.toMatch(GROWTH);

    // The same pool with thread heaps on: the first thread's heap keeps the chunks of its
    // ~10 MB peak while the main thread borrows its own, so the pool grows.
    const on = underTlsf(dir, r, { ...r.env, HEAPHOOK_TLSF_THREAD_HEAPS: '1' });
    expect(on.status, on.stderr).toBe(0);
    expect(on.stdout).toBe('9647995 9647995\n');
    expect(on.stderr).toMatch(GROWTH);
  });

  it('--margin and --json: the margin is applied to the replayed minimum', async () => {
    const { dir, log } = recordOne('rec-margin', workload, ['counts']);
    const cli = heaphook(['recommend', '--json', '--margin', '0', '--round', '4096', log], dir);
    expect(cli.status, cli.stderr).toBe(0);
    const r = JSON.parse(cli.stdout) as Recommendation;
    expect(r.marginPercent).toBe(0);
    expect(r.initialPoolSize).toBe(Math.ceil(r.replayedMinimum / 4096) * 4096);
    for (const key of ['peakLiveBytes', 'replayedMinimum', 'ratioToPeak', 'additionalPoolSize']) {
      expect(r).toHaveProperty(key);
    }
    const bad = heaphook(['recommend', '--margin', 'lots', log], dir);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--margin: a percentage of at least 0');
  });

  it('refuses a sampled log with a clear error', () => {
    const { dir, log } = recordOne('rec-sampled', workload, ['counts'], {
      HEAPHOOK_SAMPLE_BYTES: '4096',
    });
    const cli = heaphook(['recommend', log], dir);
    expect(cli.status).toBe(2);
    expect(cli.stdout).toBe('');
    expect(cli.stderr).toMatch(
      /^heaphook: .*heaplog\.\d+\.log was recorded with sampling \(HEAPHOOK_SAMPLE_BYTES=4096\).*Record the program again without HEAPHOOK_SAMPLE_BYTES\.\n$/,
    );
  });

  it('refuses a truncated log with the offset, exit status 3 (a damaged log, as in report and dump)', () => {
    const { dir, log } = recordOne('rec-truncated', workload, ['counts']);
    const bytes = readFileSync(log);
    writeFileSync(log, bytes.subarray(0, bytes.length - 10));
    const cli = heaphook(['recommend', log], dir);
    expect(cli.status).toBe(3);
    expect(cli.stdout).toBe('');
    expect(cli.stderr).toMatch(
      /^heaphook: .*log truncated.* at byte offset \d+.*cannot be replayed/,
    );
  });

  it('launch snippets name the package and executable of a colcon-installed node', () => {
    const r = {
      argv: ['/ws/install/demo_nodes_cpp/lib/demo_nodes_cpp/talker', '--ros-args', '-p', 'a:=1'],
      exe: '/ws/install/demo_nodes_cpp/lib/demo_nodes_cpp/talker',
      env: { INITIAL_MEMPOOL_SIZE: '2097152', HEAPHOOK_TLSF_THREAD_HEAPS: '0' },
    } as unknown as Recommendation;
    expect(launchXml(r, '/lib/libheaphook_tlsf.so')).toBe(
      [
        '<node pkg="demo_nodes_cpp" exec="talker" args="--ros-args -p a:=1" output="screen">',
        '  <env name="LD_PRELOAD" value="/lib/libheaphook_tlsf.so"/>',
        '  <env name="INITIAL_MEMPOOL_SIZE" value="2097152"/>',
        '  <env name="HEAPHOOK_TLSF_THREAD_HEAPS" value="0"/>',
        '</node>',
      ].join('\n'),
    );
    expect(launchPython(r, '/lib/libheaphook_tlsf.so')).toBe(
      [
        'from launch_ros.actions import Node',
        '',
        'Node(',
        "    package='demo_nodes_cpp',",
        "    executable='talker',",
        "    arguments=['--ros-args', '-p', 'a:=1'],",
        "    output='screen',",
        '    additional_env={',
        "        'LD_PRELOAD': '/lib/libheaphook_tlsf.so',",
        "        'INITIAL_MEMPOOL_SIZE': '2097152',",
        "        'HEAPHOOK_TLSF_THREAD_HEAPS': '0',",
        '    },',
        ')',
      ].join('\n'),
    );
    expect(runCommand(r)).toBe(
      'heaphook run -b tlsf -e INITIAL_MEMPOOL_SIZE=2097152 -e HEAPHOOK_TLSF_THREAD_HEAPS=0 -- ' +
        '/ws/install/demo_nodes_cpp/lib/demo_nodes_cpp/talker --ros-args -p a:=1',
    );
  });

  it('maps each call to what the core hands the backend', () => {
    const e = (op: EventRecord['op'], size: number, align = 0, count = 1): EventRecord => ({
      type: 'event',
      op,
      time: 0,
      tid: 1,
      stack: 0,
      ptr: 16,
      oldPtr: 0,
      size,
      count,
      align,
      duration: undefined,
      weight: undefined,
      split: false,
    });
    expect(requestOf(e('malloc', 0))).toEqual({ size: 1, align: 1 });
    expect(requestOf(e('calloc', 8, 0, 10))).toEqual({ size: 80, align: 1 });
    expect(requestOf(e('posix_memalign', 100, 16))).toEqual({ size: 100, align: 1 });
    expect(requestOf(e('memalign', 100, 48))).toEqual({ size: 100, align: 64 });
    expect(requestOf(e('valloc', 100))).toEqual({ size: 100, align: 4096 });
    expect(requestOf(e('pvalloc', 100))).toEqual({ size: 4096, align: 4096 });
    expect(footprint({ size: 1, align: 1 })).toBe(32);
    expect(footprint({ size: 24, align: 1 })).toBe(32);
    expect(footprint({ size: 25, align: 1 })).toBe(48);
  });
});
