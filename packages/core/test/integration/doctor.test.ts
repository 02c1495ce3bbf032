import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { listBackends } from '../../src/backends.js';
import {
  checkBackend,
  checkMemlock,
  checkProgram,
  checkProgramSymbols,
  checkSymbolizer,
  checkSystemPreload,
  type DoctorCheck,
} from '../../src/doctor.js';

const bin = fileURLToPath(new URL('../../bin/heaphook.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'heaphook-doctor-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const example = listBackends().find((b) => b.name === 'example')!;

describe('heaphook doctor', () => {
  it('checks every installed backend: a built one preloads into the probe, an unbuilt one says how to build it', () => {
    const result = spawnSync(process.execPath, [bin, 'doctor', '--json'], { encoding: 'utf8' });
    const checks = JSON.parse(result.stdout) as DoctorCheck[];
    expect(checks.find((c) => c.name === 'glibc')?.detail).toMatch(/^glibc 2\.\d+$/);
    const backends = listBackends();
    expect(checks.filter((c) => c.name.startsWith('backend ')).map((c) => c.name)).toEqual(
      backends.map((b) => `backend ${b.name}`),
    );
    for (const b of backends) {
      const check = checks.find((c) => c.name === `backend ${b.name}`);
      // In a workspace where nx has not built every package yet, the unbuilt ones fail.
      expect(check).toMatchObject(
        b.built
          ? { status: 'ok', detail: `preloads and runs (${b.libraryPath})` }
          : { status: 'fail', fix: b.missing ?? `build it with "npx nx build ${b.nxProject}"` },
      );
    }
    const failures = checks.filter((c) => c.status === 'fail');
    expect(failures.map((c) => c.name)).toEqual(
      backends.filter((b) => !b.built).map((b) => `backend ${b.name}`),
    );
    expect(result.status).toBe(failures.length === 0 ? 0 : 1);
  });

  it('prints one line per check and a verdict, and exits 1 when a program cannot be preloaded', () => {
    const setuid = join(dir, 'setuid-true');
    copyFileSync('/bin/true', setuid);
    chmodSync(setuid, 0o4755);
    const result = spawnSync(process.execPath, [bin, 'doctor', setuid], { encoding: 'utf8' });
    expect(result.status).toBe(1);
    expect(result.stdout).toMatch(/^ok {4}backend example +preloads and runs/m);
    expect(result.stdout).toMatch(
      /^FAIL {2}program \S+setuid-true +.*set-user-ID: the loader ignores LD_PRELOAD/m,
    );
    expect(result.stdout).toMatch(/^ +fix: run a copy without the bit/m);
    expect(result.stdout).toMatch(/^\d+ problem\(s\), \d+ warning\(s\)\n$/m);
  });
});

describe('the checks', () => {
  it('a dynamically linked program: LD_PRELOAD applies', () => {
    expect(checkProgram('/bin/true')).toMatchObject({
      status: 'ok',
      detail: expect.stringContaining('dynamically linked'),
    });
  });

  it('a statically linked program: named, with the reason', () => {
    const source = join(dir, 'static.c');
    writeFileSync(source, 'int main(void) { return 0; }\n');
    const program = join(dir, 'static');
    const cc = spawnSync('cc', ['-static', '-o', program, source], { encoding: 'utf8' });
    expect(cc.status, cc.stderr).toBe(0);
    expect(checkProgram(program)).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('statically linked'),
    });
  });

  it('a script: judged by its interpreter', () => {
    const script = join(dir, 'script.sh');
    writeFileSync(script, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    expect(checkProgram(script)).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(/^script run by \/bin\/sh: .*dynamically linked/),
    });
  });

  it('a program that does not exist', () => {
    expect(checkProgram('no-such-program-heaphook')).toMatchObject({
      status: 'fail',
      detail: 'not found on PATH',
    });
  });

  it('a library the loader refuses: its message and a fix', () => {
    const broken = join(dir, 'libheaphook_broken.so');
    writeFileSync(broken, 'not an ELF file\n');
    const check = checkBackend({ ...example, name: 'broken', libraryPath: broken }, dir);
    expect(check.status).toBe('fail');
    expect(check.detail).toMatch(/^not loaded: .*libheaphook_broken\.so/);
    expect(check.fix).toBeDefined();
  });

  it('a library that was never built: how to build it', () => {
    const check = checkBackend({ ...example, built: false }, dir);
    expect(check).toMatchObject({ status: 'fail', fix: 'build it with "npx nx build core"' });
  });

  it('the memlock limit fails only when HEAPHOOK_TLSF_MLOCK=1 asks to lock a larger pool', () => {
    const limits =
      'Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n';
    const unset = checkMemlock({}, limits);
    expect(unset.status).toBe('ok');
    // An ok line does not read as a failure: it says what setting the variable would need.
    expect(unset.detail).not.toMatch(/cannot/);
    expect(unset.detail).toMatch(/HEAPHOOK_TLSF_MLOCK is not set/);
    // A limits file it cannot read is a warning, not an ok.
    expect(checkMemlock({}, 'Limit  Soft Limit\n').status).toBe('warn');
    expect(
      checkMemlock({ HEAPHOOK_TLSF_MLOCK: '1', INITIAL_MEMPOOL_SIZE: '4000000' }, limits).status,
    ).toBe('ok');
    const fail = checkMemlock({ HEAPHOOK_TLSF_MLOCK: '1' }, limits);
    expect(fail).toMatchObject({ status: 'fail', fix: expect.stringContaining('ulimit -l') });
  });

  it('names the symbolizer, and warns without it', () => {
    expect(checkSymbolizer()).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(/addr2line/),
    });
    expect(checkSymbolizer('/nonexistent/addr2line')).toMatchObject({
      status: 'warn',
      fix: expect.stringContaining('binutils'),
    });
  });

  it("says what a named program's frames will show: debug info, symbols only, or stripped", () => {
    const c = join(dir, 'sym.c');
    writeFileSync(c, 'int main(void) { return 0; }\n');
    const withDebug = join(dir, 'sym-g');
    const stripped = join(dir, 'sym-s');
    expect(spawnSync('cc', ['-g', '-o', withDebug, c]).status).toBe(0);
    expect(spawnSync('cc', ['-s', '-o', stripped, c]).status).toBe(0);
    expect(checkProgramSymbols(withDebug)).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(/debug info/),
    });
    expect(checkProgramSymbols(stripped)).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(/stripped/),
      fix: expect.stringMatching(/-g/),
    });
    // Not an ELF file: the program check speaks for it.
    expect(checkProgramSymbols(c)).toBeUndefined();
  });

  it('/etc/ld.so.preload entries are named', () => {
    const file = join(dir, 'ld.so.preload');
    writeFileSync(file, '/usr/lib/libsomething.so\n');
    expect(checkSystemPreload(file)).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('/usr/lib/libsomething.so'),
    });
    expect(checkSystemPreload(join(dir, 'none')).status).toBe('ok');
  });
});
