// The heaphook conformance suite (packages/core's heaphook_conformance, which checks whatever
// serves malloc in its process) under the emulation: with the TLSF-based plug-in, with the
// system allocator (MALLOCTYPE unset), and with a wrong expected name (so it really fails).
import { existsSync } from 'node:fs';

import { beforeAll, describe, expect, it } from 'vitest';

import { conformance, requireBuilt, runEmul } from './helpers/run.js';

const QUIET = { HEAPHOOK_CONFORMANCE_QUIET: '1' };

beforeAll(() => {
  requireBuilt();
  if (!existsSync(conformance)) {
    throw new Error(`${conformance} is missing: run \`npx nx build core\``);
  }
});

describe('conformance suite under the emulation', () => {
  it('passes every group with the TLSF plug-in, served through the AIX entry points', () => {
    const r = runEmul(conformance, ['aix:libheaphook_aix_tlsf'], {
      env: QUIET,
      timeoutMs: 170_000,
    });
    expect(r.stdout).toMatch(/backend aix:libheaphook_aix_tlsf: 12 groups, \d+ checks, 0 failed/);
    expect(r.status).toBe(0);
    // The main process's counters: the entry points really served the suite.
    const main = r.reports.find((x) => Number(x.threads) > 0)!;
    expect(main).toBeDefined();
    expect(main.backend).toBe('aix:libheaphook_aix_tlsf');
    expect(main.malloc).toBeGreaterThan(200_000);
    expect(main.free).toBeGreaterThan(200_000);
    expect(main.calloc).toBeGreaterThan(0);
    expect(main.realloc).toBeGreaterThan(0);
    expect(main.memalign).toBeGreaterThan(0);
    expect(main.mallinfo).toBeGreaterThan(0);
    expect(main.mallopt).toBeGreaterThan(0);
    expect(main.start).toBe(1);
    expect(main.init).toBe(1);
    expect(main.prefork).toBe(200);
    expect(main.postfork_parent).toBe(200);
  });

  it('passes with MALLOCTYPE unset (the system allocator, glibc) and reports aix:default', () => {
    const r = runEmul(conformance, ['aix:default', 'backend', 'sizes', 'alignment', 'fork'], {
      archive: null,
      env: QUIET,
    });
    expect(r.stdout).toMatch(/backend aix:default: 4 groups, \d+ checks, 0 failed/);
    expect(r.status).toBe(0);
  });

  it('fails when the suite expects another backend', () => {
    const r = runEmul(conformance, ['tlsf', 'backend'], { env: QUIET });
    expect(r.stdout).toContain('active backend is "aix:libheaphook_aix_tlsf", expected "tlsf"');
    expect(r.status).not.toBe(0);
  });
});
