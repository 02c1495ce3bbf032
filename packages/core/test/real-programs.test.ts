// Real programs under the example backend: python3, node, a forking shell pipeline and a C
// compiler must behave exactly as they do on glibc's malloc, with nothing extra on stderr.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { backendLibrary, run, type RunResult } from './helpers/native.js';

const PYTHON_WORK = `
import json, hashlib
items = {f"key-{i}": [i, str(i) * 3, {"square": i * i}] for i in range(100_000)}
text = json.dumps(items, sort_keys=True)
back = json.loads(text)
assert back == items
words = sorted((v[1] for v in back.values()), key=lambda s: (len(s), s[::-1]))
digest = hashlib.sha256(("".join(words[:1000]) + text[-1000:]).encode()).hexdigest()
print(len(text), len(words), digest)
`;

const NODE_WORK = `
const crypto = require('node:crypto');
const map = new Map();
for (let i = 0; i < 200000; i++) map.set('k' + i, { i, s: String(i).repeat(3), a: [i, i * 2] });
const text = JSON.stringify([...map.entries()]);
const back = new Map(JSON.parse(text));
const sorted = [...back.keys()].sort();
const buffers = [];
for (let i = 0; i < 2000; i++) buffers.push(Buffer.alloc(1 + (i * 977) % 65536, i & 255));
const hash = crypto.createHash('sha256').update(text).update(sorted.slice(0, 5000).join()).digest('hex');
console.log(text.length, sorted[12345], buffers.reduce((n, b) => n + b.length, 0), hash);
`;

const PIPELINE =
  "seq 1 50000 | awk '{ print $1 % 97, $1 % 13 }' | sort | uniq -c | sort -k1,1nr -k2,2n | head -20 && " +
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
        free(texts[i]);
    }
    free(texts);
    while (head) { struct node *next = head->next; free(head); head = next; }
    char *grow = NULL;
    for (size_t size = 1; size < (1u << 24); size *= 3) { grow = realloc(grow, size); grow[size - 1] = 1; }
    free(grow);
    printf("%d %lu %s\\n", count, hash, texts == NULL ? "?" : "ok");
    return 0;
}
`;

let library: string;
let workDir: string;

beforeAll(() => {
  library = backendLibrary('example');
  workDir = mkdtempSync(join(tmpdir(), 'heaphook-real-programs-'));
});

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

/** Runs the command with and without the backend; both must succeed with the same output. */
function compareWithGlibc(command: string, args: string[], cwd?: string): RunResult {
  const reference = run(command, args, { cwd });
  expect(reference.stderr).toBe('');
  expect(reference.status).toBe(0);
  const preloaded = run(command, args, { cwd, preload: library });
  expect(preloaded.stderr).toBe(reference.stderr);
  expect(preloaded.stdout).toBe(reference.stdout);
  expect(preloaded.signal).toBeNull();
  expect(preloaded.status).toBe(0);
  expect(preloaded.stdout.length).toBeGreaterThan(0);
  return preloaded;
}

describe('real programs under the example backend', () => {
  it('the backend really serves them (heaphook_active_backend through ctypes, and the init log)', () => {
    const probe = run(
      'python3',
      [
        '-c',
        'import ctypes; f = ctypes.CDLL(None).heaphook_active_backend; f.restype = ctypes.c_char_p; print(f().decode())',
      ],
      { preload: library },
    );
    expect(probe.stdout).toBe('example\n');
    expect(probe.status).toBe(0);

    const logged = run(process.execPath, ['-e', 'console.log("hi")'], {
      preload: library,
      env: { HEAPHOOK_LOG_LEVEL: 'debug' },
    });
    expect(logged.stdout).toBe('hi\n');
    expect(logged.stderr).toMatch(
      /^heaphook\[\d+\] debug: backend example ready \(heaphook 0\.1\.0;/m,
    );
  });

  it('python3: json round trip, sorting, a dict of 100k items', () => {
    compareWithGlibc('python3', ['-c', PYTHON_WORK]);
  });

  it('node: maps, JSON, sorting, buffers', () => {
    compareWithGlibc(process.execPath, ['-e', NODE_WORK]);
  });

  it('sh: a forking pipeline with sort and uniq -c, and background subshells', () => {
    const result = compareWithGlibc('sh', ['-c', PIPELINE]);
    expect(result.stdout).toContain('SUB 1');
  });

  it('cc: compiles and links a C program under the backend, which then runs under it too', () => {
    writeFileSync(join(workDir, 'work.c'), C_PROGRAM);
    const compiled = run('cc', ['-O2', '-o', 'work', 'work.c'], { cwd: workDir, preload: library });
    expect(compiled.stderr).toBe('');
    expect(compiled.status).toBe(0);
    const result = compareWithGlibc(join(workDir, 'work'), []);
    expect(result.stdout).toMatch(/^100000 \d+ ok\n$/);
  });

  it('the passthrough backend (a C backend whose init allocates) uses the bootstrap arena', () => {
    const result = run('python3', ['-c', 'print(sorted({3: 1, 1: 2}))'], {
      preload: backendLibrary('passthrough'),
      env: { HEAPHOOK_LOG_LEVEL: 'debug' },
    });
    expect(result.stdout).toBe('[1, 3]\n');
    expect(result.status).toBe(0);
    const ready =
      /backend passthrough ready \(heaphook [\d.]+; bootstrap arena used (\d+) of (\d+) bytes\)/.exec(
        result.stderr,
      );
    expect(ready).not.toBeNull();
    expect(Number(ready![1])).toBeGreaterThan(4000);
    // The arena block init kept was moved into the backend by realloc, contents intact.
    expect(result.stderr).toMatch(
      /passthrough: arena block 0x[0-9a-f]+ moved into the backend at 0x[0-9a-f]+/,
    );
  });

  it('an exhausted bootstrap arena stops the program with one fatal line, not a crash', () => {
    const result = run('/bin/echo', ['main ran'], {
      preload: backendLibrary('passthrough'),
      env: { HEAPHOOK_PASSTHROUGH_EARLY_BYTES: '1M' },
    });
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(
      /^heaphook\[\d+\] fatal: the bootstrap arena \(256 KiB\) cannot serve 1000000 bytes: the backend allocates too much before it is ready\n$/,
    );
    expect(result.signal).toBe('SIGABRT');
  });
});
