// Real programs with libheaphook_ucm.so preloaded (alone, and in front of a heaphook backend):
// every mmap, munmap, mremap, madvise, sbrk and brk they make goes through the hooks and must
// behave exactly as before.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { findBackend } from '@heaphook/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { libraryPath } from '../../src/index.js';

const example = findBackend('example').libraryPath;
let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'heaphook-ucm-programs-'));
  writeFileSync(
    join(work, 'hello.c'),
    '#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n',
  );
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

function run(preload: string, command: string, args: string[]) {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key !== 'LD_PRELOAD' && key !== 'FORCE_COLOR' && !key.startsWith('HEAPHOOK_')) {
      env[key] = value;
    }
  }
  env.LD_PRELOAD = preload;
  const result = spawnSync(command, args, { env, cwd: work, encoding: 'utf8', timeout: 100_000 });
  if (result.error) throw result.error;
  return result;
}

const preloads: Array<[string, () => string]> = [
  ['alone', () => libraryPath()],
  ['in front of the example backend', () => `${libraryPath()} ${example}`],
];

for (const [title, preload] of preloads) {
  describe(`real programs, ucm-hooks ${title}`, () => {
    it('python3', () => {
      const script =
        'import hashlib, json\n' +
        'd = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(100000)]\n' +
        'print(len(json.dumps(d)))';
      const result = run(preload(), 'python3', ['-c', script]);
      expect(result.stderr).toBe('');
      expect(result.stdout.trim()).toBe('6800000');
    });

    it('node', () => {
      const result = run(preload(), process.execPath, [
        '-e',
        'const a = []; for (let i = 0; i < 1e6; i++) a.push({ i }); process.stdout.write(`${a.length}\\n`)',
      ]);
      expect(result.stdout.trim()).toBe('1000000');
      expect(result.status).toBe(0);
    });

    it('a compiler', () => {
      const result = run(preload(), 'gcc', ['-O2', '-o', 'hello', 'hello.c']);
      expect(result.status, result.stderr).toBe(0);
      expect(spawnSync(join(work, 'hello'), { encoding: 'utf8' }).stdout).toBe('hi\n');
    });

    it('a shell pipeline', () => {
      const result = run(preload(), 'sh', ['-c', 'seq 1 100000 | sort -r | head -2 | tr 0-9 a-j']);
      expect(result.stdout).toBe('jjjjj\njjjji\n');
    });
  });
}
