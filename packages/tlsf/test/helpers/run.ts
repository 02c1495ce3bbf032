// Helpers of the tlsf tests: where the build put the native outputs, and running a program
// with or without libheaphook_tlsf.so preloaded, in an environment free of heaphook variables.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const releaseDir = fileURLToPath(new URL('../../build/Release/', import.meta.url));

/** Absolute path of a native build output; fails with the command that builds it. */
export function built(name: string): string {
  const path = releaseDir + name;
  if (!existsSync(path)) {
    throw new Error(`${path} is missing: build first (npx nx build tlsf)`);
  }
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

export interface RunResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'LD_PRELOAD' || key.startsWith('HEAPHOOK_') || key.endsWith('_MEMPOOL_SIZE')) {
      continue;
    }
    env[key] = value;
  }
  return { ...env, ...extra };
}

export function run(command: string, args: string[], options: RunOptions = {}): RunResult {
  const env = cleanEnv(options.env);
  if (options.tlsf) env.LD_PRELOAD = tlsfLibrary();
  const result = spawnSync(command, args, {
    env,
    cwd: options.cwd,
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

/** Growth lines logged at info level: the bytes added by each growth, in order. */
export function loggedAdditions(stderr: string): number[] {
  return [...stderr.matchAll(/tlsf: pool grew by (\d+) bytes/g)].map((m) => Number(m[1]));
}
