/**
 * The AIX semantics of the adapter (issue 42, item 4), run under the emulation:
 *   - mallopt mapped where a command has a meaning for a heaphook backend, refused with AIX's
 *     non-zero otherwise (the emulation turns AIX's 0 = accepted into glibc's 1): the results,
 *     not the call count;
 *   - the thread switch: once __malloc_init__ has run, a plug-in built with SERIALIZE runs every
 *     entry point under the adapter's recursive mutex, so a backend that is not thread safe
 *     survives threads, forks, and user callbacks that allocate from inside the plug-in.
 * The figures come from test/native/semantics_probe.c and the unsafe backend's exit report
 * (test/native/unsafe_backend.c).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { archives, fields, release, requireBuilt, runEmul, tempDir } from '../helpers/run.js';

const probe = join(release, 'aix_semantics_probe');

beforeAll(() => requireBuilt());

describe('mallopt through the TLSF plug-in', () => {
  it('refuses the small-block options, and M_MALIGN aligns every later block', () => {
    const r = runEmul(probe, ['mallopt'], { archive: archives.tlsf });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const f = fields(r.stdout.trim());
    // AIX's M_MXFAST, M_NLBLKS, M_GRAIN, M_KEEP tune the 3.1 allocator: refused (before: accepted)
    expect([f.mxfast, f.nlblks, f.grain, f.keep]).toEqual([0, 0, 0, 0]);
    // M_MALIGN: a power of two is accepted, and then malloc, calloc and realloc blocks are so
    // aligned (before: accepted, and 5 of 200 blocks aligned by chance)
    expect([f.malign_bad, f.malign_zero, f.malign]).toEqual([0, 0, 1]);
    expect(f.aligned).toBe(200);
    expect(f.calloc_aligned).toBe(1);
    expect(f.zeroed).toBe(1);
    expect(f.realloc_kept).toBe(1);
    // back to the default alignment: no longer every block
    expect(f.reset).toBe(1);
    expect(f.aligned_after_reset).toBeLessThan(200);
    // glibc's M_TRIM_THRESHOLD reaches TLSF's own mallopt: its trim threshold, accepted
    expect(f.trim_threshold).toBe(1);
    const [report] = r.reports;
    expect(report?.mallopt).toBe(9); // every call reached __mallopt__
  });
});

describe('the thread switch of a plug-in whose backend is not thread safe (SERIALIZE)', () => {
  it('serialises 4 threads and 2 forks, and lets a user callback re-enter the plug-in', () => {
    const unsafeReport = join(tempDir('heaphook-aix-unsafe-'), 'unsafe.txt');
    const r = runEmul(probe, ['threads'], {
      archive: archives.unsafe,
      env: { UNSAFE_REPORT: unsafeReport },
      timeoutMs: 60_000,
    });
    // before: the backend's free lists raced (SIGSEGV, status 139)
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = fields(r.stdout.trim());
    expect(out).toMatchObject({ corrupt: 0, children_ok: 2, disclaim: 1 });
    const lines = readFileSync(unsafeReport, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1); // the probe's; the children end with _exit
    const u = fields(lines[0]!);
    expect(u.overlaps).toBe(0); // never two threads inside the backend
    expect(u.callbacks).toBeGreaterThan(1000); // every 16th allocation of the 4 threads
    expect(u.reentries).toBe(2 * u.callbacks!); // each callback: one malloc, one free, re-entered
    expect(u.trims).toBe(1); // M_DISCLAIM reached the backend's trim
    const [emul] = r.reports;
    expect(emul).toMatchObject({ init: 1, threads: 4 });
  });
});
