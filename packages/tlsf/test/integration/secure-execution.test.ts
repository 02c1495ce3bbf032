// The TLSF backend in a privileged process: under secure execution (AT_SECURE: a setuid-root
// program run by nobody, for real, see @heaphook/core/testing's runSecureProbe)
// HEAPHOOK_LOG_FILE is ignored and nothing is written; the pool variables still apply.
import { describe, expect, it } from 'vitest';

import { runSecureProbe, secureExecutionSkip, secureRunProblems } from '@heaphook/core/testing';
import { tlsfLibrary } from '../helpers/run.js';

describe.skipIf(secureExecutionSkip())('secure execution', () => {
  const env = ({ dir }: { dir: string }) => ({
    HEAPHOOK_LOG_FILE: `${dir}/heaphook.log`,
    HEAPHOOK_LOG_LEVEL: 'debug',
    INITIAL_MEMPOOL_SIZE: '16MiB',
  });

  it('the control: unprivileged, HEAPHOOK_LOG_FILE is created', async () => {
    const result = await runSecureProbe({ library: tlsfLibrary(), env, privileged: false });
    expect(result.secure).toBe(false);
    expect(result.written).toEqual(['heaphook.log']);
  });

  it('setuid-root run by nobody: nothing is written, the backend serves, debug says why', async () => {
    const result = await runSecureProbe({ library: tlsfLibrary(), env, privileged: true });
    expect(secureRunProblems(result)).toEqual([]);
    expect(result.stderr).toMatch(
      /debug: secure execution \(AT_SECURE\): HEAPHOOK_LOG_FILE is ignored$/m,
    );
    expect(result.stderr).toMatch(/debug: backend tlsf ready/);
  });
});
