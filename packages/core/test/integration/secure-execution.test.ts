// Secure execution (AT_SECURE: setuid, setgid, file capabilities): a library preloaded into a
// privileged program ignores every variable naming a path, a descriptor, a signal or a
// program, and writes no file, as glibc does for its own malloc variables. The run is real:
// a setuid-root probe run as nobody (see src/secure-probe.ts).
import { describe, expect, it } from 'vitest';

import { runSecureProbe, secureExecutionSkip, secureRunProblems } from '../../src/testing.js';
import { backendLibrary, run } from '../helpers/native.js';

describe.skipIf(secureExecutionSkip())('secure execution, the example backend (core)', () => {
  const env = ({ dir }: { dir: string }) => ({
    HEAPHOOK_LOG_FILE: `${dir}/heaphook.log`,
    HEAPHOOK_LOG_LEVEL: 'debug',
  });

  it('the control: run by root without privileges, the same environment writes the log file', async () => {
    const result = await runSecureProbe({
      library: backendLibrary('example'),
      env,
      privileged: false,
    });
    expect(result.secure).toBe(false);
    expect(result.mapped).toBe(true);
    expect(result.written).toEqual(['heaphook.log']);
  });

  it('setuid-root run by nobody: HEAPHOOK_LOG_FILE is ignored, nothing is written, debug says so', async () => {
    const result = await runSecureProbe({
      library: backendLibrary('example'),
      env,
      privileged: true,
    });
    expect(secureRunProblems(result)).toEqual([]);
    expect(result.stderr).toMatch(
      /^heaphook\[\d+\] debug: secure execution \(AT_SECURE\): HEAPHOOK_LOG_FILE is ignored$/m,
    );
  });
});

describe('values echoed in log lines', () => {
  it('a newline in HEAPHOOK_LOG_FILE cannot forge a line of its own: control characters are escaped', () => {
    const forged = '/nonexistent-dir/x\nheaphook[1] fatal: forged line\x1b[2J';
    const result = run(process.execPath, ['-e', '0'], {
      preload: backendLibrary('example'),
      env: { HEAPHOOK_LOG_FILE: forged },
    });
    expect(result.status).toBe(0);
    expect(result.stderr).toBe(
      'heaphook[' +
        /\d+/.exec(result.stderr)?.[0] +
        '] warn: cannot open HEAPHOOK_LOG_FILE="/nonexistent-dir/x\\x0aheaphook[1] fatal: forged line\\x1b[2J" (errno 2); logging to stderr\n',
    );
  });
});
