// The native test programs (test/native, built into build/Release) and the CLI.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { heaphookBin } from '@heaphook/core/testing';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const releaseDir = join(packageDir, 'build', 'Release');
export const guardLibrary = join(releaseDir, 'libheaphook_rtcheck.so');
const cli = heaphookBin;

export function program(name: string): string {
  const path = join(releaseDir, name);
  if (!existsSync(path)) {
    throw new Error(
      `${path} is not built: run \`npx cmake-js build --out build\` in packages/rtcheck`,
    );
  }
  return path;
}

export interface CliResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `heaphook ARGS...`, as a user runs it. */
export function heaphook(args: readonly string[], env: Record<string, string> = {}): CliResult {
  const r = spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 110_000,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
