// The Node addon: this very process (vitest's worker) subscribes to its own memory events.
// The hooks are installed into Node by GOT patching (nothing is preloaded).
import { describe, expect, it } from 'vitest';

import {
  MemoryEvent,
  testMemoryEvents,
  watchMemoryEvents,
  type MemoryEventRecord,
} from '../src/index.js';

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

  it('the self-test finds every event working inside Node', () => {
    expect(testMemoryEvents(0xff | VM)).toEqual([]);
  });
});
