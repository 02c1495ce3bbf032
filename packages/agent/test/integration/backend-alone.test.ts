/**
 * HEAPHOOK_AGENT=unix:PATH with a backend library preloaded alone (no libheaphook_agent.so in
 * LD_PRELOAD): the core every backend links loads the agent's client at start-up and the
 * process reports, with its live bytes in /metrics. A bad value, or no client to load, stops
 * the program before main with one line; unset, the client is not even loaded.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  agentForSuite,
  agentLib,
  exampleLib,
  getText,
  hold50,
  repoDir,
  metricValue,
  tlsfLib,
  waitForLine,
  waitUntil,
} from '../helpers/agent.js';

const HELD_BYTES = 50_000_000;

describe('HEAPHOOK_AGENT with only a backend library preloaded', () => {
  const served = agentForSuite('alone');
  const { socket, dir } = served;

  for (const [backend, preload, how] of [
    ['tlsf', tlsfLib, 'LD_PRELOAD=libheaphook_tlsf.so'],
    ['example', exampleLib, 'LD_PRELOAD=libheaphook_example.so'],
    // The client behind the backend: not the process's malloc, it redirects the family itself.
    ['tlsf', `${tlsfLib} ${agentLib}`, 'LD_PRELOAD="libheaphook_tlsf.so libheaphook_agent.so"'],
  ] as const) {
    it(`reports a C program's live bytes under ${how}`, async () => {
      const program = spawn(hold50, [], {
        env: {
          ...process.env,
          LD_PRELOAD: preload,
          HEAPHOOK_AGENT: `unix:${socket}`,
          HEAPHOOK_AGENT_SAMPLE_BYTES: '4KiB',
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      try {
        const held = await waitForLine(program, 'stdout', /"uordblks":(\d+)/);
        const exact = Number(held[1]);
        const pid = String(program.pid);
        const url = `http://127.0.0.1:${served.agent.httpPort}/metrics`;
        // The exact series is the backend's count, sent every second: it reaches the
        // program's own mallinfo2 figure once the STATS after the allocations arrives.
        const page = await waitUntil('the exact live bytes', async () => {
          const text = await getText(url);
          const value = metricValue(text, 'heaphook_heap_live_bytes', { pid, source: 'exact' });
          return value === exact ? text : undefined;
        });
        expect(metricValue(page, 'heaphook_heap_live_bytes', { pid, backend })).toBeDefined();
        const sampled = metricValue(page, 'heaphook_heap_live_bytes', {
          pid,
          source: 'sampled',
        });
        expect(Math.abs((sampled ?? 0) - HELD_BYTES) / HELD_BYTES).toBeLessThan(0.05);
        expect(metricValue(page, 'heaphook_dropped_samples_total', { pid })).toBe(0);
        // One connection: the core left a client that was preloaded to start itself.
        expect(served.agent.registry.all().filter((p) => String(p.pid) === pid)).toHaveLength(1);
      } finally {
        program.stdin?.end();
        await new Promise((r) => program.once('exit', r));
      }
      expect(program.exitCode).toBe(0);
    }, 60_000);
  }

  it('keeps the core conformance suite passing (threads and fork included) while reporting', async () => {
    const suite = join(repoDir, 'packages', 'core', 'build', 'Release', 'heaphook_conformance');
    const run = spawn(suite, ['tlsf'], {
      env: {
        ...process.env,
        LD_PRELOAD: tlsfLib,
        HEAPHOOK_AGENT: `unix:${socket}`,
        HEAPHOOK_AGENT_SAMPLE_BYTES: '4KiB',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    run.stdout.on('data', (d: Buffer) => (out += d.toString()));
    run.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const connected = waitUntil('the suite connected', async () =>
      served.agent.registry.all().some((p) => p.pid === run.pid) ? true : undefined,
    );
    await new Promise((r) => run.once('exit', r));
    expect(run.exitCode, out.slice(-2000)).toBe(0);
    expect(out).toMatch(/heaphook conformance: backend tlsf: \d+ groups, \d+ checks, 0 failed/);
    await connected;
  }, 180_000);

  it('stops the program before main with one line naming HEAPHOOK_AGENT for a bad value', () => {
    const out = spawnSync(hold50, ['0'], {
      env: { ...process.env, LD_PRELOAD: tlsfLib, HEAPHOOK_AGENT: 'tcp:127.0.0.1:6061' },
      encoding: 'utf8',
    });
    expect(out.status).toBe(78);
    expect(out.stdout).toBe(''); // main never ran
    expect(out.stderr.trim().split('\n')).toHaveLength(1);
    expect(out.stderr).toContain('HEAPHOOK_AGENT="tcp:127.0.0.1:6061"');
    expect(out.stderr).toContain('e.g. HEAPHOOK_AGENT=unix:/run/heaphook/agent.sock');
  });

  it('stops the program before main naming HEAPHOOK_AGENT_CLIENT when the client is missing', () => {
    const out = spawnSync(hold50, ['0'], {
      env: {
        ...process.env,
        LD_PRELOAD: tlsfLib,
        HEAPHOOK_AGENT: `unix:${socket}`,
        HEAPHOOK_AGENT_CLIENT: join(dir.path, 'no-such-client.so'),
      },
      encoding: 'utf8',
    });
    expect(out.status).toBe(78);
    expect(out.stdout).toBe('');
    expect(out.stderr.trim().split('\n')).toHaveLength(1);
    expect(out.stderr).toContain('HEAPHOOK_AGENT_CLIENT=');
    expect(out.stderr).toContain('no-such-client.so is not a readable file');
  });

  it('loads the client only when HEAPHOOK_AGENT is set', () => {
    const maps = (env: Record<string, string>): string =>
      spawnSync('cat', ['/proc/self/maps'], {
        env: { ...process.env, LD_PRELOAD: tlsfLib, ...env },
        encoding: 'utf8',
      }).stdout;
    expect(maps({})).toContain('libheaphook_tlsf.so');
    expect(maps({})).not.toContain('libheaphook_agent.so');
    // No agent at that path: the program runs on, reporting nothing.
    expect(maps({ HEAPHOOK_AGENT: `unix:${join(dir.path, 'nobody.sock')}` })).toContain(
      'libheaphook_agent.so',
    );
  });
});
