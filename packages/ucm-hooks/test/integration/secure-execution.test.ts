// libheaphook_ucm.so in a privileged process, and its variables checked at load. Under secure
// execution (AT_SECURE: a setuid-root program run by nobody, for real, see
// @heaphook/core/testing's runSecureProbe) HEAPHOOK_LOG_FILE is ignored and nothing is written,
// and HEAPHOOK_MEM_WATCH_SOCKET is ignored: no connection is made.
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import {
  runProgram,
  runSecureProbe,
  secureExecutionSkip,
  secureRunProblems,
} from '@heaphook/core/testing';

const library = fileURLToPath(new URL('../../build/Release/libheaphook_ucm.so', import.meta.url));

describe.skipIf(secureExecutionSkip())('secure execution', () => {
  const env = ({ dir }: { dir: string }) => ({
    HEAPHOOK_LOG_FILE: `${dir}/heaphook.log`,
    HEAPHOOK_LOG_LEVEL: 'debug',
    HEAPHOOK_MEM_WATCH_SOCKET: `${dir}/socket`,
  });

  it('the control: unprivileged, HEAPHOOK_LOG_FILE is created and the watch socket connected to', async () => {
    const result = await runSecureProbe({ library, env, privileged: false });
    expect(result.secure).toBe(false);
    expect(result.written).toEqual(['heaphook.log']);
    expect(result.connections).toBeGreaterThanOrEqual(1);
  });

  it('setuid-root run by nobody: nothing is written, debug says why', async () => {
    const result = await runSecureProbe({ library, env, privileged: true });
    expect(secureRunProblems(result)).toEqual([]);
    expect(result.stderr).toMatch(
      /debug: secure execution \(AT_SECURE\): HEAPHOOK_LOG_FILE is ignored$/m,
    );
    expect(result.stderr).toMatch(
      /debug: secure execution \(AT_SECURE\): HEAPHOOK_MEM_WATCH_SOCKET is ignored$/m,
    );
    expect(result.connections).toBe(0);
  });
});

describe('every variable is checked at load, before main', () => {
  it('a bad HEAPHOOK_LOG_LEVEL stops the program before main, though the hooks never log a line', () => {
    const run = runProgram('sh', ['-c', 'echo main'], {
      preload: library,
      env: { HEAPHOOK_LOG_LEVEL: 'loud' },
    });
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(
      /^heaphook: HEAPHOOK_LOG_LEVEL="loud" is not a log level; .*e\.g\. HEAPHOOK_LOG_LEVEL=debug$/m,
    );
    expect(run.status).toBe(78);
  });
});
