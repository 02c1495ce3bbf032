/**
 * The agent's frames over a live socket (the decoder on its own: test/unit/frames.test.ts): a
 * live agent fed garbage closes those connections, counts them, and goes on serving a real
 * process; another user's process is refused; a client without an agent runs on.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

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
import { hello, random } from '../helpers/frames.js';

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
