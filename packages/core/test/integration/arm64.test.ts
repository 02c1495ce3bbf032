// The arm64 tier of the core: the conformance suite built for aarch64-linux-gnu
// (npm run build-arm64) and run under user-mode emulation (qemu-aarch64), for glibc (the suite
// itself) and the core's example backend, linked in and preloaded. The fork group runs
// natively only (EMULATED_CONFORMANCE_GROUPS says why).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import {
  aarch64ConformanceProblems,
  arm64Tier,
  isAarch64Elf,
  runAarch64,
} from '../../src/testing.js';

const packageDir = fileURLToPath(new URL('../..', import.meta.url));
const outputs = ['heaphook_conformance', 'heaphook_conformance_example', 'libheaphook_example.so'];
const tier = arm64Tier(packageDir, outputs);
const release = tier.release;
const TIMEOUT_MS = 600_000;

describe.skipIf(tier.skip)('arm64 (qemu-aarch64): the conformance suite', () => {
  it('is built for 64-bit Arm', () => {
    for (const output of outputs) expect(isAarch64Elf(join(release, output)), output).toBe(true);
  });

  it(
    'agrees with glibc itself',
    () => {
      expect(aarch64ConformanceProblems(join(release, 'heaphook_conformance'), 'glibc')).toEqual(
        [],
      );
    },
    TIMEOUT_MS,
  );

  it(
    'passes for the example backend, linked and preloaded',
    () => {
      expect(
        aarch64ConformanceProblems(join(release, 'heaphook_conformance_example'), 'example'),
      ).toEqual([]);
      expect(
        aarch64ConformanceProblems(join(release, 'heaphook_conformance'), 'example', {
          preload: join(release, 'libheaphook_example.so'),
        }),
      ).toEqual([]);
    },
    TIMEOUT_MS,
  );

  it('a bad HEAPHOOK_CONFORMANCE_SLOWDOWN stops the suite with one line and an example', () => {
    const r = runAarch64(join(release, 'heaphook_conformance'), ['glibc'], {
      env: { HEAPHOOK_CONFORMANCE_SLOWDOWN: '0' },
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      /^HEAPHOOK_CONFORMANCE_SLOWDOWN=0: .*e\.g\. HEAPHOOK_CONFORMANCE_SLOWDOWN=10/,
    );
  });
});
