/**
 * Real services under the agent, for the minute: a python3 HTTP service started with
 * `heaphook run --agent` (the agent's client preloaded ahead of TLSF) and a node one started
 * with TLSF alone in LD_PRELOAD and HEAPHOOK_AGENT (the backend's core loads the client) answer
 * requests concurrently for SERVICE_SECONDS while the agent keeps their profiles; the agent's
 * own memory stays flat. Then the agent is killed and restarted while they run: they keep
 * answering, reconnect, and count the samples they dropped meanwhile.
 */
import { spawn, type ChildProcess } from 'node:child_process';
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
  tlsfLib,
  waitForLine,
  waitUntil,
  type AgentProcess,
} from '../helpers/agent.js';

const SERVICE_SECONDS = 60;
/* 64 KiB rather than the default 512 KiB: enough samples in the minute to make the agent's
 * tables turn over (the memory-flat claim is about them). */
const SAMPLE_BYTES = '64KiB';

interface Service {
  readonly name: string;
  readonly child: ChildProcess;
  readonly port: number;
  pid: number;
  answered: number;
}

/** How a service comes to report: through the CLI, or with the backend library alone. */
type Launch = 'heaphook run --agent' | 'backend alone';

async function startService(
  name: string,
  socket: string,
  command: string,
  script: string,
  launch: Launch,
): Promise<Service> {
  const child =
    launch === 'heaphook run --agent'
      ? runUnderAgent(socket, 'tlsf', { HEAPHOOK_AGENT_SAMPLE_BYTES: SAMPLE_BYTES }, command, [
          script,
        ])
      : spawn(command, [script], {
          env: {
            ...process.env,
            LD_PRELOAD: tlsfLib,
            HEAPHOOK_AGENT: `unix:${socket}`,
            HEAPHOOK_AGENT_SAMPLE_BYTES: SAMPLE_BYTES,
          },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
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
    services.push(
      await startService('python3', socket, 'python3', servicePy, 'heaphook run --agent'),
    );
    services.push(
      await startService('node', socket, process.execPath, serviceMjs, 'backend alone'),
    );
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
    // Each service has its own request loop, all running at once: a slow answer of one never
    // holds the other back. The agent's resident size is read every second meanwhile.
    const rss: number[] = [];
    const reading = setInterval(() => rss.push(residentBytes(agent.child.pid!)), 1000);
    const end = Date.now() + SERVICE_SECONDS * 1000;
    try {
      await Promise.all(
        services.map(async (s) => {
          for (let i = 0; Date.now() < end; i++) await request(s, 500 + ((i * 37) % 2000));
        }),
      );
    } finally {
      clearInterval(reading);
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
  }, 180_000);

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
