// The arm64 tier of ucm-hooks (npm run build-arm64, run under qemu-aarch64): the libucm-API
// event suite (test/native/ucm_events.c, every group) in both install modes: preloaded, and
// dlopen'ed into a running program, where GOT patching rewrites aarch64 relocations
// (R_AARCH64_JUMP_SLOT, R_AARCH64_GLOB_DAT, R_AARCH64_ABS64).
import { fileURLToPath } from 'node:url';

import { arm64Tier, isAarch64Elf, runAarch64 } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('../..', import.meta.url));
const tier = arm64Tier(packageDir, ['libheaphook_ucm.so', 'ucm_events', 'libucm_test_lib.so']);
const [lib, program, dlLib] = tier.files;
const TIMEOUT_MS = 300_000;

describe.skipIf(tier.skip)('arm64 (qemu-aarch64): memory events', () => {
  it('are built for 64-bit Arm', () => {
    for (const path of [lib, program, dlLib]) expect(isAarch64Elf(path), path).toBe(true);
  });

  for (const [title, mode, preload] of [
    ['preloaded', 'preload', lib],
    ['by GOT patching (dlopen into a running program)', `reloc:${lib}`, undefined],
  ] as const) {
    it(
      `every group of the event suite passes, ${title}`,
      () => {
        const r = runAarch64(program, [mode, 'all', dlLib], {
          ...(preload !== undefined ? { preload } : {}),
          timeoutMs: TIMEOUT_MS - 10_000,
        });
        const output = r.stdout + r.stderr;
        expect(r.stdout, output).toContain(`mode ${mode === 'preload' ? 'preload' : 'reloc'}`);
        expect(r.stdout, output).toMatch(/^all: \d+ checks, 0 failed$/m);
        expect(r.stdout, output).not.toContain('FAIL');
        expect(r.status, output).toBe(0);
      },
      TIMEOUT_MS,
    );
  }
});
