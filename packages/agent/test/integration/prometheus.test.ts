/**
 * The done-means of the agent with the real servers on loopback: Prometheus (Debian's
 * `prometheus`) scrapes `heaphook agent` every second while a C program holding exactly
 * 50,000,000 bytes in 10,000 blocks runs under the agent with TLSF; `go tool pprof` reads the
 * agent's heap profile of it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  freePort,
  getText,
  hold50,
  runUnderAgent,
  startAgentProcess,
  stopChild,
  tempDir,
  waitForLine,
  waitUntil,
  type AgentProcess,
} from '../helpers/agent.js';

const HELD_BYTES = 50_000_000;
const TOLERANCE = 0.05;
/* 4 KiB: a 5,000-byte block is sampled with probability 0.70, so the sampled estimate of 50 MB
 * has a relative standard error of 0.65 % (the default 512 KiB gives 10 %: 95 samples). */
const SAMPLE_BYTES = '4KiB';

interface Mallinfo {
  pid: number;
  arena: number;
  uordblks: number;
  fordblks: number;
  keepcost: number;
}

describe('heaphook agent scraped by Prometheus, read by go tool pprof', () => {
  const dir = tempDir('prom');
  let agent: AgentProcess;
  let prometheus: ChildProcess;
  let program: ChildProcess;
  let promUrl = '';
  let figures: Mallinfo;

  beforeAll(async () => {
    const socket = join(dir.path, 'agent.sock');
    agent = await startAgentProcess(socket, await freePort());
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    const config = join(dir.path, 'prometheus.yml');
    writeFileSync(
      config,
      [
        'global:',
        '  scrape_interval: 1s',
        '  evaluation_interval: 1s',
        'scrape_configs:',
        '  - job_name: heaphook',
        '    static_configs:',
        `      - targets: ['127.0.0.1:${agent.port}']`,
        '',
      ].join('\n'),
    );
    prometheus = spawn(
      'prometheus',
      [
        `--config.file=${config}`,
        `--storage.tsdb.path=${join(dir.path, 'tsdb')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
      ],
      { stdio: 'ignore' },
    );
    await waitUntil('Prometheus ready', async () =>
      (await fetch(`${promUrl}/-/ready`)).ok ? true : undefined,
    );
    program = runUnderAgent(
      socket,
      'tlsf',
      { HEAPHOOK_AGENT_SAMPLE_BYTES: SAMPLE_BYTES },
      hold50,
      [],
    );
    const line = await waitForLine(program, 'stdout', /(\{"pid".*\})\n/);
    figures = JSON.parse(line[1]!) as Mallinfo;
  }, 120_000);

  afterAll(async () => {
    program?.stdin?.end();
    if (program !== undefined) await stopChild(program);
    if (prometheus !== undefined) await stopChild(prometheus);
    if (agent !== undefined) await agent.kill();
    dir.remove();
  });

  async function query(expr: string): Promise<number | undefined> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as { data: { result: { value: [number, string] }[] } };
    const first = body.data.result[0];
    return first === undefined ? undefined : Number(first.value[1]);
  }

  it("returns the program's live heap within 5 % of 50 MB, sampled and exact", async () => {
    const sel = `pid="${figures.pid}",comm="hh_agent_hold50",backend="tlsf"`;
    // The last block is held once the program printed its figures; wait for a scrape after it.
    const exact = await waitUntil('exact live series', async () => {
      const v = await query(`heaphook_heap_live_bytes{${sel},source="exact"}`);
      return v !== undefined && v >= HELD_BYTES ? v : undefined;
    });
    expect(Math.abs(exact - HELD_BYTES) / HELD_BYTES).toBeLessThan(TOLERANCE);
    expect(exact).toBe(figures.uordblks);
    const sampled = await waitUntil('sampled live series', () =>
      query(`heaphook_heap_live_bytes{${sel},source="sampled"}`),
    );
    expect(Math.abs(sampled - HELD_BYTES) / HELD_BYTES).toBeLessThan(TOLERANCE);
    expect(await query(`heaphook_dropped_samples_total{${sel}}`)).toBe(0);
  });

  it("returns TLSF's pool series exactly as the program's mallinfo2 gives them", async () => {
    const sel = `pid="${figures.pid}",backend="tlsf"`;
    expect(await query(`heaphook_pool_size_bytes{${sel}}`)).toBe(figures.arena);
    expect(figures.arena).toBe(100_000_000); // INITIAL_MEMPOOL_SIZE's default
    expect(await query(`heaphook_pool_free_bytes{${sel}}`)).toBe(figures.fordblks);
    expect(await query(`heaphook_pool_largest_free_block_bytes{${sel}}`)).toBe(figures.keepcost);
    expect(await query(`heaphook_pool_growths_total{${sel}}`)).toBe(0);
  });

  it('serves an in-use profile go tool pprof reads, its top stack the allocating function', async () => {
    const url = `${agent.url}/debug/pprof/heap?pid=${figures.pid}`;
    const out = spawnSync('go', ['tool', 'pprof', '-raw', url], {
      encoding: 'utf8',
      env: { ...process.env, PPROF_TMPDIR: dir.path, HOME: dir.path },
      timeout: 60_000,
    });
    expect(out.status, out.stderr).toBe(0);
    const raw = out.stdout;
    expect(raw).toContain(
      'alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes',
    );
    // Samples: "   objects   space   objects   space: loc loc ..."
    const samples = [...raw.matchAll(/^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+): ([\d ]+)$/gm)].map(
      (m) => ({
        inuseSpace: Number(m[4]),
        locations: m[5]!.trim().split(/\s+/),
      }),
    );
    const locationName = new Map(
      [...raw.matchAll(/^\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+)/gm)].map((m) => [m[1]!, m[2]!]),
    );
    samples.sort((a, b) => b.inuseSpace - a.inuseSpace);
    const top = samples[0]!;
    expect(locationName.get(top.locations[0]!)).toBe('hold_fifty_megabytes');
    expect(Math.abs(top.inuseSpace - HELD_BYTES) / HELD_BYTES).toBeLessThan(TOLERANCE);
    // By its name (a stable target for Parca or Pyroscope): the same profile.
    const byComm = await fetch(`${agent.url}/debug/pprof/heap?comm=hh_agent_hold50`);
    expect(byComm.status).toBe(200);
    expect(byComm.headers.get('content-disposition')).toContain(`heap.${figures.pid}.pb.gz`);
    // /debug/pprof/ lists it, /healthz answers.
    expect(await getText(`${agent.url}/debug/pprof/`)).toContain(`heap?pid=${figures.pid}`);
    expect(await getText(`${agent.url}/healthz`)).toBe('ok\n');
  });
});
