/**
 * The figures of other heaphook libraries in a reporting process, in /metrics when they are
 * loaded: the bytes ucm-hooks sees mapped and unmapped (its VM events), and heaptrack's leak
 * checks (how many, and the last one's leaked blocks and bytes). A process without them has
 * none of these series.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import {
  agentForSuite,
  getText,
  heaptrackLib,
  metricValue,
  release,
  tlsfLib,
  ucmLib,
  waitForLine,
  waitUntil,
} from '../helpers/agent.js';

const extras = join(release, 'hh_agent_extras');
const MIB = 2 ** 20;

function startExtras(preload: string, socket: string, cwd: string): ChildProcess {
  return spawn(extras, [], {
    cwd, // heaptrack writes its log here
    env: { ...process.env, LD_PRELOAD: preload, HEAPHOOK_AGENT: `unix:${socket}` },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

async function ask(program: ChildProcess, line: string, answer: RegExp): Promise<number> {
  const reply = waitForLine(program, 'stdout', answer);
  program.stdin?.write(`${line}\n`);
  return Number((await reply)[1]);
}

async function end(program: ChildProcess): Promise<void> {
  program.stdin?.end();
  await new Promise((r) => program.once('exit', r));
}

describe("ucm-hooks' mapped bytes and heaptrack's leak figures in /metrics", () => {
  const served = agentForSuite('extras');
  const { socket, dir } = served;
  let url = '';

  beforeAll(() => {
    url = `http://127.0.0.1:${served.agent.httpPort}/metrics`;
  });

  /** The series of pid once the process has sent STATS with name in it. */
  async function seriesOf(pid: string, name: string, atLeast = 0): Promise<string> {
    return waitUntil(`${name} of ${pid}`, async () => {
      const text = await getText(url);
      const value = metricValue(text, name, { pid });
      return value !== undefined && value >= atLeast ? text : undefined;
    });
  }

  it('counts the bytes a process maps, with ucm-hooks loaded', async () => {
    const program = startExtras(`${ucmLib} ${tlsfLib}`, socket, dir.path);
    try {
      await waitForLine(program, 'stdout', /"started":true/);
      const pid = String(program.pid);
      const before = await seriesOf(pid, 'heaphook_vm_mapped_bytes_total');
      const start = metricValue(before, 'heaphook_vm_mapped_bytes_total', { pid }) ?? 0;
      expect(await ask(program, 'map 64', /"mapped":(\d+)/)).toBe(64 * MIB);
      const after = await seriesOf(pid, 'heaphook_vm_mapped_bytes_total', start + 64 * MIB);
      expect(metricValue(after, 'heaphook_vm_unmapped_bytes_total', { pid })).toBeDefined();
      // No heaptrack here: no leak series.
      expect(metricValue(after, 'heaphook_leak_checks_total', { pid })).toBeUndefined();
    } finally {
      await end(program);
    }
    expect(program.exitCode).toBe(0);
  }, 60_000);

  it("gives the last leak check's figures, with heaptrack's leak checking on", async () => {
    const program = startExtras(`${heaptrackLib} ${tlsfLib}`, socket, dir.path);
    try {
      await waitForLine(program, 'stdout', /"started":true/);
      const pid = String(program.pid);
      const none = await seriesOf(pid, 'heaphook_leak_checks_total');
      expect(metricValue(none, 'heaphook_leak_checks_total', { pid })).toBe(0);
      expect(metricValue(none, 'heaphook_leaked_blocks', { pid })).toBe(0);
      const leaked = await ask(program, 'leak 50', /"leaked":(-?\d+)/);
      expect(leaked).toBeGreaterThanOrEqual(50);
      const page = await seriesOf(pid, 'heaphook_leak_checks_total', 1);
      expect(metricValue(page, 'heaphook_leaked_blocks', { pid })).toBe(leaked);
      expect(metricValue(page, 'heaphook_leaked_bytes', { pid })).toBeGreaterThanOrEqual(50 * 1000);
      // No ucm-hooks here: no mapped-bytes series.
      expect(metricValue(page, 'heaphook_vm_mapped_bytes_total', { pid })).toBeUndefined();
    } finally {
      await end(program);
    }
    expect(program.exitCode).toBe(0);
  }, 60_000);
});
