/**
 * What the agent's tests share: the built files, free loopback ports, the agent started as
 * `heaphook agent` in a child process, programs started under it, and polling.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { heaphookBin } from '@heaphook/core/testing';
import { libraryPath as tlsfLibraryPath } from '@heaphook/tlsf';
import { afterAll, beforeAll } from 'vitest';

import { startAgent, type RunningAgent } from '../../src/agent/server.js';

const here = dirname(fileURLToPath(import.meta.url));
export const packageDir = join(here, '..', '..');
export const repoDir = join(packageDir, '..', '..');
export { heaphookBin };
export const release = join(packageDir, 'build', 'Release');
export const hold50 = join(release, 'hh_agent_hold50');
export const agentLib = join(release, 'libheaphook_agent.so');
export const tlsfLib = tlsfLibraryPath();
export const servicePy = join(packageDir, 'test', 'native', 'service.py');
export const serviceMjs = join(packageDir, 'test', 'native', 'service.mjs');

export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `heaphook-agent-${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/**
 * An agent in this test process for the enclosing describe: its socket in a new temporary
 * directory, started before the suite's tests (HTTP on a free loopback port) and closed, the
 * directory removed, after them. `agent` is valid from the suite's first test on.
 */
export function agentForSuite(prefix: string): {
  readonly dir: { path: string; remove(): void };
  readonly socket: string;
  readonly agent: RunningAgent;
} {
  const dir = tempDir(prefix);
  const socket = join(dir.path, 'agent.sock');
  let agent: RunningAgent | undefined;
  beforeAll(async () => {
    agent = await startAgent({ socket, httpHost: '127.0.0.1', httpPort: 0 });
  });
  afterAll(async () => {
    await agent?.close();
    dir.remove();
  });
  return {
    dir,
    socket,
    get agent(): RunningAgent {
      if (agent === undefined) throw new Error("the suite's agent is not started yet");
      return agent;
    },
  };
}

/** A loopback port nothing listens on now: bound once to check, then released. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Reads a child's stdout line by line until one matches. */
export function waitForLine(
  child: ChildProcess,
  stream: 'stdout' | 'stderr',
  match: RegExp,
  timeoutMs = 20_000,
): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => {
      reject(
        new Error(`no line matching ${match} within ${timeoutMs} ms; got: ${text.slice(-2000)}`),
      );
    }, timeoutMs);
    const onData = (chunk: Buffer): void => {
      text += chunk.toString();
      const m = match.exec(text);
      if (m !== null) {
        clearTimeout(timer);
        child[stream]?.off('data', onData);
        resolve(m);
      }
    };
    child[stream]?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(
        new Error(`exited (${code}) before a line matching ${match}; got: ${text.slice(-2000)}`),
      );
    });
  });
}

export interface AgentProcess {
  readonly child: ChildProcess;
  readonly port: number;
  readonly url: string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** `heaphook agent --socket SOCKET --http 127.0.0.1:PORT` in a child process. */
export async function startAgentProcess(socket: string, port: number): Promise<AgentProcess> {
  const child = spawn(
    process.execPath,
    [heaphookBin, 'agent', '--socket', socket, '--http', `127.0.0.1:${port}`],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  await waitForLine(child, 'stderr', /listening on .* and http:\/\/127\.0\.0\.1:(\d+)\/metrics/);
  return {
    child,
    port,
    url: `http://127.0.0.1:${port}`,
    kill: (signal: NodeJS.Signals = 'SIGTERM') => stopChild(child, signal),
  };
}

export async function stopChild(
  child: ChildProcess,
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await exited;
}

/** `heaphook run --agent SOCKET -b BACKEND -e ... -- command args`. */
export function runUnderAgent(
  socket: string,
  backend: string,
  env: Record<string, string>,
  command: string,
  args: string[],
): ChildProcess {
  const envArgs = Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  return spawn(
    process.execPath,
    [heaphookBin, 'run', '--agent', socket, '-b', backend, ...envArgs, '--', command, ...args],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
}

export async function getText(url: string): Promise<string> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.text();
}

/** The value of one series in a /metrics page (undefined when absent). */
export function metricValue(
  page: string,
  name: string,
  labels: Record<string, string>,
): number | undefined {
  for (const line of page.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(
    `timed out waiting for ${what}${last !== undefined ? ` (last error: ${String(last)})` : ''}`,
  );
}

/** Resident bytes of a process (VmRSS). */
export function residentBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? 0 : Number(m[1]) * 1024;
}

/** The core's example backend (packages/core's build), a backend that is not ours to report. */
export const exampleLib = join(
  repoDir,
  'packages',
  'core',
  'build',
  'Release',
  'libheaphook_example.so',
);
export const ucmLib = join(
  repoDir,
  'packages',
  'ucm-hooks',
  'build',
  'Release',
  'libheaphook_ucm.so',
);
export const heaptrackLib = join(
  repoDir,
  'packages',
  'heaptrack',
  'build',
  'Release',
  'libheaphook_heaptrack.so',
);
