// libheaphook_rtcheck.so in a privileged process. Under secure execution (AT_SECURE: a
// setuid-root program run by nobody, for real, see @heaphook/core/testing's runSecureProbe)
// HEAPHOOK_RT_REPORT and HEAPHOOK_RT_SUPPRESSIONS, which name paths, are ignored: no file is
// created or read.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { runSecureProbe, secureExecutionSkip, secureRunProblems } from '@heaphook/core/testing';

import { guardLibrary } from '../helpers/programs.js';

// A suppression file that stops the program (a bad line) whenever it is read; outside the
// probe's folders, which must stay empty.
const suppressionsDir = mkdtempSync(join(tmpdir(), 'heaphook-rtcheck-supp-'));
chmodSync(suppressionsDir, 0o755);
const suppressions = join(suppressionsDir, 'rt.supp');
writeFileSync(suppressions, 'not a suppression\n', { mode: 0o644 });
afterAll(() => rmSync(suppressionsDir, { recursive: true, force: true }));

describe.skipIf(secureExecutionSkip())('secure execution', () => {
  const env = ({ dir }: { dir: string }) => ({
    HEAPHOOK_RT_REPORT: `${dir}/rtcheck.txt`,
    HEAPHOOK_RT_SUPPRESSIONS: suppressions,
    HEAPHOOK_LOG_LEVEL: 'debug',
  });

  it('the control: unprivileged, the suppression file is read (and refused)', async () => {
    const result = await runSecureProbe({ library: guardLibrary, env, privileged: false });
    expect(result.secure).toBe(false);
    expect(result.status).toBe(78);
    expect(result.stderr).toMatch(/HEAPHOOK_RT_SUPPRESSIONS="not a suppression"/);
  });

  it('setuid-root run by nobody: neither path is used, debug says why', async () => {
    const result = await runSecureProbe({ library: guardLibrary, env, privileged: true });
    expect(secureRunProblems(result)).toEqual([]);
    expect(result.status).toBe(0);
    expect(result.stderr).toMatch(
      /debug: secure execution \(AT_SECURE\): HEAPHOOK_RT_REPORT is ignored$/m,
    );
    expect(result.stderr).toMatch(
      /debug: secure execution \(AT_SECURE\): HEAPHOOK_RT_SUPPRESSIONS is ignored$/m,
    );
  });
});
