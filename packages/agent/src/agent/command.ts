/**
 * `heaphook agent --socket PATH --http HOST:PORT [--group GROUP] [--token-file FILE]`: the
 * long-running service processes report to (HEAPHOOK_AGENT=unix:PATH, or
 * `heaphook run --agent PATH -b BACKEND -- CMD`), serving /metrics, /debug/pprof/heap?pid=N,
 * /debug/pprof/allocs?pid=N, /debug/pprof/ and /healthz.
 */
import type { Command } from 'commander';

import { HeaphookError } from '@heaphook/core';

import { readFileSync } from 'node:fs';

import { startAgent } from './server.js';

export const DEFAULT_HTTP = '127.0.0.1:6061';

export interface HttpAddress {
  readonly host: string;
  readonly port: number;
}

export function parseHttpAddress(text: string): HttpAddress {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(text);
  const port = m !== null ? Number(m[2]) : NaN;
  if (m === null || port > 65535) {
    throw new HeaphookError(`--http ${text}: expected HOST:PORT, e.g. --http 127.0.0.1:6061`);
  }
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** A group name (from /etc/group) or number. */
export function parseGroup(text: string, groupFile = '/etc/group'): number {
  if (/^[0-9]+$/.test(text)) return Number(text);
  let lines: string[] = [];
  try {
    lines = readFileSync(groupFile, 'utf8').split('\n');
  } catch {
    /* no group file: only numbers work */
  }
  for (const line of lines) {
    const [name, , gid] = line.split(':');
    if (name === text && gid !== undefined && /^[0-9]+$/.test(gid)) return Number(gid);
  }
  throw new HeaphookError(
    `--group ${text}: no such group in ${groupFile}; give its name or number, e.g. --group 1000`,
  );
}

function readToken(file: string): string {
  let token: string;
  try {
    token = readFileSync(file, 'utf8').trim();
  } catch (error) {
    throw new HeaphookError(`--token-file ${file}: ${(error as Error).message}`);
  }
  if (!/^[\x21-\x7e]{16,}$/.test(token)) {
    throw new HeaphookError(
      `--token-file ${file}: the token must be at least 16 printable characters, e.g. the output of "openssl rand -hex 32"`,
    );
  }
  return token;
}

interface AgentCommandOptions {
  socket: string;
  http: string;
  group?: string;
  tokenFile?: string;
}

export function register(program: Command): void {
  program
    .command('agent')
    .description(
      'serve sampled heap profiles and allocator metrics of the processes that report to it (Prometheus /metrics, pprof /debug/pprof/heap)',
    )
    .requiredOption(
      '--socket <path>',
      'Unix socket processes connect to (HEAPHOOK_AGENT=unix:PATH)',
    )
    .option(
      '--http <host:port>',
      'where to serve HTTP (loopback unless --token-file is given)',
      DEFAULT_HTTP,
    )
    .option(
      '--group <group>',
      "also accept processes of this group (name or gid), besides the agent's user",
    )
    .option(
      '--token-file <file>',
      'require "Authorization: Bearer <token>" with the token in this file',
    )
    .action(async (options: AgentCommandOptions) => {
      const http = parseHttpAddress(options.http);
      const token = options.tokenFile !== undefined ? readToken(options.tokenFile) : undefined;
      if (!isLoopback(http.host) && token === undefined) {
        throw new HeaphookError(
          `--http ${options.http} is not loopback: add --token-file FILE (a bearer token), or serve on 127.0.0.1 behind a reverse proxy`,
        );
      }
      const agent = await startAgent({
        socket: options.socket,
        httpHost: http.host,
        httpPort: http.port,
        ...(options.group !== undefined ? { allowGid: parseGroup(options.group) } : {}),
        ...(token !== undefined ? { bearerToken: token } : {}),
        log: (line) => process.stderr.write(`heaphook agent: ${line}\n`),
      });
      process.stderr.write(
        `heaphook agent: listening on ${options.socket} and http://${http.host.includes(':') ? `[${http.host}]` : http.host}:${agent.httpPort}/metrics\n`,
      );
      await new Promise<void>((resolve) => {
        const stop = (): void => {
          void agent.close().then(resolve);
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
    });
}
