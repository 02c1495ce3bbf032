// The Node addon: this very process (vitest's worker) subscribes to its own memory events.
// The hooks are installed into Node by GOT patching (nothing is preloaded).
import { execFileSync } from 'node:child_process';
import { Worker } from 'node:worker_threads';

import { describe, expect, it } from 'vitest';

import {
  MemoryEvent,
  testMemoryEvents,
  watchMemoryEvents,
  type MemoryEventRecord,
} from '../../src/index.js';

// WebAssembly memories are mapped by V8 with mmap (no DOM typings here: declare what we use).
const WasmMemory = (
  globalThis as unknown as {
    WebAssembly: { Memory: new (descriptor: { initial: number; maximum?: number }) => object };
  }
).WebAssembly.Memory;
const VM = MemoryEvent.VM_MAPPED | MemoryEvent.VM_UNMAPPED;

describe('watchMemoryEvents', () => {
  it('delivers VM events of WebAssembly memories in batches on the event loop', async () => {
    const seen: MemoryEventRecord[] = [];
    let batches = 0;
    const watcher = watchMemoryEvents(
      VM,
      (events) => {
        batches++;
        seen.push(...events);
      },
      { intervalMs: 10 },
    );
    expect(watcher.mode).toBe('reloc');
    const memories = [];
    for (let i = 0; i < 4; i++) memories.push(new WasmMemory({ initial: 16, maximum: 1024 }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    watcher.stop();
    expect(batches).toBeGreaterThan(0);
    expect(seen.some((e) => e.type === 'VM_MAPPED' && e.size >= 16 * 65536)).toBe(true);
    expect(seen.every((e) => e.type === 'VM_MAPPED' || e.type === 'VM_UNMAPPED')).toBe(true);
    expect(memories.length).toBe(4);
  });

  it('filters by mask, and stops', () => {
    const mmaps: MemoryEventRecord[] = [];
    const vm: MemoryEventRecord[] = [];
    const a = watchMemoryEvents(MemoryEvent.MMAP, (events) => mmaps.push(...events));
    const b = watchMemoryEvents(VM, (events) => vm.push(...events));
    new WasmMemory({ initial: 8 });
    a.flush();
    expect(mmaps.length).toBeGreaterThan(0);
    expect(mmaps.every((e) => e.type === 'MMAP')).toBe(true);
    expect(vm.some((e) => e.type === 'VM_MAPPED')).toBe(true);
    a.stop();
    b.stop();
    const before = mmaps.length + vm.length;
    new WasmMemory({ initial: 8 });
    b.flush();
    expect(mmaps.length + vm.length).toBe(before);
  });

  it('sees mappings of worker threads, and child processes still start', async () => {
    const seen: MemoryEventRecord[] = [];
    const watcher = watchMemoryEvents(VM, (events) => seen.push(...events), { intervalMs: 10 });
    const worker = new Worker(
      'const m = []; for (let i = 0; i < 8; i++) m.push(new WebAssembly.Memory({ initial: 32 })); ' +
        "require('node:worker_threads').parentPort.postMessage(m.length);",
      { eval: true },
    );
    const count = await new Promise((resolve) => worker.once('message', resolve));
    await worker.terminate();
    expect(count).toBe(8);
    for (let i = 0; i < 5; i++) expect(execFileSync('echo', ['child']).toString()).toBe('child\n');
    watcher.stop();
    expect(
      seen.filter((e) => e.type === 'VM_MAPPED' && e.size >= 32 * 65536).length,
    ).toBeGreaterThanOrEqual(8);
  });

  it('the self-test finds every event working inside Node', () => {
    expect(testMemoryEvents(0xff | VM)).toEqual([]);
  });
});
