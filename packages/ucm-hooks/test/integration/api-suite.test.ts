// The libucm-API event suite (test/native/ucm_api_suite.c, 14 checks a libucm user makes first,
// among them "64 MiB mallocs (mmap-served by glibc) raise VM events"), built against heaphook's
// ucm_compat.h and run linked, preloaded, with GOT patching and with code patching; and the
// same source built against UCX's libucm, the reference, in its reloc and bistro modes.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { skipOutsideCI } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const release = fileURLToPath(new URL('../../build/Release/', import.meta.url));
const lib = release + 'libheaphook_ucm.so';
const suite = release + 'ucm_api_suite';
const libucmSuite = release + 'ucm_api_suite_libucm';

function run(program: string, env: Record<string, string>) {
  if (!existsSync(program)) throw new Error(`${program} is missing: run nx build ucm-hooks`);
  const clean: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'LD_PRELOAD' || key.startsWith('HEAPHOOK_') || key.startsWith('UCX_')) continue;
    clean[key] = value;
  }
  const result = spawnSync(program, [], {
    env: { ...clean, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (result.error) throw result.error;
  return result;
}

const heaphookModes: Array<[string, Record<string, string>, string]> = [
  ['linked (the library before libc in the link)', {}, 'preload'],
  ['preloaded', { LD_PRELOAD: lib }, 'preload'],
  ['linked, GOT patching forced', { HEAPHOOK_MEM_MMAP_HOOK_MODE: 'reloc' }, 'reloc'],
  ['code patching (bistro)', { HEAPHOOK_MEM_MMAP_HOOK_MODE: 'bistro' }, 'bistro'],
  ['code patching through the UCX spelling', { UCX_MEM_MMAP_HOOK_MODE: 'bistro' }, 'bistro'],
];

describe('the libucm-API event suite against heaphook', () => {
  for (const [title, env, mode] of heaphookModes) {
    it(`${title}: 14 of 14`, () => {
      const result = run(suite, { ...env, HEAPHOOK_MEM_LOG_LEVEL: 'info' });
      const output = result.stdout + result.stderr;
      expect(result.stderr, output).toContain(`memory events installed (${mode} mode)`);
      expect(result.stdout, output).toContain(
        'ok 8 - 64 MiB mallocs (mmap-served by glibc) raise VM events',
      );
      expect(result.stdout, output).toMatch(/^14 of 14 checks passed$/m);
      expect(result.status, output).toBe(0);
    });
  }

  it('HEAPHOOK_MEM_MALLOC_HOOKS=no: glibc malloc mappings are not seen, and only they', () => {
    const result = run(suite, { HEAPHOOK_MEM_MALLOC_HOOKS: 'no' });
    const failed = result.stdout.match(/^not ok \d+/gm);
    expect(failed, result.stdout).toEqual(['not ok 8', 'not ok 9']);
    expect(result.stdout).toMatch(/^12 of 14 checks passed$/m);
    expect(result.status).toBe(1);
  });

  it('HEAPHOOK_MEM_MMAP_HOOK_MODE=preload when the library is not loaded first is refused', () => {
    // LD_PRELOAD=libc.so.6 puts the C library ahead of libheaphook_ucm.so in the global scope.
    const result = run(suite, {
      HEAPHOOK_MEM_MMAP_HOOK_MODE: 'preload',
      LD_PRELOAD: 'libc.so.6',
    });
    expect(result.stderr).toMatch(
      /error: HEAPHOOK_MEM_MMAP_HOOK_MODE=preload but libheaphook_ucm.so is not loaded first/,
    );
    expect(result.stdout).toMatch(/^not ok 1 - ucm_set_event_handler/m);
  });

  it('HEAPHOOK_MEM_ALLOC_ALIGN: a power of two is accepted and said to have no effect', () => {
    const result = run(suite, { HEAPHOOK_MEM_ALLOC_ALIGN: '64' });
    expect(result.stderr).toMatch(
      /warn: HEAPHOOK_MEM_ALLOC_ALIGN=64 has no effect: the process keeps its own malloc/,
    );
    expect(result.stdout).toMatch(/^14 of 14 checks passed$/m);
    expect(result.status).toBe(0);
    const unset = run(suite, {});
    expect(unset.stderr).not.toContain('ALLOC_ALIGN');
  });

  it('HEAPHOOK_MEM_ALLOC_ALIGN / UCX_MEM_ALLOC_ALIGN: anything else stops the program', () => {
    const cases: [string, string][] = [
      ['HEAPHOOK_MEM_ALLOC_ALIGN', '48'],
      ['HEAPHOOK_MEM_ALLOC_ALIGN', '0'],
      ['UCX_MEM_ALLOC_ALIGN', '48'],
      ['UCX_MEM_ALLOC_ALIGN', 'abc'],
    ];
    for (const [name, value] of cases) {
      const result = run(suite, { [name]: value });
      expect(result.status, `${name}=${value}`).toBe(78);
      expect(result.stdout).toBe('');
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toContain(`${name}="${value}"`);
    }
  });

  it('a mode that does not exist stops the program with one line', () => {
    const result = run(suite, { HEAPHOOK_MEM_MMAP_HOOK_MODE: 'valgrind' });
    expect(result.status).toBe(78);
    expect(result.stderr).toContain('HEAPHOOK_MEM_MMAP_HOOK_MODE');
  });
});

describe.skipIf(
  skipOutsideCI(!existsSync(libucmSuite) && 'UCX libucm not built: install libucx-dev'),
)("the same suite against UCX's libucm (the reference)", () => {
  for (const mode of ['reloc', 'bistro']) {
    it(`UCX_MEM_MMAP_HOOK_MODE=${mode}: 14 of 14`, () => {
      const result = run(libucmSuite, { UCX_MEM_MMAP_HOOK_MODE: mode });
      expect(result.stdout, result.stdout + result.stderr).toMatch(/^14 of 14 checks passed$/m);
    });
  }
});
