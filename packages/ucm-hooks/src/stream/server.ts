// The watcher's end of the event streams: a Unix socket in a private temporary folder, one
// connection per watched process (a preloaded command's children each connect on their own).
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  CONTROL_DROPPED,
  CONTROL_END,
  CONTROL_STARTED,
  decodeHello,
  decodeRecord,
  encodeConfig,
  endReasons,
  HELLO_SIZE,
  installModes,
  RECORD_SIZE,
  type Hello,
  type InstallMode,
  type RawRecord,
} from './protocol.js';

export interface StreamStart {
  /** heaphook_ucm_status_t of the install: 0 when events flow. */
  readonly status: number;
  readonly mode: InstallMode;
  readonly events: number;
  readonly ringRecords: number;
}

export interface StreamEnd {
  /** detached, exit, install failed, connection lost, or closed without END (exec, _exit, killed). */
  readonly reason: string;
  readonly recorded: number;
  readonly dropped: number;
  /** The hooks this stream installed were removed (GOT entries, code patches restored). */
  readonly restored: boolean;
}

export interface StreamListener {
  connected?(connection: WatchConnection): void;
  started?(connection: WatchConnection, start: StreamStart): void;
  event(connection: WatchConnection, record: RawRecord): void;
  dropped?(connection: WatchConnection, count: number): void;
  ended?(connection: WatchConnection, end: StreamEnd): void;
  /** After each chunk of records read from a connection (a point to write out what piled up). */
  flush?(): void;
}

/** One watched process. */
export class WatchConnection {
  start: StreamStart | undefined;
  end: StreamEnd | undefined;
  /** Events received (not counting control records). */
  events = 0;
  /** Events the target dropped (its ring was full), as reported so far. */
  dropped = 0;
  /** Date.now() when bytes last came from the target (a detach waits while they still come). */
  lastDataAt = Date.now();
  readonly ended: Promise<StreamEnd>;
  private resolveEnded!: (end: StreamEnd) => void;

  constructor(
    readonly hello: Hello,
    private readonly socket: Socket,
  ) {
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
  }

  get pid(): number {
    return this.hello.pid;
  }

  /** Asks the target to detach: it unsets its handler, removes the hooks, sends END, closes. */
  detach(): void {
    if (!this.socket.writableEnded) this.socket.end();
  }

  /** @internal Closes the connection without reading what is left (WatchServer.close). */
  drop(): void {
    this.socket.removeAllListeners('data');
    this.socket.destroy();
  }

  /** Resolves true when the connection ends, false once no byte has come for quietMs (counted
   * from the call at the earliest). */
  async endsUnlessQuiet(quietMs: number): Promise<boolean> {
    let done = false;
    void this.ended.then(() => (done = true));
    const since = Date.now();
    while (!done && Date.now() - Math.max(this.lastDataAt, since) < quietMs) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return done;
  }

  /** @internal */
  finish(end: StreamEnd): void {
    this.end ??= end;
    this.resolveEnded(this.end);
  }
}

export interface WatchServerOptions {
  readonly events: number;
  readonly ringRecords: number;
  readonly listener: StreamListener;
  /** Give the folder and socket to this user (root watching another user's process). */
  readonly owner?: { readonly uid: number; readonly gid: number };
}

export class WatchServer {
  readonly connections = new Set<WatchConnection>();
  private accepting = true;
  private resolveFirstStart!: () => void;
  /** Resolves when the first process's stream has started (its STARTED record is in). */
  readonly firstStart = new Promise<void>((resolve) => (this.resolveFirstStart = resolve));

  private constructor(
    private readonly server: Server,
    readonly dir: string,
    readonly socketPath: string,
  ) {}

  static async listen(options: WatchServerOptions): Promise<WatchServer> {
    const dir = mkdtempSync(join(tmpdir(), 'heaphook-watch-'));
    const socketPath = join(dir, 'events.sock');
    let watch: WatchServer | undefined;
    const server = createServer((socket) => watch?.accept(socket, options));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    if (options.owner !== undefined) {
      chownSync(dir, options.owner.uid, options.owner.gid);
      chownSync(socketPath, options.owner.uid, options.owner.gid);
    }
    watch = new WatchServer(server, dir, socketPath);
    return watch;
  }

  private accept(socket: Socket, options: WatchServerOptions): void {
    if (!this.accepting) {
      socket.destroy();
      return;
    }
    let pending: Buffer = Buffer.alloc(0);
    let connection: WatchConnection | undefined;
    const { listener } = options;
    const fail = (error: Error): void => {
      socket.destroy();
      if (connection === undefined) return;
      connection.finish({
        reason: `connection lost (${error.message})`,
        recorded: connection.events,
        dropped: connection.dropped,
        restored: false,
      });
    };
    socket.on('data', (chunk: Buffer) => {
      if (connection !== undefined) connection.lastDataAt = Date.now();
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let at = 0;
      if (connection === undefined) {
        if (pending.length < HELLO_SIZE) return;
        let hello: Hello;
        try {
          hello = decodeHello(pending.subarray(0, HELLO_SIZE));
        } catch (error) {
          fail(error as Error);
          return;
        }
        at = HELLO_SIZE;
        connection = new WatchConnection(hello, socket);
        this.connections.add(connection);
        socket.write(encodeConfig(options.events, options.ringRecords));
        listener.connected?.(connection);
      }
      for (; pending.length - at >= RECORD_SIZE; at += RECORD_SIZE) {
        this.dispatch(connection, decodeRecord(pending, at), listener);
      }
      pending = pending.subarray(at);
      listener.flush?.();
    });
    socket.on('error', fail);
    socket.on('close', () => {
      if (connection === undefined) return;
      if (connection.end === undefined) {
        const end: StreamEnd = {
          reason: 'closed without END (exec, _exit, or killed)',
          recorded: connection.events,
          dropped: connection.dropped,
          restored: false,
        };
        listener.ended?.(connection, end);
        connection.finish(end);
      } else {
        connection.finish(connection.end);
      }
    });
  }

  private dispatch(connection: WatchConnection, record: RawRecord, listener: StreamListener): void {
    switch (record.type) {
      case CONTROL_STARTED: {
        connection.start = {
          status: record.address,
          mode: installModes[record.size] ?? 'none',
          events: record.arg0,
          ringRecords: record.arg1,
        };
        listener.started?.(connection, connection.start);
        this.resolveFirstStart();
        return;
      }
      case CONTROL_DROPPED:
        connection.dropped += record.size;
        listener.dropped?.(connection, record.size);
        return;
      case CONTROL_END: {
        const end: StreamEnd = {
          reason: endReasons[record.arg0] ?? `reason ${record.arg0}`,
          recorded: record.address,
          dropped: record.size,
          restored: record.arg1 === 1,
        };
        connection.end = end;
        listener.ended?.(connection, end);
        return;
      }
      default:
        connection.events += 1;
        listener.event(connection, record);
    }
  }

  /** No new connection from now on (processes started later are not watched). */
  stopAccepting(): void {
    if (!this.accepting) return;
    this.accepting = false;
    this.server.close();
  }

  /** Asks every connected process to detach. */
  detachAll(): void {
    for (const c of this.connections) c.detach();
  }

  /** Resolves when every connection made so far has ended (END received, or closed). */
  async settled(): Promise<void> {
    await Promise.all([...this.connections].map((c) => c.ended));
  }

  /** Resolves true when every connection made so far has ended, false when one sent no byte
   * for quietMs without ending (a detach waits for what is still coming, not for a clock). */
  async settledUnlessQuiet(quietMs: number): Promise<boolean> {
    const ends = await Promise.all([...this.connections].map((c) => c.endsUnlessQuiet(quietMs)));
    return ends.every(Boolean);
  }

  /** The first connection from pid, once its STARTED record is in; undefined after timeoutMs. */
  async started(pid: number, timeoutMs: number): Promise<WatchConnection | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (const c of this.connections) {
        if (c.pid === pid && (c.start !== undefined || c.end !== undefined)) return c;
      }
      if (Date.now() >= deadline) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Stops accepting, drops every connection still open (nothing is read or reported after
   * this: the listener may have closed its output) and removes the folder. */
  close(): void {
    this.stopAccepting();
    for (const c of this.connections) c.drop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
