/**
 * `heaphook attach PID... --agent SOCKET [--sample-bytes SIZE]`: a process started before the
 * agent (or without HEAPHOOK_AGENT) starts reporting to it. The agent's client is loaded into
 * the running process with heaphook-inject (ptrace, as `heaphook record -p` loads the tracer)
 * and heaphook_agent_attach redirects the process's malloc family to the client's hooks by GOT
 * patching; they forward to the allocator the process already uses (glibc, or a heaphook
 * backend), so nothing allocated before is touched. Blocks allocated before the attach are not
 * sampled: the sampled series start from it, the backend's exact figures cover everything.
 */
import { resolve } from 'node:path';

import type { Command } from 'commander';

import { HeaphookError, injectCall } from '@heaphook/core';

import { agentLibraryPath } from '../library.js';

/** heaphook_agent_attach's and heaphook_agent_set_sample_bytes' answers (native/client/start.c). */
export const ATTACH_RESULTS = {
  ok: 0,
  already: 1,
  badValue: 2,
  failed: 3,
} as const;

/** sizeof(sockaddr_un.sun_path) - 1. */
const MAX_SOCKET_PATH = 107;

export interface AttachOptions {
  /** The agent's socket (`heaphook agent --socket`); made absolute here. */
  readonly socket: string;
  /** Mean bytes between samples, in the core's size syntax ("512KiB", "4096"). */
  readonly sampleBytes?: string;
  /** The client library to load (default: this package's build). */
  readonly library?: string;
}

/** What an attach did: the process reports now, or it did already. */
export type AttachOutcome = 'attached' | 'already-reporting';

/** The socket as the process must name it: absolute (its working directory is its own). */
export function agentAddress(socket: string): string {
  const path = resolve(socket);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    throw new HeaphookError(
      `--agent ${socket}: a Unix socket path is at most ${MAX_SOCKET_PATH} bytes (${path} is longer); start the agent on a shorter path, e.g. --socket /run/heaphook/agent.sock`,
    );
  }
  return `unix:${path}`;
}

/** Makes process pid report to the agent at options.socket. */
export async function attachToAgent(pid: number, options: AttachOptions): Promise<AttachOutcome> {
  const address = agentAddress(options.socket);
  const library = options.library ?? agentLibraryPath();
  if (options.sampleBytes !== undefined) {
    const set = await injectCall({
      pid,
      library,
      symbol: 'heaphook_agent_set_sample_bytes',
      argument: options.sampleBytes,
    });
    if (set !== ATTACH_RESULTS.ok) {
      throw new HeaphookError(
        `--sample-bytes ${options.sampleBytes}: expected a size of at least 1 byte, e.g. --sample-bytes 512KiB`,
      );
    }
  }
  const result = await injectCall({
    pid,
    library,
    symbol: 'heaphook_agent_attach',
    argument: address,
  });
  switch (result) {
    case ATTACH_RESULTS.ok:
      return 'attached';
    case ATTACH_RESULTS.already:
      return 'already-reporting';
    case ATTACH_RESULTS.badValue:
      throw new HeaphookError(`--agent ${options.socket}: not a socket path the client accepts`);
    default:
      throw new HeaphookError(
        `process ${pid}: the client could not redirect its malloc calls (a GOT could not be written); start it with HEAPHOOK_AGENT=${address} instead`,
      );
  }
}

function parsePid(text: string): number {
  if (!/^[1-9][0-9]*$/.test(text)) {
    throw new HeaphookError(
      `${text} is not a process id, e.g. heaphook attach 1234 --agent /run/heaphook/agent.sock`,
    );
  }
  return Number(text);
}

interface AttachCommandOptions {
  agent: string;
  sampleBytes?: string;
}

export function register(program: Command): void {
  program
    .command('attach')
    .description(
      'make running processes report to `heaphook agent` (for processes started before it, or without HEAPHOOK_AGENT)',
    )
    .argument('<pid...>', 'the processes')
    .requiredOption('--agent <socket>', "the agent's socket (heaphook agent --socket)")
    .option('--sample-bytes <size>', 'mean bytes between samples (default 512KiB)')
    .action(async (pids: string[], options: AttachCommandOptions) => {
      const targets = pids.map(parsePid);
      const address = agentAddress(options.agent);
      for (const pid of targets) {
        const outcome = await attachToAgent(pid, {
          socket: options.agent,
          ...(options.sampleBytes !== undefined ? { sampleBytes: options.sampleBytes } : {}),
        });
        process.stdout.write(
          outcome === 'attached'
            ? `process ${pid} reports to ${address}\n`
            : `process ${pid} reports to an agent already (preloaded, or attached before): left as it is\n`,
        );
      }
    });
}
