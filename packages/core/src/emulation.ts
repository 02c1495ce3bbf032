/**
 * Running the arm64 (aarch64-linux-gnu) builds on this x86-64 machine, for tests: user-mode
 * emulation with qemu-aarch64. The guest's loader and libraries are Debian's multiarch arm64
 * packages (libc6:arm64 in /lib/aarch64-linux-gnu, installed by
 * tools/install-system-packages.sh), found by qemu at their usual paths. Not the cross
 * toolchain's sysroot (/usr/aarch64-linux-gnu): with its libc, qemu-user 7.2 hangs in the
 * first pthread_create on this machine, while the multiarch libc of the same glibc release
 * runs threads. A backend is preloaded with qemu's -E (the guest's environment), never through
 * the host's LD_PRELOAD, which the x86-64 loader running qemu itself would read.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';

import {
  cleanEnv,
  spawnForTest,
  type ProgramRunOptions,
  type ProgramRunResult,
} from './testing.js';

/** An emulated run's time limit unless the caller gives one: ~10x a native run's. */
const EMULATED_TIMEOUT_MS = 300_000;

/** The arm64 loader of Debian's multiarch libc6:arm64. */
export const AARCH64_LOADER = '/lib/ld-linux-aarch64.so.1';
export const QEMU_AARCH64 = 'qemu-aarch64';
/** Debian's arm64 python3, unpacked by tools/install-system-packages.sh (its standard library
 * is the multiarch libpython3.11-minimal:arm64 in /usr/lib/python3.11). */
export const AARCH64_PYTHON = '/opt/heaphook-arm64/usr/bin/python3.11';

/** Where `npm run build-arm64` (tools/scripts/build-arm64.mjs) puts a package's outputs. */
export function arm64ReleaseDir(packageDir: string): string {
  return join(packageDir, 'build-arm64', 'Release');
}

/** Why arm64 programs cannot run here (what to install), or undefined when they can. */
export function aarch64EmulationMissing(): string | undefined {
  const qemu = spawnSync(QEMU_AARCH64, ['--version'], { stdio: 'ignore' });
  if (qemu.error !== undefined || qemu.status !== 0)
    return 'qemu-aarch64 is missing: install qemu-user (tools/install-system-packages.sh)';
  if (!existsSync(AARCH64_LOADER))
    return `${AARCH64_LOADER} is missing: install libc6:arm64 (tools/install-system-packages.sh)`;
  return undefined;
}

/** Why a package's arm64 build is not there (the command that makes it), or undefined. */
export function arm64BuildMissing(
  packageDir: string,
  outputs: readonly string[],
): string | undefined {
  const missing = outputs.filter((name) => !existsSync(join(arm64ReleaseDir(packageDir), name)));
  return missing.length === 0
    ? undefined
    : `${missing.join(', ')} not built for arm64: npx nx run-many -t build-arm64`;
}

/**
 * Runs an arm64 program under qemu-aarch64 in a clean environment (as runProgram does), with
 * `options.preload` preloaded into the guest.
 */
export function runAarch64(
  program: string,
  args: readonly string[],
  options: ProgramRunOptions = {},
): ProgramRunResult {
  const preload = typeof options.preload === 'string' ? [options.preload] : options.preload;
  const qemuArgs: string[] = [];
  if (preload !== undefined && preload.length > 0)
    qemuArgs.push('-E', `LD_PRELOAD=${preload.join(':')}`);
  return spawnForTest(
    QEMU_AARCH64,
    [...qemuArgs, program, ...args],
    cleanEnv(options.env),
    options,
    EMULATED_TIMEOUT_MS,
  );
}

/** The conformance suite's groups (test/native/conformance.c), in the order it runs them. */
export const CONFORMANCE_GROUPS: readonly string[] = [
  'backend',
  'sizes',
  'calloc',
  'realloc',
  'reallocarray',
  'alignment',
  'invalid-alignment',
  'exhaustion',
  'statistics',
  'churn',
  'threads',
  'fork',
];

/**
 * The groups run under qemu-aarch64: all but fork. qemu-user 7.2 aborts in a child forked
 * while other guest threads run (an assertion in its own cpu-exec.c), glibc's malloc alone
 * included, so that group can only say something about qemu; it runs natively.
 */
export const EMULATED_CONFORMANCE_GROUPS = CONFORMANCE_GROUPS.filter((group) => group !== 'fork');

/** The suite's environment under emulation: quiet, and loops scaled to a ~10x slower machine. */
export const EMULATED_CONFORMANCE_ENV: Readonly<Record<string, string>> = {
  HEAPHOOK_CONFORMANCE_QUIET: '1',
  HEAPHOOK_CONFORMANCE_SLOWDOWN: '10',
};

/**
 * Runs an arm64 conformance program under qemu-aarch64 over EMULATED_CONFORMANCE_GROUPS and
 * returns what is wrong with its run: each group not reported "ok", any FAIL line, a summary
 * that does not say 0 failed, a non-zero status. Empty when the backend passes.
 */
export function aarch64ConformanceProblems(
  program: string,
  backend: string,
  options: Pick<ProgramRunOptions, 'preload' | 'timeoutMs'> = {},
): string[] {
  const r = runAarch64(program, [backend, ...EMULATED_CONFORMANCE_GROUPS], {
    ...options,
    env: EMULATED_CONFORMANCE_ENV,
  });
  const problems: string[] = [];
  for (const group of EMULATED_CONFORMANCE_GROUPS) {
    if (!new RegExp(`^ok +${group} +\\d+ checks$`, 'm').test(r.stdout))
      problems.push(`group ${group} not ok`);
  }
  problems.push(...r.stdout.split('\n').filter((line) => line.includes('FAIL')));
  const summary = new RegExp(
    `backend ${backend}: ${EMULATED_CONFORMANCE_GROUPS.length} groups, \\d+ checks, 0 failed$`,
    'm',
  );
  if (!summary.test(r.stdout)) problems.push(`no passing summary line for ${backend}`);
  if (r.status !== 0)
    problems.push(
      `exit status ${String(r.status)} (signal ${String(r.signal)}): ${r.stderr.trim()}`,
    );
  return problems;
}

const EM_AARCH64 = 183;

/** Whether the file is an ELF for 64-bit Arm (e_machine EM_AARCH64). */
export function isAarch64Elf(path: string): boolean {
  const header = Buffer.alloc(20);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  return (
    header.length === 20 &&
    header.readUInt32BE(0) === 0x7f454c46 &&
    header.readUInt16LE(18) === EM_AARCH64
  );
}
