// The tracer in a privileged process, and its variables checked at load. Under secure
// execution (AT_SECURE: a setuid-root program run by nobody, for real, see
// @heaphook/core/testing's runSecureProbe) it writes no log and ignores HEAPHOOK_LOG_DIR,
// HEAPHOOK_LOG_FILE, HEAPHOOK_COLLECTOR and the signal variables: tracing such a program would
// let whoever set the environment write files with its privileges.
import { describe, expect, it } from 'vitest';

import { runSecureProbe, secureExecutionSkip, secureRunProblems } from '@heaphook/core/testing';
import { scratch, tracer, traced, workload } from '../helpers.js';

describe.skipIf(secureExecutionSkip())('secure execution', () => {
  const standalone = ({ dir }: { dir: string }) => ({
    HEAPHOOK_LOG_DIR: dir,
    HEAPHOOK_LOG_FILE: `${dir}/heaphook.log`,
    HEAPHOOK_LOG_LEVEL: 'debug',
  });
  const collector = ({ dir }: { dir: string }) => ({
    HEAPHOOK_COLLECTOR: `${dir}/socket`,
    HEAPHOOK_LOG_LEVEL: 'debug',
  });

  it('the controls: unprivileged, the same variables write a heaplog and the log file, or reach the collector', async () => {
    const written = await runSecureProbe({ library: tracer, env: standalone, privileged: false });
    expect(written.secure).toBe(false);
    expect(written.written.filter((name) => /^heaplog\.\d+(\.\d+)?\.log$/.test(name))).toHaveLength(
      2,
    ); // the probe and its child
    expect(written.written).toContain('heaphook.log');
    const connected = await runSecureProbe({ library: tracer, env: collector, privileged: false });
    expect(connected.connections).toBeGreaterThan(0);
  });

  it('setuid-root run by nobody: no heaplog anywhere, no log file, debug lines say why', async () => {
    const result = await runSecureProbe({ library: tracer, env: standalone, privileged: true });
    expect(secureRunProblems(result)).toEqual([]);
    expect(result.stderr).toMatch(
      /debug: secure execution \(AT_SECURE\): HEAPHOOK_LOG_FILE is ignored$/m,
    );
    expect(result.stderr).toMatch(
      /debug: heaptrack: secure execution \(AT_SECURE\): writing no log; not tracing$/m,
    );
  });

  it('setuid-root run by nobody: HEAPHOOK_COLLECTOR is never connected to', async () => {
    const result = await runSecureProbe({ library: tracer, env: collector, privileged: true });
    expect(secureRunProblems(result)).toEqual([]);
  });
});

describe('every variable is checked at load, before main', () => {
  it('a bad HEAPHOOK_LOG_LEVEL stops the program before main, though the tracer never logs a line', () => {
    const dir = scratch('loglevel');
    const run = traced(dir, workload, ['counts'], { HEAPHOOK_LOG_LEVEL: 'loud' });
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(
      /^heaphook: HEAPHOOK_LOG_LEVEL="loud" is not a log level; .*e\.g\. HEAPHOOK_LOG_LEVEL=debug$/m,
    );
    expect(run.status).toBe(78);
  });

  it('a newline in HEAPHOOK_COLLECTOR is escaped where the value is echoed, not a line of its own', () => {
    const dir = scratch('collector-echo');
    const run = traced(dir, workload, ['counts'], {
      HEAPHOOK_COLLECTOR: '@nobody-listens\nheaphook[1] fatal: forged',
    });
    expect(run.status).toBe(0);
    const lines = run.stderr.split('\n').filter((line) => line !== '');
    expect(lines.some((line) => line.startsWith('heaphook[1] fatal'))).toBe(false);
    expect(run.stderr).toContain(
      'HEAPHOOK_COLLECTOR=@nobody-listens\\x0aheaphook[1] fatal: forged',
    );
  });
});
