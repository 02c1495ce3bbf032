// The emulation in a privileged process. Under secure execution (AT_SECURE: a setuid-root
// program run by nobody, for real, see @heaphook/core/testing's runSecureProbe) MALLOCTYPE=user:
// names a program to load and is ignored, LIBPATH and LD_LIBRARY_PATH are not searched, and
// neither HEAPHOOK_AIX_EMUL_REPORT nor HEAPHOOK_LOG_FILE is written.
import { describe, expect, it } from 'vitest';

import { runSecureProbe, secureExecutionSkip, secureRunProblems } from '@heaphook/core/testing';
import { archives, emulation, release, requireBuilt } from '../helpers/run.js';

describe.skipIf(secureExecutionSkip())('secure execution', () => {
  requireBuilt();
  const env = ({ dir }: { dir: string }) => ({
    MALLOCTYPE: `user:${archives.bump}`,
    LIBPATH: release,
    HEAPHOOK_AIX_EMUL_REPORT: `${dir}/report.txt`,
    BUMP_REPORT: `${dir}/bump.txt`,
    HEAPHOOK_LOG_FILE: `${dir}/heaphook.log`,
    HEAPHOOK_LOG_LEVEL: 'debug',
  });

  it('the control: unprivileged, the plug-in named by MALLOCTYPE loads and every file is written', async () => {
    const result = await runSecureProbe({ library: emulation, env, privileged: false });
    expect(result.secure).toBe(false);
    expect([...result.written].sort()).toEqual(['bump.txt', 'heaphook.log', 'report.txt']);
  });

  it('setuid-root run by nobody: MALLOCTYPE=user: is ignored (glibc serves), nothing is written', async () => {
    const result = await runSecureProbe({ library: emulation, env, privileged: true });
    expect(secureRunProblems(result)).toEqual([]);
    expect(result.stderr).toMatch(
      /debug: secure execution \(AT_SECURE\): MALLOCTYPE=user:\.\.\. is ignored$/m,
    );
    expect(result.stderr).toMatch(/debug: backend aix:default ready/);
  });
});
