/**
 * The agent's command line and HTTP side: bad flags end in one line naming the fix; the HTTP
 * side only reads; a bearer token guards every endpoint but /healthz; /metrics speaks both
 * Prometheus text and OpenMetrics.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startAgent, type RunningAgent } from '../../src/agent/server.js';
import { heaphookBin, tempDir } from '../helpers/agent.js';

function heaphook(args: string[]): { status: number | null; stderr: string } {
  const out = spawnSync(process.execPath, [heaphookBin, ...args], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: out.status, stderr: out.stderr };
}

describe('heaphook agent flags', () => {
  it('refuses a non-loopback --http without a token, naming the fix', () => {
    const dir = tempDir('flags');
    const out = heaphook(['agent', '--socket', join(dir.path, 's'), '--http', '0.0.0.0:6061']);
    dir.remove();
    expect(out.status).toBe(2);
    expect(out.stderr.trim().split('\n')).toHaveLength(1);
    expect(out.stderr).toContain('add --token-file FILE');
  });

  it('refuses a malformed --http and a --socket path that is not a socket', () => {
    const dir = tempDir('flags');
    const bad = heaphook(['agent', '--socket', join(dir.path, 's'), '--http', 'localhost']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('expected HOST:PORT, e.g. --http 127.0.0.1:6061');
    const file = join(dir.path, 'file');
    writeFileSync(file, 'data');
    const taken = heaphook(['agent', '--socket', file, '--http', '127.0.0.1:0']);
    dir.remove();
    expect(taken.status).not.toBe(0);
    expect(taken.stderr).toContain('exists and is not a socket: choose another --socket path');
  });
});

describe('the HTTP side', () => {
  const dir = tempDir('http');
  const token = 'a-token-of-sixteen-or-more';
  let agent: RunningAgent;
  let url = '';

  beforeAll(async () => {
    agent = await startAgent({
      socket: join(dir.path, 'agent.sock'),
      httpHost: '127.0.0.1',
      httpPort: 0,
      bearerToken: token,
    });
    url = `http://127.0.0.1:${agent.httpPort}`;
  });
  afterAll(async () => {
    await agent?.close();
    dir.remove();
  });

  it('answers /healthz without the token and nothing else', async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const denied = await fetch(`${url}/metrics`);
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toBe('Bearer');
    expect(
      (await fetch(`${url}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status,
    ).toBe(401);
  });

  it('only reads: other methods get 405', async () => {
    const res = await fetch(`${url}/metrics`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });

  it('serves Prometheus text, or OpenMetrics when asked, with counters named as each wants', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const text = await fetch(`${url}/metrics`, { headers: auth });
    expect(text.headers.get('content-type')).toContain('text/plain; version=0.0.4');
    const body = await text.text();
    expect(body).toContain('# TYPE heaphook_agent_protocol_errors_total counter');
    expect(body).toContain('heaphook_agent_processes 0');
    const open = await fetch(`${url}/metrics`, {
      headers: { ...auth, accept: 'application/openmetrics-text;version=1.0.0' },
    });
    expect(open.headers.get('content-type')).toContain('application/openmetrics-text');
    const openBody = await open.text();
    expect(openBody).toContain('# TYPE heaphook_agent_protocol_errors counter');
    expect(openBody).toContain('heaphook_agent_protocol_errors_total 0');
    expect(openBody.endsWith('# EOF\n')).toBe(true);
  });

  it('says which process to name when none or several report', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const res = await fetch(`${url}/debug/pprof/heap`, { headers: auth });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('name a process: ?pid=N');
    const missing = await fetch(`${url}/debug/pprof/heap?pid=999999999`, { headers: auth });
    expect(missing.status).toBe(404);
  });
});
