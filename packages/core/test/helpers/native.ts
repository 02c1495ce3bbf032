// Helpers for the tests of the native core: where the build put its programs and libraries,
// and how to run a program with or without a heaphook library preloaded.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import {
  cleanEnv,
  runProgram,
  type ProgramRunOptions,
  type ProgramRunResult,
} from '../../src/testing.js';

/** build/Release of this package, where cmake-js puts every native output. */
export const releaseDir = fileURLToPath(new URL('../../build/Release/', import.meta.url));

/** Absolute path of a native build output; fails with the command that builds it. */
export function built(name: string): string {
  const path = releaseDir + name;
  if (!existsSync(path)) {
    throw new Error(
      `${path} is missing: build the native core first (cd packages/core && npx cmake-js build --out build)`,
    );
  }
  return path;
}

/** The preload library of a backend built in this package. */
export function backendLibrary(name: string): string {
  return built(`libheaphook_${name}.so`);
}

export type RunOptions = ProgramRunOptions;
export type RunResult = ProgramRunResult;
/** Runs a program in a clean environment (see @heaphook/core/testing). */
export const run = runProgram;
export { cleanEnv };

/** Lines of a text, without the empty one after the last newline. */
export function lines(text: string): string[] {
  return text.split('\n').filter((line, index, all) => line !== '' || index < all.length - 1);
}

export { CONFORMANCE_GROUPS } from '../../src/testing.js';
