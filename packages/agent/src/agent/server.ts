/**
 * The agent: a Unix socket that preloaded processes connect to, and a read-only HTTP server
 * for the ecosystem's scrapers (/metrics, /debug/pprof/heap, /debug/pprof/allocs,
 * /debug/pprof/, /healthz).
 *
 * Who may connect: processes of the agent's own user, or of a group it is told
 * (--group), as the kernel says (SO_PEERCRED); the socket file is made 0600 (0660 with a
 * group) as a first fence. A connection that breaks the frame layout is closed and counted;
 * no frame can make the agent open a file or allocate beyond its limits.
 */
import { chmodSync, existsSync, lstatSync, readFileSync, unlinkSync } from 'node:fs';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

import { FrameError, FrameReader, AGENT_PROTOCOL_VERSION } from './frames.js';
import { encodeProfile, buildProfile, type ProfileKind } from './pprof.js';
import {
  OPENMETRICS_CONTENT_TYPE,
  PROMETHEUS_CONTENT_TYPE,
  renderMetrics,
  wantsOpenMetrics,
} from './metrics.js';
import { peerCredentials } from './peercred.js';
import { DEFAULT_LIMITS, Registry, type AgentLimits, type ProcessProfile } from './store.js';

export interface AgentOptions {
  /** Path of the Unix socket processes connect to. */
  readonly socket: string;
  /** HTTP host and port; port 0 picks a free one. */
  readonly httpHost: string;
  readonly httpPort: number;
  /** A group id whose processes may connect too (besides the agent's user). */
  readonly allowGid?: number;
  /** When set, HTTP requests need "Authorization: Bearer <token>" (/healthz excepted). */
  readonly bearerToken?: string;
  readonly limits?: AgentLimits;
  /** Told of each connection refused or closed for a protocol error (the CLI logs it). */
  readonly log?: (line: string) => void;
}

export interface RunningAgent {
  readonly registry: Registry;
  readonly httpPort: number;
  readonly httpHost: string;
  close(): Promise<void>;
}

/** A stale socket file (no agent listening) is replaced; anything else at the path is refused. */
function prepareSocketPath(path: string): void {
  if (!existsSync(path)) return;
  if (!lstatSync(path).isSocket()) {
    throw new Error(`${path} exists and is not a socket: choose another --socket path`);
  }
  unlinkSync(path);
}

function residentBytes(): number {
  try {
    const status = readFileSync('/proc/self/statm', 'utf8').split(' ');
    return Number(status[1]) * 4096;
  } catch {
    return process.memoryUsage().rss;
  }
}

function handleConnection(socket: Socket, registry: Registry, options: AgentOptions): void {
  const log = options.log ?? ((): void => {});
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  let pid = 0;
  let uid = 0;
  try {
    if (fd === undefined) throw new Error('no descriptor');
    const cred = peerCredentials(fd);
    pid = cred.pid;
    uid = cred.uid;
    const ownUid = process.getuid?.() ?? -1;
    const allowed =
      cred.uid === ownUid || (options.allowGid !== undefined && cred.gid === options.allowGid);
    if (!allowed || registry.full) {
      registry.rejectedConnections++;
      log(
        `refused pid ${cred.pid} (uid ${cred.uid}): ${allowed ? 'too many processes' : 'another user'}`,
      );
      socket.destroy();
      return;
    }
  } catch (error) {
    registry.rejectedConnections++;
    log(`refused a connection: SO_PEERCRED failed (${(error as Error).message})`);
    socket.destroy();
    return;
  }
  const reader = new FrameReader();
  let profile: ProcessProfile | undefined;
  socket.on('data', (chunk: Buffer) => {
    try {
      for (const frame of reader.push(chunk)) {
        if (profile === undefined) {
          if (frame.type !== 'hello')
            throw new FrameError(`first frame is ${frame.type}, not hello`);
          if (frame.version !== AGENT_PROTOCOL_VERSION) {
            throw new FrameError(
              `protocol version ${frame.version} (this agent speaks ${AGENT_PROTOCOL_VERSION})`,
            );
          }
          profile = registry.open(pid, uid, frame);
          continue;
        }
        switch (frame.type) {
          case 'hello':
            throw new FrameError('a second hello');
          case 'alloc':
            profile.alloc(frame);
            break;
          case 'free':
            profile.free(frame.address);
            break;
          case 'symbol':
            profile.symbol(frame);
            break;
          case 'stats':
            profile.updateStats(frame);
            break;
        }
      }
    } catch (error) {
      if (!(error instanceof FrameError)) throw error;
      registry.protocolErrors++;
      log(`closed pid ${pid}: ${error.message}`);
      socket.destroy();
    }
  });
  const end = (): void => {
    if (profile !== undefined) registry.close(profile);
    profile = undefined;
  };
  socket.on('close', end);
  socket.on('error', () => socket.destroy());
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function indexPage(registry: Registry): string {
  const rows = registry
    .all()
    .map((p) => {
      const state = p.connected ? 'connected' : 'ended';
      return `<tr><td>${p.pid}</td><td>${escapeHtml(p.comm)}</td><td>${escapeHtml(p.backend)}</td><td>${state}</td><td>${p.liveSamples}</td><td><a href="heap?pid=${p.pid}">heap</a> <a href="allocs?pid=${p.pid}">allocs</a></td></tr>`;
    })
    .join('\n');
  return `<!DOCTYPE html><html><head><title>/debug/pprof/</title></head><body>
<h1>heaphook agent: /debug/pprof/</h1>
<table><tr><th>pid</th><th>comm</th><th>backend</th><th>state</th><th>live samples</th><th>profiles</th></tr>
${rows}
</table>
<p>heap: in-use and cumulative samples of a process (go tool pprof http://HOST/debug/pprof/heap?pid=N); allocs: the same, alloc_space by default.</p>
</body></html>
`;
}

async function handleHttp(
  req: IncomingMessage,
  res: ServerResponse,
  registry: Registry,
  options: AgentOptions,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://agent');
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    send(res, 405, 'text/plain', 'the agent is read-only: GET or HEAD\n');
    return;
  }
  if (url.pathname === '/healthz') {
    send(res, 200, 'text/plain', 'ok\n');
    return;
  }
  if (
    options.bearerToken !== undefined &&
    req.headers.authorization !== `Bearer ${options.bearerToken}`
  ) {
    res.setHeader('WWW-Authenticate', 'Bearer');
    send(res, 401, 'text/plain', 'this agent needs "Authorization: Bearer <token>"\n');
    return;
  }
  if (url.pathname === '/metrics') {
    const open = wantsOpenMetrics(req.headers.accept);
    send(
      res,
      200,
      open ? OPENMETRICS_CONTENT_TYPE : PROMETHEUS_CONTENT_TYPE,
      renderMetrics(registry, open, residentBytes()),
    );
    return;
  }
  if (url.pathname === '/debug/pprof/' || url.pathname === '/debug/pprof') {
    send(res, 200, 'text/html; charset=utf-8', indexPage(registry));
    return;
  }
  if (url.pathname === '/debug/pprof/heap' || url.pathname === '/debug/pprof/allocs') {
    const kind: ProfileKind = url.pathname.endsWith('heap') ? 'heap' : 'allocs';
    const pidText = url.searchParams.get('pid');
    const comm = url.searchParams.get('comm');
    let profile: ProcessProfile | undefined;
    if (pidText === null && comm !== null) {
      // A scraper's stable name for a service whose pid changes on every restart.
      profile = registry
        .processes()
        .filter((p) => p.comm === comm)
        .pop();
      if (profile === undefined) {
        send(
          res,
          404,
          'text/plain',
          `no connected process is named ${JSON.stringify(comm.slice(0, 16))} (see /debug/pprof/)\n`,
        );
        return;
      }
    } else if (pidText === null) {
      const connected = registry.processes();
      if (connected.length !== 1) {
        const pids = connected.map((p) => p.pid).join(', ') || 'none';
        send(res, 400, 'text/plain', `name a process: ?pid=N (connected: ${pids})\n`);
        return;
      }
      profile = connected[0];
    } else if (pidText !== null) {
      const pid = /^[0-9]{1,10}$/.test(pidText) ? Number(pidText) : NaN;
      profile = Number.isSafeInteger(pid) ? registry.find(pid) : undefined;
      if (profile === undefined) {
        send(
          res,
          404,
          'text/plain',
          `no process ${pidText.slice(0, 20)} has reported to this agent (see /debug/pprof/)\n`,
        );
        return;
      }
    }
    if (profile === undefined) return;
    const body = encodeProfile(await buildProfile(profile, kind));
    res.writeHead(200, {
      'Content-Type': 'application/octet-stream',
      'Content-Disposition': `attachment; filename="${kind}.${profile.pid}.pb.gz"`,
      'Content-Length': body.length,
    });
    res.end(body);
    return;
  }
  send(
    res,
    404,
    'text/plain',
    'not found: /metrics, /debug/pprof/, /debug/pprof/heap?pid=N, /debug/pprof/allocs?pid=N, /healthz\n',
  );
}

export async function startAgent(options: AgentOptions): Promise<RunningAgent> {
  const registry = new Registry(options.limits ?? DEFAULT_LIMITS);
  prepareSocketPath(options.socket);
  const sockets = new Set<Socket>();
  const unixServer: Server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    handleConnection(socket, registry, options);
  });
  await new Promise<void>((resolve, reject) => {
    unixServer.once('error', reject);
    unixServer.listen(options.socket, () => resolve());
  });
  chmodSync(options.socket, options.allowGid !== undefined ? 0o660 : 0o600);
  const http = createHttpServer((req, res) => {
    handleHttp(req, res, registry, options).catch((error: unknown) => {
      send(res, 500, 'text/plain', `heaphook agent: ${(error as Error).message}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.httpPort, options.httpHost, () => resolve());
  });
  const address = http.address() as AddressInfo;
  return {
    registry,
    httpPort: address.port,
    httpHost: options.httpHost,
    async close(): Promise<void> {
      for (const s of sockets) s.destroy();
      await Promise.all([
        new Promise<void>((r) => unixServer.close(() => r())),
        new Promise<void>((r) => {
          http.closeAllConnections();
          http.close(() => r());
        }),
      ]);
    },
  };
}
