/**
 * `heaphook-bench leakscan`: the cost of the leak check at exit for heaps of 1e5 and 1e6 live
 * blocks, heaphook's tracer (conservative stop-the-world scan, packages/heaptrack/native/leaks.c)
 * next to LeakSanitizer (gcc's -fsanitize=leak, Debian liblsan0) on the same program
 * (native/leakscan/leakscan.c: 90 % of the blocks reachable, 10 % leaked).
 *
 * Each cell is the median over `runs` of the wall time of a run with the exit check minus the
 * median of runs without it (HEAPHOOK_LEAK_CHECK=0 / LSAN_OPTIONS=detect_leaks=0); for heaphook
 * also the time the world was stopped, from the log's LEAK_CHECK record.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { listBackends } from '@heaphook/core';
import { decodeLog } from '@heaphook/heaptrack';

import { packageDir } from './paths.js';

export interface LeakScanRow {
  readonly blocks: number;
  /** heaphook: ns the world was stopped (median). */
  readonly heaphookStoppedNs: number;
  /** heaphook: wall ns the exit check adds (median with - median without). */
  readonly heaphookExitNs: number;
  readonly heaphookLeaked: number;
  /** LeakSanitizer: wall ns its exit check adds; undefined when -fsanitize=leak is missing. */
  readonly lsanExitNs: number | undefined;
  readonly lsanLeaked: number | undefined;
}

export interface LeakScanOptions {
  readonly sizes?: readonly number[];
  readonly runs?: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function compile(out: string, extra: string[]): boolean {
  const src = join(packageDir, 'native', 'leakscan', 'leakscan.c');
  const r = spawnSync('cc', ['-O1', '-g', ...extra, '-o', out, src], { encoding: 'utf8' });
  return r.status === 0;
}

function timed(cmd: string, args: string[], env: Record<string, string>) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, args, {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    maxBuffer: 64 << 20,
  });
  const ns = Number(process.hrtime.bigint() - t0);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
  return { ns, stderr: r.stderr };
}

async function heaphookCheck(dir: string): Promise<{ stoppedNs: number; leaked: number }> {
  const log = readdirSync(dir).find((f) => f.startsWith('heaplog.'));
  if (log === undefined) throw new Error(`no heaplog in ${dir}`);
  for await (const r of decodeLog(join(dir, log))) {
    if (r.type === 'leak_check') return { stoppedNs: r.durationNs, leaked: r.leakedBlocks };
  }
  throw new Error(`no LEAK_CHECK record in ${log}`);
}

export async function leakScan(options: LeakScanOptions = {}): Promise<LeakScanRow[]> {
  const sizes = options.sizes ?? [100_000, 1_000_000];
  const runs = options.runs ?? 3;
  const tracer = listBackends({ from: packageDir }).find((b) => b.name === 'heaptrack');
  if (tracer === undefined) {
    throw new Error('the heaptrack backend is not built: run `npx nx build heaptrack`');
  }
  const buildDir = join(packageDir, 'build', 'leakscan');
  mkdirSync(buildDir, { recursive: true });
  const plain = join(buildDir, 'leakscan');
  const lsan = join(buildDir, 'leakscan-lsan');
  if (!compile(plain, [])) throw new Error('cannot compile native/leakscan/leakscan.c with cc');
  const haveLsan = compile(lsan, ['-fsanitize=leak']);
  const rows: LeakScanRow[] = [];
  for (const n of sizes) {
    const on: number[] = [];
    const off: number[] = [];
    const stopped: number[] = [];
    let leaked = 0;
    const lsanOn: number[] = [];
    const lsanOff: number[] = [];
    let lsanLeaked: number | undefined;
    for (let i = 0; i < runs; i++) {
      for (const check of ['1', '0']) {
        const dir = mkdtempSync(join(tmpdir(), 'hh-leakscan-'));
        try {
          const env = {
            LD_PRELOAD: tracer.libraryPath,
            HEAPHOOK_LOG_DIR: dir,
            HEAPHOOK_LEAK_CHECK: check,
            HEAPHOOK_LEAK_TRACK: '1', // the table is kept either way: only the check differs
          };
          const { ns } = timed(plain, [String(n)], env);
          if (check === '1') {
            on.push(ns);
            const c = await heaphookCheck(dir);
            stopped.push(c.stoppedNs);
            leaked = c.leaked;
          } else {
            off.push(ns);
          }
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }
      if (haveLsan) {
        const base = 'exitcode=0:symbolize=0:print_suppressions=0';
        const withCheck = timed(lsan, [String(n)], { LSAN_OPTIONS: `${base}:detect_leaks=1` });
        lsanOn.push(withCheck.ns);
        const m = /leaked in (\d+) allocation/.exec(withCheck.stderr);
        lsanLeaked = m ? Number(m[1]) : 0;
        lsanOff.push(timed(lsan, [String(n)], { LSAN_OPTIONS: `${base}:detect_leaks=0` }).ns);
      }
    }
    rows.push({
      blocks: n,
      heaphookStoppedNs: median(stopped),
      heaphookExitNs: median(on) - median(off),
      heaphookLeaked: leaked,
      lsanExitNs: haveLsan ? median(lsanOn) - median(lsanOff) : undefined,
      lsanLeaked,
    });
  }
  return rows;
}

export function formatLeakScan(rows: readonly LeakScanRow[]): string {
  const ms = (ns: number | undefined) => (ns === undefined ? 'n/a' : (ns / 1e6).toFixed(1));
  const lines = [
    '| live blocks | heaphook: world stopped (ms) | heaphook: exit check (ms) | LeakSanitizer: exit check (ms) | leaked found (heaphook / LSan) |',
    '| ----------: | ---------------------------: | ------------------------: | -----------------------------: | -----------------------------: |',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.blocks} | ${ms(r.heaphookStoppedNs)} | ${ms(r.heaphookExitNs)} | ${ms(r.lsanExitNs)} | ${r.heaphookLeaked} / ${r.lsanLeaked ?? 'n/a'} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}
