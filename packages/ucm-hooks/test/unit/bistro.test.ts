// Code patching (native/bistro.c) on its own, through test/native/ucm_bistro_test.c: the C
// library's eight entries relocated, patched and restored while other threads call them, page
// protections put back (for GOT patching too), and entries that cannot be relocated refused.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const program = fileURLToPath(new URL('../../build/Release/ucm_bistro_test', import.meta.url));

function run(command: string) {
  if (!existsSync(program)) throw new Error(`${program} is missing: run nx build ucm-hooks`);
  const result = spawnSync(program, [command], { encoding: 'utf8', timeout: 110_000 });
  if (result.error) throw result.error;
  const output = result.stdout + result.stderr;
  expect(output).not.toMatch(/^FAIL/m);
  expect(result.status, output).toBe(0);
  return result.stdout;
}

describe('code patching (bistro)', () => {
  it("relocates the entries of the C library's mmap, munmap, mremap, madvise, brk, sbrk, shmat, shmdt", () => {
    const output = run('decode');
    for (const name of ['mmap', 'munmap', 'mremap', 'madvise', 'brk', 'sbrk', 'shmat', 'shmdt']) {
      expect(output).toMatch(new RegExp(`^  ${name}: \\d+ bytes moved$`, 'm'));
    }
  });

  it('patches and unpatches 200 times while 4 threads call mmap/munmap and malloc 64 MiB', () => {
    const output = run('threads');
    expect(output).toContain('ok: 200 patch/unpatch cycles with 4 threads mapping (200)');
    expect(output).toContain('ok: every patched cycle saw mmap and the 64 MiB malloc (200/200)');
    expect(output).toContain('ok: no call reached a hook after unpatch (0)');
    expect(output).toContain('ok: every entry is byte-for-byte as before');
  });

  it("puts every page's protection back, for code patching and for GOT patching", () => {
    const output = run('protect');
    expect(output.match(/^ok: /gm)).toHaveLength(5);
  });

  it('refuses an entry it cannot relocate, with one line naming the function', () => {
    const output = run('refuse');
    expect(output).toMatch(/bistro_short_jump: short relative jump at bistro_short_jump\+0x0/);
    expect(output).toMatch(/bistro_jump_into: the jump at bistro_jump_into\+0x\w+ lands inside/);
    expect(output).toMatch(/bistro_unknown: unknown instruction at bistro_unknown\+0x0/);
    expect(output).toMatch(/bistro_too_short: the function ends at bistro_too_short\+0x2/);
    expect(output).toContain('ok: a rip-relative entry is relocated (42, hook calls 1)');
    expect(output).toMatch(
      /signal in use: signal \d+ \(SIGRTMAX-3\) has a handler of the program's/,
    );
    expect(output).toContain("ok: a program's handler of the stop signal makes the patch refused");
  });
});
