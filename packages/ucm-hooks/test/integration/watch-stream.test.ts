// The in-target side of `heaphook watch` (native/stream.c), driven the way the injector drives
// it: test/native/ucm_watch_target.c dlopens libheaphook_ucm.so and calls
// heaphook_ucm_stream_start / _stop itself, and a WatchServer (src/stream/server.ts) receives.
// Counts are exact between start and stop; after stop the hooks are gone (GOT entry and the C
// library's code back as before), the library's thread has ended, and the target goes on.
import { afterEach, describe, expect, it } from 'vitest';

import { threadNames } from '@heaphook/core/testing';

import { libraryPath, MemoryEvent } from '../../src/index.js';
import { ALL_EVENTS, RING_DEFAULT } from '../../src/stream/protocol.js';
import { WatchServer } from '../../src/stream/server.js';
import { Collector, expectedCounts, Target, watchThreadRemains } from '../helpers/watch-target.js';

const N = 500;

let cleanup: Array<() => void> = [];
afterEach(() => {
  for (const f of cleanup) f();
  cleanup = [];
});

async function serve(collector: Collector, events = ALL_EVENTS, ring = RING_DEFAULT) {
  const server = await WatchServer.listen({ events, ringRecords: ring, listener: collector });
  cleanup.push(() => server.close());
  return server;
}

/** A target that started its own stream to a new server with n calls a sequence, connected. */
async function selfWatched(
  n: number,
  options: { events?: number; ring?: number; env?: NodeJS.ProcessEnv } = {},
) {
  const collector = new Collector();
  const server = await serve(collector, options.events, options.ring);
  const target = new Target(['--self', libraryPath(), server.socketPath, String(n)], options.env);
  cleanup.push(() => target.child.kill('SIGKILL'));
  await target.line(/^started 0$/);
  const connection = (await server.started(target.pid, 15_000))!;
  return { collector, server, target, connection };
}

describe('heaphook_ucm_stream_start / _stop in a dlopen-ing target (reloc mode)', () => {
  it('exact counts between start and stop, three times in a row; hooks removed and the thread gone after each stop', async () => {
    const collector = new Collector();
    const server = await serve(collector);
    const target = new Target(['--self', libraryPath(), server.socketPath, String(N)]);
    cleanup.push(() => target.child.kill('SIGKILL'));
    await target.line(/^started 0$/);
    for (let round = 0; round < 3; round++) {
      if (round > 0) expect(await target.ask('SIGHUP', /^started /)).toBe('started 0');
      const connection = await server.started(target.pid, 15_000);
      expect(connection?.start).toMatchObject({ status: 0, mode: 'reloc', events: ALL_EVENTS });
      expect(threadNames(target.pid)).toContain('heaphook-watch');
      expect(await target.ask('SIGWINCH', /^state /)).toBe(
        'state mode=reloc got=hooked code=patched dlopen=hooked',
      );
      collector.reset();
      await target.ask('SIGUSR1', /^sequence done$/);
      expect(await target.ask('SIGUSR2', /^stopped /)).toBe('stopped 0');
      const end = await connection!.ended;
      expect(end).toMatchObject({ reason: 'detached', restored: true, dropped: 0 });
      expect(collector.counts.get(target.pid)).toEqual(expectedCounts(N));
      expect(end.recorded).toBe(connection!.events);
      expect(await target.ask('SIGWINCH', /^state /)).toBe(
        'state mode=none got=libc code=original dlopen=libc',
      );
      expect(await watchThreadRemains(target.pid)).toBe(false);
      server.connections.clear();
    }
    // Unwatched, it still works, and exits normally.
    await target.ask('SIGUSR1', /^sequence done$/);
    await target.ask('SIGTERM', /^exiting$/);
    expect(await target.exited).toBe(0);
  });

  it('records carry the call: addresses, sizes, arguments, thread id, increasing times', async () => {
    const { collector, target, connection } = await selfWatched(3);
    await target.ask('SIGUSR1', /^sequence done$/);
    await target.ask('SIGUSR2', /^stopped 0$/);
    await connection.ended;
    const records = collector.records.map((r) => r.record);
    const page = 4096;
    const mmaps = records.filter((r) => r.type === 1);
    expect(mmaps).toHaveLength(3);
    for (const r of mmaps) {
      expect(r.size).toBe(4 * page);
      expect(r.arg0 % 2 ** 32).toBe(3); // PROT_READ | PROT_WRITE
      expect(Math.floor(r.arg0 / 2 ** 32)).toBe(0x22); // MAP_PRIVATE | MAP_ANONYMOUS
      expect(r.arg1).toBe(-1); // fd
      expect(r.tid).toBe(target.pid);
      expect(r.error).toBe(0);
    }
    const mremap = records.find((r) => r.type === 4)!;
    expect(mremap.arg0).toBe(mmaps[1]!.address); // the old address
    expect([mremap.arg1, mremap.size]).toEqual([4 * page, 8 * page]);
    const madvise = records.find((r) => r.type === 64)!;
    expect([madvise.address, madvise.arg0]).toEqual([mmaps[0]!.address, 4]); // MADV_DONTNEED
    const sbrks = records.filter((r) => r.type === 32).map((r) => r.size);
    expect(sbrks).toEqual([page, -page, 0]); // brk(sbrk(0)) asks for the break first
    const times = records.map((r) => r.timeNs);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    target.child.kill('SIGTERM');
    expect(await target.exited).toBe(0);
  });

  it('a small ring drops and counts: DROPPED records and END add up to the calls made', async () => {
    const { collector, target, connection } = await selfWatched(200000, {
      events: MemoryEvent.MMAP,
      ring: 1024,
    });
    expect(connection.start?.ringRecords).toBe(1024);
    await target.ask('SIGUSR1', /^sequence done$/);
    await target.ask('SIGUSR2', /^stopped 0$/);
    const end = await connection.ended;
    expect(connection.events + end.dropped).toBe(200000);
    expect(collector.droppedReported).toBe(end.dropped);
    expect(end.recorded).toBe(connection.events);
    target.child.kill('SIGTERM');
    expect(await target.exited).toBe(0);
  });

  it('the watcher half-closing detaches; a second start while one is active is refused with EBUSY', async () => {
    const { collector, target, connection } = await selfWatched(10);
    expect(await target.ask('SIGHUP', /^started /)).toBe('started -16');
    connection.detach();
    expect(await connection.ended).toMatchObject({ reason: 'detached', restored: true });
    expect(await target.ask('SIGWINCH', /^state /)).toBe(
      'state mode=none got=libc code=original dlopen=libc',
    );
    expect(await target.ask('SIGUSR2', /^stopped /)).toBe('stopped -3'); // ESRCH: nothing to stop
    await target.ask('SIGTERM', /^exiting$/);
    expect(await target.exited).toBe(0);
  });

  it('the target exiting while watched sends END (exit) from its destructor', async () => {
    const { collector, target, connection } = await selfWatched(7);
    await target.ask('SIGUSR1', /^sequence done$/);
    target.child.kill('SIGTERM');
    expect(await target.exited).toBe(0);
    expect(await connection.ended).toMatchObject({ reason: 'exit', dropped: 0 });
    expect(collector.counts.get(target.pid)).toEqual(expectedCounts(7));
  });

  it('bistro mode (HEAPHOOK_MEM_MMAP_HOOK_MODE=bistro): the same counts, code patches removed at stop', async () => {
    const { collector, target, connection } = await selfWatched(N, {
      env: {
        HEAPHOOK_MEM_MMAP_HOOK_MODE: 'bistro',
      },
    });
    expect(connection.start?.mode).toBe('bistro');
    expect(await target.ask('SIGWINCH', /^state /)).toBe(
      'state mode=bistro got=libc code=patched dlopen=libc',
    );
    await target.ask('SIGUSR1', /^sequence done$/);
    await target.ask('SIGUSR2', /^stopped 0$/);
    expect(await connection.ended).toMatchObject({ reason: 'detached', restored: true });
    expect(collector.counts.get(target.pid)).toEqual(expectedCounts(N));
    expect(await target.ask('SIGWINCH', /^state /)).toBe(
      'state mode=none got=libc code=original dlopen=libc',
    );
    target.child.kill('SIGTERM');
    expect(await target.exited).toBe(0);
  });
});
