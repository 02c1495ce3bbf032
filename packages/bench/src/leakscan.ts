/**
 * `heaphook-bench leakscan`: the cost of the leak check at exit for heaps of 1e5 and 1e6 live
 * blocks, heaphook's tracer (conservative stop-the-world scan, packages/heaptrack/native/leaks/mark.c)
 * next to LeakSanitizer on the same program (native/leakscan/leakscan.c: 90 % of the blocks
 * reachable, 10 % leaked), built with each compiler the machine has: clang's -fsanitize=leak
 * (Debian clang and libclang-rt-14-dev) and gcc's (Debian liblsan0).
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
  /** LeakSanitizer, one entry per compiler in LSAN_COMPILERS, in that order. */
  readonly lsan: readonly LsanCell[];
}

export interface LsanCell {
  readonly compiler: string;
  /** Wall ns its exit check adds; undefined when the compiler cannot build -fsanitize=leak. */
  readonly exitNs: number | undefined;
  readonly leaked: number | undefined;
}

/** The LeakSanitizers compared: clang's (the reference the issue names) and gcc's. */
export const LSAN_COMPILERS = [
  { name: 'clang', command: 'clang', install: 'clang libclang-rt-14-dev' },
  { name: 'gcc', command: 'cc', install: 'liblsan0' },
] as const;

export interface LeakScanOptions {
  readonly sizes?: readonly number[];
  readonly runs?: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function compile(compiler: string, out: string, extra: string[]): boolean {
  const src = join(packageDir, 'native', 'leakscan', 'leakscan.c');
  const r = spawnSync(compiler, ['-O1', '-g', ...extra, '-o', out, src], { encoding: 'utf8' });
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
  if (!compile('cc', plain, []))
    throw new Error('cannot compile native/leakscan/leakscan.c with cc');
  const sanitized = LSAN_COMPILERS.map((c) => {
    const program = join(buildDir, `leakscan-lsan-${c.name}`);
    return { ...c, program, built: compile(c.command, program, ['-fsanitize=leak']) };
  });
  const rows: LeakScanRow[] = [];
  for (const n of sizes) {
    const on: number[] = [];
    const off: number[] = [];
    const stopped: number[] = [];
    let leaked = 0;
    const lsanOn = sanitized.map((): number[] => []);
    const lsanOff = sanitized.map((): number[] => []);
    const lsanLeaked: Array<number | undefined> = sanitized.map(() => undefined);
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
      sanitized.forEach((c, k) => {
        if (!c.built) return;
        const base = 'exitcode=0:symbolize=0:print_suppressions=0';
        const on = timed(c.program, [String(n)], { LSAN_OPTIONS: `${base}:detect_leaks=1` });
        lsanOn[k]!.push(on.ns);
        const m = /leaked in (\d+) allocation/.exec(on.stderr);
        lsanLeaked[k] = m ? Number(m[1]) : 0;
        const off = timed(c.program, [String(n)], { LSAN_OPTIONS: `${base}:detect_leaks=0` });
        lsanOff[k]!.push(off.ns);
      });
    }
    rows.push({
      blocks: n,
      heaphookStoppedNs: median(stopped),
      heaphookExitNs: median(on) - median(off),
      heaphookLeaked: leaked,
      lsan: sanitized.map((c, k) => ({
        compiler: c.name,
        exitNs: c.built ? median(lsanOn[k]!) - median(lsanOff[k]!) : undefined,
        leaked: lsanLeaked[k],
      })),
    });
  }
  return rows;
}

export function formatLeakScan(rows: readonly LeakScanRow[]): string {
  const ms = (ns: number | undefined) => (ns === undefined ? 'n/a' : (ns / 1e6).toFixed(1));
  const names = LSAN_COMPILERS.map((c) => c.name);
  const header = [
    'live blocks',
    'heaphook: world stopped (ms)',
    'heaphook: exit check (ms)',
    ...names.map((c) => `LeakSanitizer (${c}): exit check (ms)`),
    `leaked found (heaphook / ${names.map((c) => `LSan ${c}`).join(' / ')})`,
  ];
  const lines = [`| ${header.join(' | ')} |`, `| ${header.map(() => '---:').join(' | ')} |`];
  for (const r of rows) {
    const cells = [
      String(r.blocks),
      ms(r.heaphookStoppedNs),
      ms(r.heaphookExitNs),
      ...r.lsan.map((c) => ms(c.exitNs)),
      [r.heaphookLeaked, ...r.lsan.map((c) => c.leaked ?? 'n/a')].join(' / '),
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  const missing = LSAN_COMPILERS.filter((c) =>
    rows.some((r) => r.lsan.some((l) => l.compiler === c.name && l.exitNs === undefined)),
  );
  for (const c of missing) lines.push('', `LeakSanitizer (${c.name}): n/a: install ${c.install}`);
  return `${lines.join('\n')}\n`;
}
