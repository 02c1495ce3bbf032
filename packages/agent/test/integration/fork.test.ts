/**
 * A process that forks: the child reports on a connection of its own (its pid, its heap), and
 * the parent's profile goes on without the child's allocations.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  agentForSuite,
  runUnderAgent,
  stopChild,
  tlsfLib,
  waitForLine,
  waitUntil,
} from '../helpers/agent.js';

const SCRIPT = String.raw`
import os, sys, time
parent_keep = [bytes(4096) for _ in range(2000)]
pid = os.fork()
if pid == 0:
    child_keep = [bytes(8192) for _ in range(4000)]
    print("child", os.getpid(), flush=True)
    sys.stdin.read()
    os._exit(0)
print("parent", os.getpid(), flush=True)
sys.stdin.read()
os.waitpid(pid, 0)
`;

describe('fork under the agent', () => {
  const served = agentForSuite('fork');
  const { socket } = served;

  /* The client preloaded ahead of TLSF (its own malloc family), or loaded by TLSF's core and
   * reached by GOT patching: a fork child reports on its own either way. */
  const launches: [string, () => ChildProcess][] = [
    [
      'heaphook run --agent',
      () =>
        runUnderAgent(socket, 'tlsf', { HEAPHOOK_AGENT_SAMPLE_BYTES: '16KiB' }, 'python3', [
          '-c',
          SCRIPT,
        ]),
    ],
    [
      'TLSF alone in LD_PRELOAD',
      () =>
        spawn('python3', ['-c', SCRIPT], {
          env: {
            ...process.env,
            LD_PRELOAD: tlsfLib,
            HEAPHOOK_AGENT: `unix:${socket}`,
            HEAPHOOK_AGENT_SAMPLE_BYTES: '16KiB',
          },
          stdio: ['pipe', 'pipe', 'pipe'],
        }),
    ],
  ];
  it.each(launches)(
    'gives the child a profile of its own (%s)',
    async (_how, launch) => {
      const program = launch();
      const both = await waitForLine(
        program,
        'stdout',
        /(child|parent) (\d+)\n[\s\S]*(child|parent) (\d+)\n/,
      );
      const pidOf = (who: string): number => Number(both[1] === who ? both[2] : both[4]);
      const child = pidOf('child');
      const parent = pidOf('parent');
      const [p, c] = await waitUntil('both processes with samples', async () => {
        const pp = served.agent.registry.find(parent);
        const cp = served.agent.registry.find(child);
        return pp !== undefined &&
          cp !== undefined &&
          cp.stats !== undefined &&
          cp.liveSampledBytes > 20e6
          ? [pp, cp]
          : undefined;
      });
      expect(c.pid).toBe(child);
      expect(c.comm).toBe('python3');
      // The child's 32 MB of bytes objects are its own; the parent holds its 8 MB, not the child's.
      expect(c.liveSampledBytes).toBeGreaterThan(20e6);
      expect(p.liveSampledBytes).toBeLessThan(20e6);
      program.stdin?.end();
      await stopChild(program);
    },
    60_000,
  );
});
