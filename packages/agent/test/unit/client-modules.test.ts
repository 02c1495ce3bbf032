// The client's native modules on their own, through test/native/client_unit.c (sampler.c,
// link.c, extras.c and fork.c without the hooks), the program playing the agent: sampling by
// bytes at the rate 1 - exp(-size / mean) and the table of sampled addresses (sampler.c); the
// agent's address, each frame's layout, and a reused descriptor never written to (link.c); a
// fork child's own connection beside the parent's (fork.c).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { allChecksPassed, unitChecks } from '@heaphook/core/testing';

import { release, tempDir } from '../helpers/agent.js';

const CHECKS = 27;

const dir = tempDir('client-unit');
afterAll(() => dir.remove());

describe("the client's modules", () => {
  it(`pass their ${CHECKS} checks, each one named`, () => {
    const r = spawnSync(join(release, 'hh_agent_client_unit'), [join(dir.path, 'agent.sock')], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    const checks = unitChecks(r.stdout);
    expect(checks.failed, r.stdout).toEqual([]);
    expect(checks.passed).toBe(CHECKS);
    expect(checks.summary).toBe(allChecksPassed(CHECKS));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
