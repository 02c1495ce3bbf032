// tier4/heaphook's library name: libpreloaded_heaptrack.so is the same library as
// libheaphook_heaptrack.so (a copy made by the build after every link), declared as the backend
// `preloaded_heaptrack`; preloaded by that name it writes heaplog.<pid>.log in the working
// directory, as tier4's did (in heaphook's format), alone and over libpreloaded_tlsf.so.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { libraryPath } from '@heaphook/core';
import { describe, expect, it } from 'vitest';

import { summarize } from '../../src/index.js';
import {
  heaphookBin,
  logsIn,
  packageDir,
  python3,
  release,
  scratch,
  traced,
  tracer,
} from '../helpers.js';

const preloaded = join(release, 'libpreloaded_heaptrack.so');

describe('libpreloaded_heaptrack.so', () => {
  it('`heaphook path preloaded_heaptrack` prints an existing file, the same bytes as libheaphook_heaptrack.so', () => {
    const path = execFileSync(process.execPath, [heaphookBin, 'path', 'preloaded_heaptrack'], {
      cwd: packageDir,
      encoding: 'utf8',
    }).trim();
    expect(path).toBe(preloaded);
    expect(existsSync(path)).toBe(true);
    expect(readFileSync(path).equals(readFileSync(tracer))).toBe(true);
  });

  it('python3 preloaded with it writes heaplog.<pid>.log in the working directory', async () => {
    const dir = scratch('tier4-names');
    const r = traced(
      dir,
      python3,
      ['-c', 'x = [bytes(100) for _ in range(1000)]; print(len(x))'],
      {},
      [preloaded],
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('1000\n');
    const logs = logsIn(dir);
    expect(logs).toHaveLength(1);
    const s = await summarize(logs[0]!);
    expect(s.calls.malloc).toBeGreaterThan(1000);
  });

  it("over libpreloaded_tlsf.so with tier4's variables: traced, and TLSF serves the calls", async () => {
    const tlsf = libraryPath('preloaded_tlsf', { from: packageDir });
    const dir = scratch('tier4-names-tlsf');
    const script =
      'import ctypes; f = ctypes.CDLL(None).heaphook_active_backend; f.restype = ctypes.c_char_p; print(f().decode())';
    const r = traced(
      dir,
      python3,
      ['-c', script],
      { INITIAL_MEMPOOL_SIZE: '50000000', ADDITIONAL_MEMPOOL_SIZE: '20000000' },
      [preloaded, tlsf],
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('tlsf\n');
    const logs = logsIn(dir);
    expect(logs).toHaveLength(1);
    expect((await summarize(logs[0]!)).calls.malloc).toBeGreaterThan(100);
  });
});
