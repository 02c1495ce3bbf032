/**
 * `heaphook attach PID --agent SOCKET`: processes started before the agent, without
 * HEAPHOOK_AGENT, start reporting to it: under a heaphook backend (TLSF, whose exact figures
 * cover the blocks from before the attach too) and under glibc's malloc alone. What they
 * allocate after the attach is sampled; a second attach leaves them as they are.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  agentForSuite,
  getText,
  heaphookBin,
  metricValue,
  release,
  stopChild,
  tlsfLib,
  waitForLine,
  waitUntil,
} from '../helpers/agent.js';

const grow = join(release, 'hh_agent_grow');
const BLOCK_BYTES = 5000;
const BATCHES = 100;
/* Small batches: a burst of samples beyond the socket buffer is dropped (README, "Bursts"). */
const BATCH_BLOCKS = 100;

/** Sends one request ("N": allocate N blocks) and waits for its answer. */
async function request(program: ChildProcess, blocks: number): Promise<number> {
  const answer = waitForLine(program, 'stdout', /"uordblks":(\d+)\}\n$/);
  program.stdin?.write(`${blocks}\n`);
  return Number((await answer)[1]);
}

function heaphook(args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [heaphookBin, ...args], { encoding: 'utf8' });
}

describe('heaphook attach PID --agent SOCKET', () => {
  const served = agentForSuite('attach');
  const { socket } = served;

  for (const [allocator, env] of [
    ['tlsf', { LD_PRELOAD: tlsfLib }],
    ['glibc', {}],
  ] as const) {
    it(`makes a process running under ${allocator} report what it allocates after`, async () => {
      const program = spawn(grow, [], {
        env: { ...process.env, ...env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      try {
        await waitForLine(program, 'stdout', /"started":true/);
        await request(program, 100); // before the attach: not sampled
        const pid = String(program.pid);

        const attached = heaphook(['attach', pid, '--agent', socket, '--sample-bytes', '4KiB']);
        expect(attached.stderr).toBe('');
        expect(attached.status).toBe(0);
        expect(attached.stdout).toBe(`process ${pid} reports to unix:${socket}\n`);

        let exact = 0;
        for (let i = 0; i < BATCHES; i++) exact = await request(program, BATCH_BLOCKS);
        const url = `http://127.0.0.1:${served.agent.httpPort}/metrics`;
        const held = BATCHES * BATCH_BLOCKS * BLOCK_BYTES;
        const page = await waitUntil('the samples of the requests', async () => {
          const text = await getText(url);
          const sampled = metricValue(text, 'heaphook_heap_live_bytes', { pid, source: 'sampled' });
          return sampled !== undefined && sampled > held * 0.9 ? text : undefined;
        });
        const sampled = metricValue(page, 'heaphook_heap_live_bytes', { pid, source: 'sampled' });
        expect(Math.abs((sampled ?? 0) - held) / held).toBeLessThan(0.05);
        expect(metricValue(page, 'heaphook_dropped_samples_total', { pid })).toBe(0);
        expect(
          metricValue(page, 'heaphook_heap_live_bytes', { pid, backend: allocator }),
        ).toBeDefined();
        if (allocator === 'tlsf') {
          // The backend's own count, blocks from before the attach included.
          await waitUntil('the exact live bytes', async () => {
            const text = await getText(url);
            return metricValue(text, 'heaphook_heap_live_bytes', { pid, source: 'exact' }) === exact
              ? true
              : undefined;
          });
        }

        const again = heaphook(['attach', pid, '--agent', socket]);
        expect(again.status).toBe(0);
        expect(again.stdout).toContain('reports to an agent already');
        expect(served.agent.registry.all().filter((p) => String(p.pid) === pid)).toHaveLength(1);
      } finally {
        program.stdin?.end();
        await new Promise((r) => program.once('exit', r));
      }
      expect(program.exitCode).toBe(0);
    }, 60_000);
  }

  it('says in one line what is wrong with its arguments', () => {
    const notPid = heaphook(['attach', 'nginx', '--agent', socket]);
    expect(notPid.status).not.toBe(0);
    expect(notPid.stderr).toContain('nginx is not a process id, e.g. heaphook attach 1234');
    const gone = heaphook(['attach', '999999999', '--agent', socket]);
    expect(gone.status).not.toBe(0);
    expect(gone.stderr).toMatch(/no (such )?process/);
    const long = heaphook(['attach', String(process.pid), '--agent', `/tmp/${'x'.repeat(120)}`]);
    expect(long.status).not.toBe(0);
    expect(long.stderr).toContain('a Unix socket path is at most 107 bytes');
  });
});
