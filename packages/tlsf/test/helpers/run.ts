// Helpers of the tlsf tests: where the build put the native outputs, and running a program
// with or without libheaphook_tlsf.so preloaded, in an environment free of heaphook variables.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { coreNativeFile, runProgram, type ProgramRunResult } from '@heaphook/core/testing';
import { expect } from 'vitest';

export const releaseDir = fileURLToPath(new URL('../../build/Release/', import.meta.url));

/** Absolute path of a native build output; fails with the command that builds it. */
export function built(name: string): string {
  const path = releaseDir + name;
  if (!existsSync(path)) {
    throw new Error(`${path} is missing: build first (npx nx build tlsf)`);
  }
  return path;
}

/** A native test program of @heaphook/core (built by `nx build core`), e.g. heaphook_misuse_test. */
export function coreBuilt(name: string): string {
  const path = coreNativeFile(name);
  if (!existsSync(path)) throw new Error(`${path} is missing: build first (npx nx build core)`);
  return path;
}

export const tlsfLibrary = (): string => built('libheaphook_tlsf.so');

export interface RunOptions {
  /** Preload libheaphook_tlsf.so. */
  tlsf?: boolean;
  env?: Record<string, string>;
  cwd?: string;
  timeoutMs?: number;
}

export type RunResult = ProgramRunResult;

/** Runs a program in a clean environment (see @heaphook/core/testing), optionally on TLSF. */
export function run(command: string, args: string[], options: RunOptions = {}): RunResult {
  return runProgram(command, args, {
    preload: options.tlsf === true ? tlsfLibrary() : undefined,
    env: options.env,
    cwd: options.cwd,
    timeoutMs: options.timeoutMs,
  });
}

/** Growth lines logged at info level: the bytes added by each growth, in order. */
export function loggedAdditions(stderr: string): number[] {
  return [...stderr.matchAll(/tlsf: pool grew by (\d+) bytes/g)].map((m) => Number(m[1]));
}

/** A run that printed an address first, then must have been stopped by abort() with exactly
 * one fatal line: returns the address and that line. */
export function stoppedRun(r: RunResult): { address: string; line: string } {
  const address = r.stdout.trim().split('\n')[0]!;
  expect(address).toMatch(/^0x[0-9a-f]+$/);
  expect(r.stdout).not.toContain('not stopped');
  expect(r.signal).toBe('SIGABRT');
  const fatal = r.stderr.split('\n').filter((line) => line.includes('fatal'));
  expect(fatal).toHaveLength(1);
  return { address, line: fatal[0]! };
}
