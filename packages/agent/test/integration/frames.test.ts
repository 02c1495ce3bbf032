/**
 * The agent's frame decoder: the layout of native/frames.h, and what it does with bytes that
 * break it. Random and mutated frames (a seeded generator, so a failure replays) never crash
 * the decoder: each either decodes or ends in a FrameError. A live agent fed garbage over its
 * socket closes those connections, counts them, and goes on serving a real process.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { FrameError, FrameReader, decodeFrame, MAX_FRAME_BYTES } from '../../src/agent/frames.js';
import { startAgent, type RunningAgent } from '../../src/agent/server.js';
import {
  agentForSuite,
  agentLib,
  tlsfLib,
  metricValue,
  getText,
  hold50,
  runUnderAgent,
  stopChild,
  tempDir,
  waitForLine,
  waitUntil,
} from '../helpers/agent.js';

function header(type: number, length: number): Buffer {
  const b = Buffer.alloc(length);
  b.writeUInt16LE(type, 0);
  b.writeUInt32LE(length, 4);
  return b;
}

function hello(comm = 'prog', backend = 'tlsf'): Buffer {
  const b = header(1, 72);
  b.writeUInt32LE(1, 8);
  b.writeBigUInt64LE(524288n, 16);
  b.write(comm, 24, 15, 'latin1');
  b.write(backend, 40, 31, 'latin1');
  return b;
}

function alloc(address: bigint, size: number, pcs: bigint[]): Buffer {
  const b = header(2, 32 + pcs.length * 8);
  b.writeBigUInt64LE(address, 8);
  b.writeBigUInt64LE(BigInt(size), 16);
  b.writeUInt32LE(pcs.length, 24);
  pcs.forEach((pc, i) => b.writeBigUInt64LE(pc, 32 + i * 8));
  return b;
}

function symbol(pc: bigint, name: string, module: string): Buffer {
  const text = 32 + name.length + module.length;
  const b = header(4, (text + 7) & ~7);
  b.writeBigUInt64LE(pc, 8);
  b.writeUInt16LE(name.length, 24);
  b.writeUInt16LE(module.length, 26);
  b.write(name + module, 32, 'latin1');
  return b;
}

/** xorshift32: the fuzzing below replays from its seed. */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

describe('frame decoder', () => {
  it('decodes each frame of the layout', () => {
    const frames = new FrameReader().push(
      Buffer.concat([
        hello('svc'),
        symbol(0x1000n, 'main', '/bin/svc'),
        alloc(0xabc0n, 5000, [0x1000n, 0x2000n]),
      ]),
    );
    expect(frames.map((f) => f.type)).toEqual(['hello', 'symbol', 'alloc']);
    expect(frames[0]).toMatchObject({
      comm: 'svc',
      backend: 'tlsf',
      sampleBytes: 524288,
      version: 1,
    });
    expect(frames[1]).toMatchObject({ pc: 0x1000n, name: 'main', module: '/bin/svc' });
    expect(frames[2]).toMatchObject({ address: 0xabc0n, size: 5000, pcs: [0x1000n, 0x2000n] });
  });

  it("decodes STATS with the extras (ucm-hooks' mapped bytes, leak figures) and without", () => {
    const stats = (length: number, fields: number[]): Buffer => {
      const b = header(5, length);
      fields.forEach((v, i) => b.writeBigUInt64LE(BigInt(v), 8 + i * 8));
      return b;
    };
    const counters = [10, 9, 8, 7, 6, 0, ...new Array<number>(11).fill(0)];
    const [before, vmOnly, both] = new FrameReader().push(
      Buffer.concat([
        stats(144, counters), // a client of before the extras
        stats(192, [...counters, 1, 4096, 1024, 0, 0, 0]),
        stats(192, [...counters, 3, 4096, 1024, 2, 5, 5000]),
      ]),
    );
    expect(before).toMatchObject({ allocsTotal: 10, vm: undefined, leaks: undefined });
    expect(vmOnly).toMatchObject({
      vm: { mappedBytesTotal: 4096, unmappedBytesTotal: 1024 },
      leaks: undefined,
    });
    expect(both).toMatchObject({ leaks: { checksTotal: 2, leakedBlocks: 5, leakedBytes: 5000 } });
    expect(() => new FrameReader().push(stats(160, counters))).toThrow(FrameError);
  });

  it('joins frames split across reads at any byte', () => {
    const bytes = Buffer.concat([hello(), alloc(16n, 100, [1n, 2n, 3n])]);
    for (let cut = 1; cut < bytes.length; cut++) {
      const reader = new FrameReader();
      const frames = [...reader.push(bytes.subarray(0, cut)), ...reader.push(bytes.subarray(cut))];
      expect(frames.map((f) => f.type)).toEqual(['hello', 'alloc']);
    }
  });

  it('refuses lengths, types and fields outside the layout', () => {
    const bad: [string, Buffer][] = [
      ['length beyond the largest frame', header(2, 8).fill(0xff, 4, 8)],
      ['unknown type', header(99, 16)],
      [
        'depth beyond 64',
        (() => {
          const b = alloc(1n, 1, []);
          b.writeUInt32LE(65, 24);
          return b;
        })(),
      ],
      [
        'depth disagreeing with the length',
        (() => {
          const b = alloc(1n, 1, [1n]);
          b.writeUInt32LE(0, 24);
          return b;
        })(),
      ],
      [
        'symbol text longer than the frame',
        (() => {
          const b = symbol(1n, 'f', 'm');
          b.writeUInt16LE(4000, 24);
          return b;
        })(),
      ],
      ['hello of the wrong size', header(1, 64)],
      [
        'reserved bits',
        (() => {
          const b = header(3, 16);
          b.writeUInt16LE(1, 2);
          return b;
        })(),
      ],
    ];
    for (const [what, frame] of bad) {
      expect(() => new FrameReader().push(frame), what).toThrow(FrameError);
    }
  });

  it('never holds more than one frame of a stream that has not ended', () => {
    const reader = new FrameReader();
    expect(reader.push(alloc(1n, 1, new Array<bigint>(64).fill(1n)).subarray(0, 100))).toEqual([]);
    expect(() => reader.push(Buffer.alloc(MAX_FRAME_BYTES * 4, 0xff))).toThrow(FrameError);
  });

  it('survives 20,000 random and mutated frames: each decodes or ends in a FrameError', () => {
    const next = random(0x5eed);
    const valid = [
      hello(),
      alloc(0x1000n, 64, [1n, 2n]),
      symbol(5n, 'fn', 'lib'),
      header(3, 16),
      header(5, 144),
      header(5, 192),
    ];
    let decoded = 0;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      let bytes: Buffer;
      if (i % 2 === 0) {
        bytes = Buffer.alloc(next() % 300);
        for (let j = 0; j < bytes.length; j++) bytes[j] = next() & 0xff;
        if (bytes.length >= 8 && i % 4 === 0) bytes.writeUInt32LE(bytes.length & ~7, 4); // plausible lengths
      } else {
        bytes = Buffer.from(valid[next() % valid.length]!);
        for (let flips = 1 + (next() % 4); flips > 0; flips--)
          bytes[next() % bytes.length] = next() & 0xff;
      }
      try {
        new FrameReader().push(bytes);
        decoded++;
      } catch (error) {
        expect(error).toBeInstanceOf(FrameError);
        refused++;
      }
      try {
        if (bytes.length >= 8) decodeFrame(bytes);
      } catch (error) {
        expect(error).toBeInstanceOf(FrameError);
      }
    }
    expect(decoded + refused).toBe(20_000);
    expect(refused).toBeGreaterThan(1000);
  });
});

describe('a live agent fed garbage', () => {
  const served = agentForSuite('fuzz');
  const { socket } = served;

  it('closes and counts bad connections, and still serves a real process', async () => {
    const next = random(42);
    const sends = 200;
    for (let i = 0; i < sends; i++) {
      const garbage = Buffer.alloc(8 + (next() % 2000));
      for (let j = 0; j < garbage.length; j++) garbage[j] = next() & 0xff;
      const bytes = i % 2 === 0 ? garbage : Buffer.concat([hello(), garbage]);
      await new Promise<void>((resolve) => {
        const c = connect(socket, () => c.end(bytes));
        c.on('error', () => resolve());
        c.on('close', () => resolve());
      });
    }
    const url = `http://127.0.0.1:${served.agent.httpPort}`;
    expect(await getText(`${url}/healthz`)).toBe('ok\n');
    const errors = metricValue(
      await getText(`${url}/metrics`),
      'heaphook_agent_protocol_errors_total',
      {},
    );
    expect(errors).toBeGreaterThan(sends / 2);

    const program = runUnderAgent(socket, 'tlsf', {}, hold50, []);
    const line = await waitForLine(program, 'stdout', /\{"pid":(\d+),/);
    const pid = line[1]!;
    const live = await waitUntil('the real process reported', async () => {
      const v = metricValue(await getText(`${url}/metrics`), 'heaphook_heap_live_bytes', {
        pid,
        source: 'exact',
      });
      return v !== undefined && v >= 50_000_000 ? v : undefined;
    });
    expect(live).toBeGreaterThanOrEqual(50_000_000);
    program.stdin?.end();
    await stopChild(program);
  }, 60_000);
});

describe('who may connect', () => {
  it("refuses another user's process by its SO_PEERCRED, even through a socket file it may open", async () => {
    const dir = tempDir('peercred');
    chmodSync(dir.path, 0o755);
    const socket = join(dir.path, 'agent.sock');
    const agent = await startAgent({ socket, httpHost: '127.0.0.1', httpPort: 0 });
    try {
      chmodSync(socket, 0o666); // take the file-mode fence away: the credentials check remains
      const child = spawn(
        'setpriv',
        ['--reuid=65534', '--regid=65534', '--clear-groups', hold50, '0'],
        {
          env: {
            ...process.env,
            HEAPHOOK_AGENT: `unix:${socket}`,
            LD_PRELOAD: `${agentLib} ${tlsfLib}`,
          },
          stdio: 'ignore',
        },
      );
      await new Promise((r) => child.once('exit', r));
      // setpriv itself is preloaded too: it reports as root (accepted), changes its credentials
      // with the client's thread in the process (setid.c keeps glibc from aborting it), and
      // execs the program, which runs on as nobody, refused.
      expect(child.exitCode).toBe(0);
      expect(agent.registry.rejectedConnections).toBeGreaterThan(0);
      expect(agent.registry.all().map((p) => p.comm)).not.toContain('hh_agent_hold50');
    } finally {
      await agent.close();
      dir.remove();
    }
  }, 30_000);
});

describe('the client against an agent that is not there', () => {
  it('runs the program to its end and says nothing', async () => {
    const dir = tempDir('absent');
    const child = spawn(hold50, ['0'], {
      env: {
        ...process.env,
        HEAPHOOK_AGENT: `unix:${join(dir.path, 'nobody.sock')}`,
        LD_PRELOAD: `${agentLib} ${tlsfLib}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await new Promise((r) => child.once('exit', r));
    dir.remove();
    expect(child.exitCode).toBe(0);
    expect(stderr).toBe('');
  });

  it('stops a program before main with one line naming HEAPHOOK_AGENT for a bad value', () => {
    const out = spawnSync(hold50, ['0'], {
      env: { ...process.env, HEAPHOOK_AGENT: '/run/agent.sock', LD_PRELOAD: agentLib },
      encoding: 'utf8',
    });
    expect(out.status).toBe(78);
    expect(out.stdout).toBe('');
    expect(out.stderr.trim().split('\n')).toHaveLength(1);
    expect(out.stderr).toContain('HEAPHOOK_AGENT="/run/agent.sock"');
    expect(out.stderr).toContain('HEAPHOOK_AGENT=unix:/run/heaphook/agent.sock');
  });
});
