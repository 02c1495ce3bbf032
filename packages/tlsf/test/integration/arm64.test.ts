// The arm64 tier of the TLSF backend (npm run build-arm64, run under qemu-aarch64): the
// conformance suite with libheaphook_tlsf.so preloaded, and Debian's arm64 python3 (a real
// program: threads, a forked child, tens of thousands of objects) under it.
import { fileURLToPath } from 'node:url';

import {
  AARCH64_PYTHON,
  aarch64PythonSkip,
  aarch64ConformanceProblems,
  arm64Tier,
  corePackageDir,
  coreNativeFile,
  isAarch64Elf,
  runAarch64,
} from '@heaphook/core/testing';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('../..', import.meta.url));
const tier = arm64Tier(
  packageDir,
  ['libheaphook_tlsf.so'],
  [{ packageDir: corePackageDir, outputs: ['heaphook_conformance'] }],
);
const [library] = tier.files;
const suite = coreNativeFile('heaphook_conformance', 'arm64');
const TIMEOUT_MS = 600_000;

/** threads allocating, a fork whose child allocates, json of 30,000 objects. */
const PYTHON_WORKLOAD = `
import json, os, threading
def work(n):
    d = [{'k': i, 'v': str(i) * 8} for i in range(n)]
    return len(json.dumps(d))
threads = [threading.Thread(target=work, args=(5000,)) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
pid = os.fork()
if pid == 0:
    os._exit(0 if work(2000) > 0 else 1)
_, status = os.waitpid(pid, 0)
print(work(30000), os.waitstatus_to_exitcode(status))
`;

describe.skipIf(tier.skip)('arm64 (qemu-aarch64): libheaphook_tlsf.so', () => {
  it('is built for 64-bit Arm', () => {
    expect(isAarch64Elf(library)).toBe(true);
  });

  it(
    'passes the conformance suite, preloaded',
    () => {
      expect(aarch64ConformanceProblems(suite, 'tlsf', { preload: library })).toEqual([]);
    },
    TIMEOUT_MS,
  );

  it.skipIf(aarch64PythonSkip())(
    "runs Debian's arm64 python3 as glibc does (threads, fork, json)",
    () => {
      const plain = runAarch64(AARCH64_PYTHON, ['-c', PYTHON_WORKLOAD]);
      expect(plain.stderr).toBe('');
      expect(plain.stdout).toMatch(/^\d+ 0\n$/);
      const underTlsf = runAarch64(AARCH64_PYTHON, ['-c', PYTHON_WORKLOAD], {
        preload: library,
        env: { HEAPHOOK_TLSF_STATS: '1' },
      });
      expect(underTlsf.stdout).toBe(plain.stdout);
      expect(underTlsf.status).toBe(0);
      // The backend served it: its statistics at exit.
      expect(underTlsf.stderr).toMatch(/^heaphook tlsf\[\d+\] stats at exit: pool \d+ bytes/m);
    },
    TIMEOUT_MS,
  );
});
