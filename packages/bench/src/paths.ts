import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { nativeFile } from '@heaphook/core';

/** packages/bench (dist/.. or src/..). */
export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Where cmake-js puts the workload programs and the launcher. */
export const nativeDir = join(packageDir, 'build', 'Release');

/** Scripts of the real-program workloads. */
export const scriptsDir = join(packageDir, 'workloads');

/**
 * Default output folder of every command (`compare`, `micro`, `report-throughput`, `attach`):
 * packages/bench/out, ignored by git, so that a run never changes the checkout.
 */
export const outDir = join(packageDir, 'out');

/** Where each command writes when not given `--out`: all inside `outDir`. */
export const defaultOutDirs = {
  compare: outDir,
  micro: outDir,
  'report-throughput': join(outDir, 'report-throughput'),
  attach: join(outDir, 'attach'),
} as const;

/**
 * Committed reference runs (packages/bench/results/<name>/), quoted by the READMEs. No command
 * writes here unless given `--out` with this folder.
 */
export const referenceDir = join(packageDir, 'results');

export const launcherPath = nativeFile(packageDir, 'hh-run');

export function nativeProgram(name: string): string {
  return nativeFile(packageDir, name);
}

/** Throws a clear error when the native part has not been built. */
export function assertBuilt(): void {
  if (!existsSync(launcherPath)) {
    throw new Error(
      `the bench's native programs are not built (${launcherPath} is missing): run \`npx nx build bench\``,
    );
  }
}
