/** Running programs with one or more backends preloaded. */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { constants } from 'node:os';

import { libraryPath, type DiscoveryOptions } from './backends.js';

export interface PreloadOptions extends DiscoveryOptions {
  /** Extra variables for the child (backend options such as INITIAL_MEMPOOL_SIZE). */
  readonly env?: Readonly<Record<string, string>>;
  /** The environment to start from; defaults to process.env. */
  readonly baseEnv?: NodeJS.ProcessEnv;
}

/**
 * The environment for a child process with the given backends preloaded, in order: the first
 * one named is searched first, so `['heaptrack', 'tlsf']` traces the TLSF backend. Libraries
 * already in the base environment's LD_PRELOAD stay, after ours.
 */
export function preloadEnv(
  backends: string | readonly string[],
  options: PreloadOptions = {},
): NodeJS.ProcessEnv {
  const names = typeof backends === 'string' ? [backends] : backends;
  const base = options.baseEnv ?? process.env;
  const ours = names.map((name) => libraryPath(name, options));
  const existing = (base.LD_PRELOAD ?? '').split(/[\s:]+/).filter((p) => p.length > 0);
  return {
    ...base,
    ...options.env,
    LD_PRELOAD: [...ours, ...existing.filter((p) => !ours.includes(p))].join(':'),
  };
}

export interface SpawnWithOptions extends PreloadOptions {
  /** Passed to child_process.spawn (its `env` is replaced by the preload environment). */
  readonly spawn?: Omit<SpawnOptions, 'env'>;
}

/** Spawns command with the backends preloaded. */
export function spawnWith(
  backends: string | readonly string[],
  command: string,
  args: readonly string[] = [],
  options: SpawnWithOptions = {},
): ChildProcess {
  return spawn(command, args, {
    stdio: 'inherit',
    ...options.spawn,
    env: preloadEnv(backends, options),
  });
}

export interface RunResult {
  /** The exit status, or null when a signal ended the process. */
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs command with the backends preloaded and collects its output. */
export function runWith(
  backends: string | readonly string[],
  command: string,
  args: readonly string[] = [],
  options: SpawnWithOptions = {},
): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawnWith(backends, command, args, {
      ...options,
      spawn: { ...options.spawn, stdio: ['ignore', 'pipe', 'pipe'] },
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status, signal) => resolvePromise({ status, signal, stdout, stderr }));
  });
}

/** The conventional shell exit status of a process ended by a signal (128 + its number). */
export function exitStatusOf(status: number | null, signal: NodeJS.Signals | null): number {
  if (status !== null) return status;
  return 128 + (signal !== null ? constants.signals[signal] : 0);
}
