/**
 * @heaphook/core/testing — the real-program check every heaphook preload library must pass:
 * python3, node (with worker threads), python3 threads, a forking shell pipeline and a C
 * compile, each run with and without the library, and their outputs compared. Backends use it
 * from their vitest suites; a user's backend can too.
 *
 *   import { realPrograms, runProgram, prepareProgramDir } from '@heaphook/core/testing';
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** One real program: what to run, in a folder prepared by prepareProgramDir. */
export interface RealProgram {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
}

const PYTHON_WORK = `
import json, hashlib
items = {f"key-{i}": [i, str(i) * 3, {"square": i * i}] for i in range(60_000)}
text = json.dumps(items, sort_keys=True)
back = json.loads(text)
assert back == items
words = sorted((v[1] for v in back.values()), key=lambda s: (len(s), s[::-1]))
blobs = [bytearray(i % 5000 + 1) for i in range(3000)]
print(len(text), len(words), sum(map(len, blobs)), hashlib.sha256(text.encode()).hexdigest())
`;

const PYTHON_THREADS = `
import threading, json
res = []
def work(n):
    docs = [json.dumps({"k": i, "v": "x" * (i % 500), "n": n}) for i in range(20000)]
    res.append(sum(map(len, docs)))
threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
for t in threads: t.start()
for t in threads: t.join()
print(sorted(res))
`;

const NODE_WORK = `
const crypto = require('node:crypto');
const map = new Map();
for (let i = 0; i < 100000; i++) map.set('k' + i, { i, s: String(i).repeat(3), a: [i, i * 2] });
const text = JSON.stringify([...map.entries()]);
const sorted = [...new Map(JSON.parse(text)).keys()].sort();
const buffers = [];
for (let i = 0; i < 2000; i++) buffers.push(Buffer.alloc(1 + (i * 977) % 65536, i & 255));
const hash = crypto.createHash('sha256').update(text).update(sorted.slice(0, 5000).join()).digest('hex');
console.log(text.length, sorted[12345], buffers.reduce((n, b) => n + b.length, 0), hash);
`;

// ArrayBuffers allocated in one thread and freed in another.
const NODE_WORKERS = `
const { Worker, isMainThread, parentPort } = require('node:worker_threads');
if (isMainThread) {
  let total = 0, done = 0;
  for (let i = 0; i < 4; i++) {
    const w = new Worker(__filename);
    w.on('message', (m) => { total += m.byteLength; });
    w.on('exit', () => { if (++done === 4) console.log('total', total); });
  }
} else {
  for (let i = 0; i < 2000; i++) {
    const b = new ArrayBuffer(1000 + (i % 50) * 100);
    new Uint8Array(b).fill(i & 255);
    JSON.parse(JSON.stringify({ a: 'x'.repeat(i % 300), i }));
    parentPort.postMessage(b, [b]);
  }
}
`;

const PIPELINE =
  "seq 1 30000 | awk '{ print $1 % 97, $1 % 13 }' | sort | uniq -c | sort -k1,1nr -k2,2n | head -20 && " +
  '{ for i in 1 2 3; do (echo sub $i | tr a-z A-Z) & done; wait; } | sort';

const C_PROGRAM = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { struct node *next; char text[40]; };
static int compare(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
int main(void) {
    struct node *head = NULL;
    for (int i = 0; i < 100000; i++) {
        struct node *n = malloc(sizeof *n);
        snprintf(n->text, sizeof n->text, "node-%d", (i * 7919) % 100000);
        n->next = head;
        head = n;
    }
    char **texts = calloc(100000, sizeof *texts);
    int count = 0;
    for (struct node *n = head; n; n = n->next) texts[count++] = strdup(n->text);
    qsort(texts, count, sizeof *texts, compare);
    unsigned long hash = 5381;
    for (int i = 0; i < count; i++) {
        for (char *c = texts[i]; *c; c++) hash = hash * 33 + (unsigned char)*c;
        texts[i] = realloc(texts[i], 100);
        free(texts[i]);
    }
    free(texts);
    while (head) { struct node *next = head->next; free(head); head = next; }
    char *grow = NULL;
    for (size_t size = 1; size < (1u << 24); size *= 3) { grow = realloc(grow, size); grow[size - 1] = 1; }
    free(grow);
    printf("%d %lu\\n", count, hash);
    return 0;
}
`;

/** The programs, in the order they are usually reported. */
export const realPrograms: readonly RealProgram[] = [
  { name: 'python3', command: 'python3', args: ['work.py'] },
  { name: 'python3 threads', command: 'python3', args: ['threads.py'] },
  { name: 'node', command: process.execPath, args: ['work.cjs'] },
  { name: 'node worker threads', command: process.execPath, args: ['workers.cjs'] },
  { name: 'shell pipeline (fork, sort, uniq -c)', command: 'sh', args: ['-c', PIPELINE] },
  {
    name: 'C compile (cc, cc1, as, ld) and run',
    command: 'sh',
    args: ['-c', 'cc -O2 -o work work.c && ./work'],
  },
];

/** A fresh temporary folder holding the programs' scripts and sources; returns its path. */
export function prepareProgramDir(prefix = 'heaphook-real-programs-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(join(dir, 'work.py'), PYTHON_WORK);
  writeFileSync(join(dir, 'threads.py'), PYTHON_THREADS);
  writeFileSync(join(dir, 'work.cjs'), NODE_WORK);
  writeFileSync(join(dir, 'workers.cjs'), NODE_WORKERS);
  writeFileSync(join(dir, 'work.c'), C_PROGRAM);
  return dir;
}

/**
 * The environment of a test run: ours, less anything that would change heaphook's behaviour
 * (LD_PRELOAD, HEAPHOOK_*, the TLSF pool sizes), plus extra.
 */
export function cleanEnv(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'LD_PRELOAD' || key.startsWith('HEAPHOOK_') || key.endsWith('_MEMPOOL_SIZE')) {
      continue;
    }
    env[key] = value;
  }
  return { ...env, ...extra };
}

export interface ProgramRunOptions {
  /** Libraries to preload, in order (absolute paths); none for the glibc reference run. */
  readonly preload?: string | readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
  readonly input?: string;
  readonly timeoutMs?: number;
}

export interface ProgramRunResult {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `command` synchronously with exactly `env`, the rest of `options` (cwd, input, timeout)
 * applied as runProgram documents; the result's output as text. Shared by runProgram and the
 * emulated runs (emulation.ts), which differ only in how they preload.
 */
export function spawnForTest(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: ProgramRunOptions,
  defaultTimeoutMs: number,
): ProgramRunResult {
  const result = spawnSync(command, [...args], {
    env,
    cwd: options.cwd,
    input: options.input,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? defaultTimeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error) throw result.error;
  return {
    status: result.status,
    signal: result.signal,
    stdout: result.stdout,
    stderr: result.stderr,
  };
}

/** Runs a program synchronously in a clean environment, optionally with libraries preloaded. */
export function runProgram(
  command: string,
  args: readonly string[],
  options: ProgramRunOptions = {},
): ProgramRunResult {
  const env = cleanEnv(options.env);
  const preload = typeof options.preload === 'string' ? [options.preload] : options.preload;
  if (preload !== undefined && preload.length > 0) env.LD_PRELOAD = preload.join(':');
  return spawnForTest(command, args, env, options, 110_000);
}

export {
  runSecureProbe,
  secureProbeUnavailable,
  secureRunProblems,
  type SecureProbeOptions,
  type SecureProbeResult,
} from './secure-probe.js';

export {
  AARCH64_LOADER,
  AARCH64_PYTHON,
  aarch64ConformanceProblems,
  aarch64EmulationMissing,
  CONFORMANCE_GROUPS,
  EMULATED_CONFORMANCE_ENV,
  EMULATED_CONFORMANCE_GROUPS,
  isAarch64Elf,
  arm64BuildMissing,
  arm64ReleaseDir,
  runAarch64,
} from './emulation.js';

export { processStates, settledValue, threadNames, withinOrExplain } from './test-process-state.js';

export { allChecksPassed, unitChecks, type UnitChecks } from './unit-checks.js';

export {
  runSanitized,
  sanitizedProgramMissing,
  sanitizerOptions,
  sanitizerReport,
  type SanitizedRun,
} from './sanitizers.js';

export { missing, skipOutsideCI, unmet, type PrerequisiteName } from './prerequisites.js';

export {
  aarch64PythonSkip,
  arm64Tier,
  coreNativeFile,
  corePackageDir,
  heaphookBin,
  secureExecutionSkip,
  type Arm64Tier,
} from './test-tiers.js';
