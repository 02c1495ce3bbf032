// Real programs under libheaphook_tlsf.so: python3, node, a forking shell pipeline and a C
// compile must print exactly what they print on glibc's malloc — with the default pool, with
// a pool so small that it grows during the run, and in checking mode.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loggedAdditions, run, type RunResult } from './helpers/run.js';

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

const PIPELINE =
  "seq 1 30000 | awk '{ print $1 % 97, $1 % 13 }' | sort | uniq -c | sort -k1,1nr -k2,2n | head -20 && " +
  '{ for i in 1 2 3; do (echo sub $i | tr a-z A-Z) & done; wait; } | sort';

const C_PROGRAM = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int compare(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
int main(void) {
    char **texts = calloc(50000, sizeof *texts);
    for (int i = 0; i < 50000; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "node-%d", (i * 7919) % 50000);
        texts[i] = strdup(buf);
    }
    qsort(texts, 50000, sizeof *texts, compare);
    unsigned long hash = 5381;
    for (int i = 0; i < 50000; i++) {
        for (char *c = texts[i]; *c; c++) hash = hash * 33 + (unsigned char)*c;
        texts[i] = realloc(texts[i], 100);
        free(texts[i]);
    }
    free(texts);
    printf("%s %lu\\n", "sorted", hash);
    return 0;
}
`;

// Threads: Node workers transferring ArrayBuffers (allocated in one thread, freed in another),
// and Python threads building JSON at once.
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

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'heaphook-tlsf-'));
  writeFileSync(join(dir, 'work.c'), C_PROGRAM);
  writeFileSync(join(dir, 'workers.cjs'), NODE_WORKERS);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Program {
  command: string;
  args: string[];
}
const programs: Record<string, Program> = {
  python3: { command: 'python3', args: ['-c', PYTHON_WORK] },
  node: { command: process.execPath, args: ['-e', NODE_WORK] },
  'node worker threads': { command: process.execPath, args: ['workers.cjs'] },
  'python3 threads': { command: 'python3', args: ['-c', PYTHON_THREADS] },
  'shell pipeline': { command: 'sh', args: ['-c', PIPELINE] },
  'C compile (cc, cc1, as, ld) and run': {
    command: 'sh',
    args: ['-c', 'cc -O2 -o work work.c && ./work'],
  },
};

const modes: Record<string, Record<string, string>> = {
  'default pool': {},
  'small pool that grows': {
    INITIAL_MEMPOOL_SIZE: '1M',
    ADDITIONAL_MEMPOOL_SIZE: '1M',
    HEAPHOOK_LOG_LEVEL: 'info',
  },
  'checking mode': { HEAPHOOK_TLSF_CHECK: '1' },
};

const baseline = new Map<string, RunResult>();

describe.each(Object.entries(programs))('%s', (name, program) => {
  const runIt = (env?: Record<string, string>, tlsf = true) =>
    run(program.command, program.args, { tlsf, env, cwd: dir, timeoutMs: 115_000 });

  beforeAll(() => {
    baseline.set(name, runIt({}, false));
    expect(baseline.get(name)!.status).toBe(0);
  });

  it.each(Object.entries(modes))('%s: same output as glibc', (mode, env) => {
    const expected = baseline.get(name)!;
    const r = runIt(env);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(expected.stdout);
    if (mode === 'small pool that grows') {
      // The pool really grew during the run, and nothing but growth lines was logged.
      expect(loggedAdditions(r.stderr).length).toBeGreaterThan(0);
      const other = r.stderr.split('\n').filter((l) => l !== '' && !l.includes('pool grew by'));
      expect(other).toEqual(expected.stderr.split('\n').filter((l) => l !== ''));
    } else {
      expect(r.stderr).toBe(expected.stderr);
    }
  });
});
