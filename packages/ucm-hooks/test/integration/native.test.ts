// The memory events of libheaphook_ucm.so, the behaviour of UCX's ucm tests
// (test/native/ucm_events.c), in both install modes: preloaded, and dlopen'ed into a running
// program (GOT patching plus the dlopen hook). Under a heaphook backend (the core's example
// allocator, which maps through heaphook_os_map), malloc and realloc raise VM events too.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { findBackend } from '@heaphook/core';
import { describe, expect, it } from 'vitest';

const release = fileURLToPath(new URL('../../build/Release/', import.meta.url));
const lib = release + 'libheaphook_ucm.so';
const program = release + 'ucm_events';
const dlLib = release + 'libucm_test_lib.so';
const example = findBackend('example').libraryPath;

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'LD_PRELOAD' || key.startsWith('HEAPHOOK_') || key.startsWith('UCX_')) continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

function events(mode: string, group: string, env: Record<string, string> = {}) {
  for (const path of [lib, program, dlLib]) {
    if (!existsSync(path)) throw new Error(`${path} is missing: run nx build ucm-hooks`);
  }
  const result = spawnSync(program, [mode, group, dlLib], {
    env: cleanEnv(env),
    encoding: 'utf8',
    timeout: 100_000,
  });
  if (result.error) throw result.error;
  return result;
}

const groups = [
  'selftest',
  'mmap',
  'map_fixed',
  'mremap',
  'shm',
  'shm_preinstalled',
  'shm_threads',
  'sbrk',
  'madvise',
  'modify',
  'failed',
  'dlopen',
  'dlopen_threads',
  'counts',
  'handler_malloc',
  'add_remove',
  'threads',
  'fork',
];

const modes: Array<[string, string, Record<string, string>]> = [
  ['preload', 'preload', { LD_PRELOAD: lib }],
  ['relocation (dlopen into a running program)', `reloc:${lib}`, {}],
  [
    'code patching (bistro, dlopen into a running program)',
    `reloc:${lib}`,
    { HEAPHOOK_MEM_MMAP_HOOK_MODE: 'bistro' },
  ],
];

for (const [title, mode, env] of modes) {
  describe(`events, ${title}`, () => {
    for (const group of groups) {
      it(group, () => {
        const result = events(mode, group, env);
        const output = result.stdout + result.stderr;
        const installed =
          env.HEAPHOOK_MEM_MMAP_HOOK_MODE ?? (mode === 'preload' ? 'preload' : 'reloc');
        expect(result.stdout, output).toContain(`mode ${installed}`);
        expect(result.stdout, output).toMatch(new RegExp(`^ok ${group}$`, 'm'));
        expect(result.stdout, output).toMatch(/: \d+ checks, 0 failed/);
        expect(result.status, output).toBe(0);
      });
    }
  });
}

describe('allocator mappings', () => {
  it('small and large malloc, realloc and free raise VM events under a heaphook backend', () => {
    if (!existsSync(example)) throw new Error(`${example} is missing: run nx build core`);
    const result = events('preload', 'malloc', { LD_PRELOAD: `${lib} ${example}` });
    expect(result.stdout + result.stderr).toMatch(/malloc: \d+ checks, 0 failed/);
    expect(result.status).toBe(0);
  });

  it("and in relocation mode: the backend loaded first, ucm-hooks dlopen'ed later", () => {
    const result = events(`reloc:${lib}`, 'malloc', { LD_PRELOAD: example });
    expect(result.stdout).toContain('mode reloc');
    expect(result.stdout + result.stderr).toMatch(/malloc: \d+ checks, 0 failed/);
    expect(result.status).toBe(0);
  });

  it('the whole suite passes under a heaphook backend too (handlers that allocate)', () => {
    const result = events('preload', 'all', { LD_PRELOAD: `${lib} ${example}` });
    expect(result.stdout + result.stderr).toMatch(/all: \d+ checks, 0 failed/);
    expect(result.status).toBe(0);
  });
});

describe('self-test', () => {
  it('names the events that do not fire when a hook is not in place', () => {
    // The program's GOT entry of mmap is put back; without the malloc hooks nothing else
    // leads its mmap calls to the hook (with them, the C library's patched entry does).
    const result = events(`reloc:${lib}`, 'selftest_broken', { HEAPHOOK_MEM_MALLOC_HOOKS: 'no' });
    const output = result.stdout + result.stderr;
    expect(result.stderr).toMatch(
      /error: self-test \(reloc mode\): these events do not fire: MMAP\n/,
    );
    expect(result.stdout, output).toMatch(/selftest_broken: \d+ checks, 0 failed/);
    expect(result.status, output).toBe(0);
  });
});

describe("a handler registered from another library's constructor, before ours ran", () => {
  // LD_PRELOAD="libheaphook_ucm.so libucm_early_lib.so": the early library's constructor runs
  // first (as heaptrack's tracer's does under heaphook record) and registers a VM handler.
  const early = (env: Record<string, string>) => {
    const result = spawnSync(release + 'ucm_early_test', [], {
      env: cleanEnv({ LD_PRELOAD: `${lib} ${release}libucm_early_lib.so`, ...env }),
      encoding: 'utf8',
      timeout: 30_000,
    });
    if (result.error) throw result.error;
    return result;
  };

  it("glibc malloc's mappings and trims raise events, without the hooks recursing", () => {
    const result = early({});
    expect(result.status, result.stdout + result.stderr).toBe(0);
    const [, mapped, unmapped] = /early: mapped (\d+) unmapped (\d+)/.exec(result.stdout) ?? [];
    expect(Number(mapped)).toBeGreaterThanOrEqual(64 * 1024 * 1024);
    expect(Number(unmapped)).toBeGreaterThanOrEqual(64 * 1024 * 1024);
  });

  it('the configuration is read before that first install (HEAPHOOK_MEM_MALLOC_HOOKS=no)', () => {
    const result = early({ HEAPHOOK_MEM_MALLOC_HOOKS: 'no' });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('early: mapped 0 unmapped 0');
  });
});

describe('configuration', () => {
  it('HEAPHOOK_MEM_EVENTS=no refuses handlers', () => {
    const result = events('preload', 'mmap', { LD_PRELOAD: lib, HEAPHOOK_MEM_EVENTS: 'no' });
    expect(result.stdout).toContain('FAIL set_event_handler: -22');
    expect(result.status).toBe(1);
  });

  it('UCX_MEM_EVENTS is an alias', () => {
    const result = events('preload', 'mmap', { LD_PRELOAD: lib, UCX_MEM_EVENTS: 'no' });
    expect(result.stdout).toContain('FAIL set_event_handler: -22');
  });

  it('HEAPHOOK_MEM_RELOC_HOOKS=no: not loaded first, so no events, said clearly', () => {
    const result = events(`reloc:${lib}`, 'mmap', { HEAPHOOK_MEM_RELOC_HOOKS: 'no' });
    expect(result.stdout).toContain('FAIL set_event_handler: -22');
    expect(result.stderr).toMatch(
      /heaphook-ucm\[\d+\] error: not loaded first and HEAPHOOK_MEM_RELOC_HOOKS=no/,
    );
  });

  it('UCX_MEM_RELOC_HOOKS=no works as well, and the HEAPHOOK_ spelling wins', () => {
    const alias = events(`reloc:${lib}`, 'mmap', { UCX_MEM_RELOC_HOOKS: 'no' });
    expect(alias.stdout).toContain('FAIL set_event_handler: -22');
    const both = events(`reloc:${lib}`, 'mmap', {
      UCX_MEM_RELOC_HOOKS: 'no',
      HEAPHOOK_MEM_RELOC_HOOKS: 'yes',
    });
    expect(both.status, both.stdout + both.stderr).toBe(0);
  });

  it('HEAPHOOK_MEM_LOG_LEVEL=info names the install mode', () => {
    const result = events(`reloc:${lib}`, 'mmap', { HEAPHOOK_MEM_LOG_LEVEL: 'info' });
    expect(result.stderr).toMatch(/memory events installed \(reloc mode\)/);
    expect(result.status).toBe(0);
  });

  it('a bad value stops the program before main with one clear line', () => {
    const result = events('preload', 'mmap', { LD_PRELOAD: lib, HEAPHOOK_MEM_EVENTS: 'maybe' });
    expect(result.status).toBe(78);
    expect(result.stderr).toContain('HEAPHOOK_MEM_EVENTS');
  });
});
