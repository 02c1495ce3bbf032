/**
 * A process that forks: the child reports on a connection of its own (its pid, its heap), and
 * the parent's profile goes on without the child's allocations; also when the parent's threads
 * are sampling, sending on the parent's link, at every fork (native/client/fork.c).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  agentForSuite,
  release,
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
  const launchesOf = (command: string, args: string[]): [string, () => ChildProcess][] => [
    [
      'heaphook run --agent',
      () => runUnderAgent(socket, 'tlsf', { HEAPHOOK_AGENT_SAMPLE_BYTES: '16KiB' }, command, args),
    ],
    [
      'TLSF alone in LD_PRELOAD',
      () =>
        spawn(command, args, {
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
  it.each(launchesOf('python3', ['-c', SCRIPT]))(
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

  /* test/native/fork_storm.c: four children forked while four threads allocate and free without pause. */
  const STORM_CHILDREN = 4;
  const STORM_CHILD_BYTES = 2000 * 4096;
  it.each(launchesOf(join(release, 'hh_agent_fork_storm'), []))(
    "gives every child a link of its own while the parent's threads sample (%s)",
    async (_how, launch) => {
      const program = launch();
      // The parent's line comes once every child is forked, the children's as they finish.
      const printed = (
        await waitForLine(
          program,
          'stdout',
          new RegExp(`^(?=[\\s\\S]*parent \\d+\\n)(?:[\\s\\S]*?child \\d+\\n){${STORM_CHILDREN}}`),
        )
      ).input;
      const parent = Number(/parent (\d+)/.exec(printed)![1]);
      const children = [...printed.matchAll(/child (\d+)/g)].map((m) => Number(m[1]));
      expect(new Set(children).size).toBe(STORM_CHILDREN);
      const profiles = await waitUntil('every child with its heap', async () => {
        const found = children.map((pid) => served.agent.registry.find(pid));
        return found.every((c) => c !== undefined && c.liveSampledBytes > STORM_CHILD_BYTES / 2)
          ? found
          : undefined;
      });
      for (const [i, c] of profiles.entries()) expect(c!.pid).toBe(children[i]);
      // The parent frees all it allocates: its profile holds none of the children's blocks.
      const p = served.agent.registry.find(parent);
      expect(p).toBeDefined();
      expect(p!.liveSampledBytes).toBeLessThan(STORM_CHILD_BYTES / 2);
      program.stdin?.end();
      await stopChild(program);
    },
    60_000,
  );
});
