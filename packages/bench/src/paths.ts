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

/** Default output folder of `compare` and `micro`. */
export const resultsDir = join(packageDir, 'results');

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
