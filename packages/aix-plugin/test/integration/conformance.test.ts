// The heaphook conformance suite (packages/core's heaphook_conformance, which checks whatever
// serves malloc in its process) under the emulation: with the TLSF-based plug-in, with the
// system allocator (MALLOCTYPE unset), and with a wrong expected name (so it really fails).
import { existsSync } from 'node:fs';

import { beforeAll, describe, expect, it } from 'vitest';

import { archives, conformance, fields, requireBuilt, runEmul } from '../helpers/run.js';

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

  // A plug-in that is not ours. threads and fork are left out: a heap that never reuses memory
  // grows to gigabytes there and each of the 200 forks copies its page tables (the probe in
  // emulation.test.ts checks threads and forks with the bump plug-in instead).
  const bumpGroups = ['backend', 'sizes', 'calloc', 'realloc', 'reallocarray', 'alignment'];
  bumpGroups.push('invalid-alignment', 'exhaustion', 'statistics');
  it.each([archives.bump, archives.bumpNoMemalign])(
    'passes with the bump plug-in %s',
    (archive) => {
      const name = `aix:${archive.replace(/\.a$/, '')}`;
      const r = runEmul(conformance, [name, ...bumpGroups], { archive, env: QUIET });
      expect(r.stdout).toMatch(new RegExp(`backend ${name}: 9 groups, \\d+ checks, 0 failed`));
      expect(r.status).toBe(0);
      // The plug-in's own counters: it served the suite; aligned requests went to
      // __posix_memalign__ when it has one, else to __malloc__.
      const c = fields(r.bump[0]!);
      expect(c.malloc).toBeGreaterThan(100);
      expect(c.calloc).toBeGreaterThan(10);
      expect(c.mallinfo).toBeGreaterThan(0);
      if (archive === archives.bump) expect(c.memalign).toBeGreaterThan(100);
      else expect(c.memalign).toBe(0);
    },
  );

  it('fails when the suite expects another backend', () => {
    const r = runEmul(conformance, ['tlsf', 'backend'], { env: QUIET });
    expect(r.stdout).toContain('active backend is "aix:libheaphook_aix_tlsf", expected "tlsf"');
    expect(r.status).not.toBe(0);
  });
});
