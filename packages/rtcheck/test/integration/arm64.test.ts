// The arm64 tier (npm run build-arm64, run under qemu-aarch64): the guard's raw system calls
// (native/sys.h), its hooks and its report on 64-bit Arm — a C++ section's new/delete, a loop
// switched to SCHED_FIFO, a blocking call — reported on stderr as in a launch file.
import { fileURLToPath } from 'node:url';

import { arm64Tier, isAarch64Elf, runAarch64 } from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('../..', import.meta.url));
const tier = arm64Tier(packageDir, [
  'libheaphook_rtcheck.so',
  'rt_control_loop',
  'rt_faults',
  'rt_blocking',
]);
const [lib, loop, faults, blocking] = tier.files;
const TIMEOUT_MS = 120_000;

describe.skipIf(tier.skip)('arm64 (qemu-aarch64): the guard', () => {
  it('is built for 64-bit Arm', () => {
    for (const path of [lib, loop, faults, blocking]) expect(isAarch64Elf(path), path).toBe(true);
  });

  it(
    'catches exactly the control loop mallocs, a SCHED_FIFO loop on fresh memory and a mutex',
    () => {
      const c = runAarch64(loop, ['fifo', '50'], { preload: lib, timeoutMs: TIMEOUT_MS });
      expect(c.status).toBe(0);
      expect(c.stdout).toBe('control loop: 50 steps\n');
      expect(c.stderr).toMatch(
        /^heaphook rtcheck: malloc called 50 times in real-time thread \d+ "control" \(SCHED_FIFO 10\)$/m,
      );
      expect(c.stderr).not.toMatch(/"worker"/);
      const f = runAarch64(faults, ['8'], { preload: lib, timeoutMs: TIMEOUT_MS });
      expect(f.status).toBe(0);
      expect(f.stderr).toMatch(
        /malloc called 8 times in real-time thread \d+ ".*" \(SCHED_FIFO 10\)/,
      );
      const b = runAarch64(blocking, ['mutex'], { preload: lib, timeoutMs: TIMEOUT_MS });
      expect(b.status).toBe(0);
      expect(b.stderr).toMatch(/pthread_mutex_lock called 1 time/);
    },
    TIMEOUT_MS * 3,
  );
});
