/**
 * TLSF's real-time configuration (the tlsf-rt variant: a pool sized for the workload and
 * pre-faulted) with its fast front (the thread cache, remote frees, thread heaps) takes no page
 * fault in the timed phase of the latency workloads: the 10 kHz control loop (latency) and
 * malloc/free back to back (latency_b2b). Page faults are counted by the workloads themselves
 * (getrusage around the timed phase); no timing is asserted. Needs `nx build bench tlsf`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { listBackends } from '@heaphook/core';
import { afterAll, describe, expect, it } from 'vitest';

import { discoverAllocators } from '../../src/allocators.js';
import { runOne } from '../../src/launcher.js';
import { packageDir } from '../../src/paths.js';
import { selectWorkloads } from '../../src/workloads.js';

const scratchRoot = mkdtempSync(join(tmpdir(), 'bench-realtime-'));
afterAll(() => rmSync(scratchRoot, { recursive: true, force: true }));

const { allocators } = discoverAllocators({ backends: listBackends({ from: packageDir }) });
const rt = allocators.find((a) => a.name === 'tlsf-rt');

describe('tlsf-rt: no page fault in the timed phase', () => {
  for (const name of ['latency', 'latency_b2b']) {
    it(`${name}, one and two threads`, async () => {
      expect(rt?.status, 'build the tlsf package: npx nx build tlsf').toBe('ready');
      for (const threads of [1, 2]) {
        const [w] = selectWorkloads({ profile: 'quick', threads: [threads], only: [name] });
        const r = await runOne(0, 0, w!, rt!, { timeoutS: 120, scratchRoot });
        expect(r.status, r.error).toBe('ok');
        expect(r.reported?.minflt, `${name} with ${threads} thread(s)`).toBe(0);
      }
    });
  }
});
