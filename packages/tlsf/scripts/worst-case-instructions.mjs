#!/usr/bin/env node
// The instructions of every malloc-family call of a stress run, counted by callgrind: the
// measured worst case per call that the README's bound is checked against.
//
//   node scripts/worst-case-instructions.mjs [--calls N] [--json] [VAR=value ...]
//
// Runs build/Release/tlsf_stress (N calls per thread and round, default 4000) with
// libheaphook_tlsf.so preloaded under `valgrind --tool=callgrind`, collecting only inside
// malloc, free, calloc, realloc and posix_memalign (the exported entry points: the core's
// interposition included) and dumping after each of them, so every dump holds exactly one
// call. VAR=value pairs are added to the environment (e.g. HEAPHOOK_TLSF_PREFAULT=1).
// Prints, per entry point, the calls counted and the instructions per call: median, p99,
// p99.9, max; with --json, one JSON object.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ENTRY_POINTS = ['malloc', 'free', 'calloc', 'realloc', 'posix_memalign'];
const release = join(dirname(fileURLToPath(import.meta.url)), '..', 'build', 'Release');

function parseArgs(argv) {
  const opts = { calls: 4000, json: false, env: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--calls') opts.calls = Number(argv[++i]);
    else if (a === '--json') opts.json = true;
    else if (/^[A-Z_][A-Z0-9_]*=/.test(a)) {
      const eq = a.indexOf('=');
      opts.env[a.slice(0, eq)] = a.slice(eq + 1);
    } else {
      throw new Error(`unknown argument '${a}'; usage: [--calls N] [--json] [VAR=value ...]`);
    }
  }
  if (!Number.isInteger(opts.calls) || opts.calls <= 0)
    throw new Error('--calls wants a positive integer, e.g. --calls 4000');
  return opts;
}

function percentile(sorted, p) {
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1];
}

/** Runs the stress under callgrind; returns the instructions of each call, by entry point. */
export function measure({ calls = 4000, env = {} } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'tlsf-worst-case-'));
  try {
    const toggles = ENTRY_POINTS.flatMap((f) => [`--toggle-collect=${f}`, `--dump-after=${f}`]);
    const r = spawnSync(
      'valgrind',
      [
        '--tool=callgrind',
        '--trace-children=yes',
        '--collect-atstart=no',
        ...toggles,
        '--dump-instr=no',
        '--dump-line=no',
        `--callgrind-out-file=${join(dir, 'cg.%p')}`,
        'env',
        `LD_PRELOAD=${join(release, 'libheaphook_tlsf.so')}`,
        ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
        join(release, 'tlsf_stress'),
        String(calls),
      ],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    if (r.error) throw new Error(`valgrind could not run (${r.error.message}): install valgrind`);
    if (r.status !== 0) throw new Error(`tlsf_stress under callgrind failed:\n${r.stderr}`);
    const made = Number(/calls (\d+)/.exec(r.stdout)?.[1]);
    const costs = Object.fromEntries(ENTRY_POINTS.map((f) => [f, []]));
    for (const name of readdirSync(dir)) {
      const text = readFileSync(join(dir, name), 'utf8');
      if (!/^cmd:.*tlsf_stress/m.test(text)) continue; // env, before it runs the program
      const trigger = /^desc: Trigger: --dump-after=(\w+)/m.exec(text)?.[1];
      const ir = Number(/^summary: (\d+)/m.exec(text)?.[1]);
      if (trigger && costs[trigger]) costs[trigger].push(ir);
    }
    const perEntry = {};
    for (const [f, list] of Object.entries(costs)) {
      if (list.length === 0) continue;
      list.sort((a, b) => a - b);
      perEntry[f] = {
        calls: list.length,
        median: percentile(list, 50),
        p99: percentile(list, 99),
        p99_9: percentile(list, 99.9),
        max: list[list.length - 1],
      };
    }
    return { calls_made: made, env, per_entry: perEntry };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  const result = measure(opts);
  if (opts.json) {
    console.log(JSON.stringify(result));
  } else {
    console.log(`tlsf_stress: ${result.calls_made} calls; instructions per call (callgrind):`);
    console.log('entry point       calls  median     p99   p99.9      max');
    for (const [f, s] of Object.entries(result.per_entry))
      console.log(
        `${f.padEnd(15)} ${String(s.calls).padStart(7)} ${String(s.median).padStart(7)} ${String(s.p99).padStart(7)} ${String(s.p99_9).padStart(7)} ${String(s.max).padStart(8)}`,
      );
  }
}
