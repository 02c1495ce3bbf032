// Unit tier: heaphook/os.h's two kinds of system call and the logger's channels
// (test/native/os_test.c, linked with libheaphook_core.a, defining mmap and munmap itself as an
// event hook does): the observed calls reach the program's mmap/munmap, the unobserved ones do
// not and still answer like the C library; a channel has its own name and level.
import { describe, expect, it } from 'vitest';

import { built, run } from '../helpers/native.js';

describe('os.h: observed and unobserved calls (test/native/os_test.c)', () => {
  it('maps through the symbol, or straight to the kernel, as asked', () => {
    const result = run(built('heaphook_os_test'), []);
    const output = result.stdout + result.stderr;
    for (const check of [
      'heaphook_os_map goes through the mmap symbol',
      'heaphook_os_unmap goes through the munmap symbol',
      'heaphook_os_unobserved_mmap maps without the mmap symbol',
      'heaphook_os_unobserved_munmap unmaps without the munmap symbol',
      "a failed unobserved mmap returns MAP_FAILED with errno EBADF, as the C library's",
      'a failed unobserved munmap returns -1 with errno EINVAL',
      "HEAPHOOK_OS_UNOBSERVED returns the kernel's -errno and leaves errno alone",
      'HEAPHOOK_OS_UNOBSERVED returns the result of a call that succeeds',
    ]) {
      expect(result.stdout, output).toContain(`ok: ${check}\n`);
    }
    expect(result.stdout, output).toContain('os_test: 0 failed');
    expect(result.status, output).toBe(0);
  });
});

describe('log.h: channels', () => {
  it("write under the channel's name at the channel's level, not HEAPHOOK_LOG_LEVEL's", () => {
    const result = run(built('heaphook_os_test'), ['log'], {
      env: { HEAPHOOK_LOG_LEVEL: 'error' },
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^os-test\[\d+\] warn: channel warn line 7$/m);
    expect(result.stderr).toMatch(/^os-test\[\d+\] error: channel error line$/m);
    expect(result.stderr).not.toContain('channel info line');
    expect(result.stderr).not.toContain('core warn line');
  });
});
