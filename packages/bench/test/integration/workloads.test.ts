/**
 * The workloads after programs of mimalloc-bench (batch, xmalloc, threads, mixed), run for real
 * through hh-run on small sizes: they pass under glibc, their checksum depends on the seed and
 * the thread count only, their own figures add up, and the single-threaded ones catch an
 * allocator that hands out overlapping blocks (test/native/broken_alloc.c). Needs
 * `nx build bench`. No timing is asserted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { discoverAllocators } from '../../src/allocators.js';
import { runOne } from '../../src/launcher.js';
import { nativeDir } from '../../src/paths.js';
import { selectWorkloads } from '../../src/workloads.js';

const scratchRoot = mkdtempSync(join(tmpdir(), 'bench-workloads-'));
afterAll(() => rmSync(scratchRoot, { recursive: true, force: true }));

const { allocators } = discoverAllocators({
  backends: [
    {
      name: 'broken',
      packageName: 'test',
      libraryPath: join(nativeDir, 'libbench_broken_alloc.so'),
      built: true,
    },
  ],
});
const glibc = allocators.find((a) => a.name === 'glibc')!;
const broken = allocators.find((a) => a.name === 'broken')!;

async function run(name: string, args: string[], allocator = glibc) {
  // the arguments are the test's own: the catalogue gives the program
  const [w] = selectWorkloads({ profile: 'quick', threads: [1], only: [name] });
  return runOne(0, 0, { ...w!, args }, allocator, { timeoutS: 60, scratchRoot });
}

describe('the workloads after mimalloc-bench', () => {
  it('batch: every size and batch length, a checksum set by the seed', async () => {
    const a = await run('batch', ['--size=89600', '--seed=1']);
    const b = await run('batch', ['--size=89600', '--seed=1', '--threads=4']);
    const c = await run('batch', ['--size=89600', '--seed=2']);
    for (const r of [a, b, c]) expect(r.status, r.error).toBe('ok');
    // 7 sizes x 4 batch lengths, 3200 allocations each (whole batches of 25 to 1600), all freed
    expect(a.reported).toMatchObject({ workload: 'batch', ops: 2 * 7 * 4 * 3200 });
    // --threads is ignored
    expect(b.reported?.checksum).toBe(a.reported?.checksum);
    expect(c.reported?.checksum).not.toBe(a.reported?.checksum);
  });

  it('xmalloc: one producer and T-1 consumers; the same blocks whatever the consumers', async () => {
    const one = await run('xmalloc', ['--size=20000', '--threads=1']);
    const two = await run('xmalloc', ['--size=20000', '--threads=2']);
    const four = await run('xmalloc', ['--size=20001', '--threads=4']);
    for (const r of [one, two, four]) expect(r.status, r.error).toBe('ok');
    expect(one.reported).toMatchObject({ threads: 2, consumers: 1, ops: 40_000 });
    expect(four.reported).toMatchObject({ threads: 4, consumers: 3, ops: 40_002 });
    // the tags and sizes come from the block's index: dealing them to more consumers changes
    // nothing but who frees them
    expect(two.reported?.checksum).toBe(one.reported?.checksum);
    const three = await run('xmalloc', ['--size=20000', '--threads=3']);
    expect(three.reported?.checksum).toBe(one.reported?.checksum);
    // the bound of the live set: more rings, more blocks in flight
    const bound = (r: typeof one) => r.reported?.peak_live_bytes as number;
    expect(bound(one)).toBeGreaterThan(4096 * 16);
    expect(bound(one)).toBeLessThan(4097 * 8192);
    expect(bound(three)).toBeGreaterThan(bound(one));
  });

  it('threads: --size threads in rounds of --threads, hand-off blocks freed by the next round', async () => {
    const t1 = await run('threads', ['--size=20', '--threads=1']);
    const t2 = await run('threads', ['--size=20', '--threads=2']);
    for (const r of [t1, t2]) expect(r.status, r.error).toBe('ok');
    // per thread: 400 replacements and 128 hand-off blocks, each allocated and freed once
    expect(t1.reported).toMatchObject({ threads_created: 20, ops: 20 * 528 * 2 });
    expect(t2.reported).toMatchObject({ threads_created: 20, ops: 20 * 528 * 2 });
    // every round but the first frees the 128 blocks of each table
    expect(t1.reported?.orphan_frees).toBe(19 * 128);
    expect(t2.reported?.orphan_frees).toBe(9 * 2 * 128);
    const again = await run('threads', ['--size=20', '--threads=2']);
    expect(again.reported?.checksum).toBe(t2.reported?.checksum);
  });

  it('mixed: allocations, frees and reallocs balance; peak live bytes reported', async () => {
    const a = await run('mixed', ['--size=30000']);
    const b = await run('mixed', ['--size=30000']);
    for (const r of [a, b]) expect(r.status, r.error).toBe('ok');
    const ops = a.reported?.ops as number;
    const reallocs = a.reported?.reallocs as number;
    expect(reallocs).toBeGreaterThan(0);
    expect(ops - reallocs).toBe(2 * 30_000);
    expect(a.reported?.peak_live_bytes).toBeGreaterThan(0);
    expect(b.reported?.checksum).toBe(a.reported?.checksum);
  });

  it('batch and mixed catch overlapping blocks', async () => {
    for (const name of ['batch', 'mixed']) {
      const r = await run(name, ['--size=89600'], broken);
      expect(r.status).toBe('failed');
      expect(r.error).toMatch(new RegExp(`exit code 2: verification failed: ${name}`));
    }
  });
});
