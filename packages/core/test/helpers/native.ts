// Helpers for the tests of the native core: where the build put its programs and libraries,
// and how to run a program with or without a heaphook library preloaded.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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

export interface RunOptions {
  /** Absolute path of a library for LD_PRELOAD, or none. */
  preload?: string;
  /** Extra environment (added to a copy of ours without LD_PRELOAD and HEAPHOOK_*). */
  env?: Record<string, string>;
  cwd?: string;
  input?: string;
  timeoutMs?: number;
}

export interface RunResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The environment of a test run: ours, less anything that would change heaphook's behaviour. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'LD_PRELOAD' || key.startsWith('HEAPHOOK_')) continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

export function run(command: string, args: string[], options: RunOptions = {}): RunResult {
  const env = cleanEnv(options.env);
  if (options.preload) env.LD_PRELOAD = options.preload;
  const result: SpawnSyncReturns<string> = spawnSync(command, args, {
    env,
    cwd: options.cwd,
    input: options.input,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 110_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error) throw result.error;
  return {
    status: result.status,
    signal: result.signal,
    stdout: result.stdout,
    stderr: result.stderr,
  };
}

/** Lines of a text, without the empty one after the last newline. */
export function lines(text: string): string[] {
  return text.split('\n').filter((line, index, all) => line !== '' || index < all.length - 1);
}
