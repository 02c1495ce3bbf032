// watchMemoryEvents: a Node process subscribes to its own memory events. The addon's handler
// copies each event into a fixed ring inside the mmap call; a timer on the event loop (unref'd:
// it never keeps the process alive) drains the ring and hands each watcher its batch.
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { checkFunction, checkNumber, checkOptions, nativeFile, shown } from '@heaphook/core';

import { MemoryEvent, packageDir } from './constants.js';

/** The name of an event bit. */
export type MemoryEventName = keyof typeof MemoryEvent;

export interface MemoryEventRecord {
  readonly type: MemoryEventName;
  /** The address the event is about: the result of mmap/mremap/shmat/sbrk, else the argument. */
  readonly address: bigint;
  /** Bytes: the length of mmap/munmap/madvise, mremap's new size, sbrk's increment, the VM range. */
  readonly size: number;
}

export interface BatchInfo {
  /** Events lost since the previous batch because the ring (65536 events) was full. */
  readonly dropped: number;
}

export interface WatchOptions {
  /** How often batches are delivered, in milliseconds (default 100). */
  readonly intervalMs?: number;
}

export interface MemoryEventWatcher {
  /** "preload" when libheaphook_ucm.so was preloaded, else "reloc" (GOT patching). */
  readonly mode: string;
  /** Delivers what has been recorded now, without waiting for the timer. */
  flush(): void;
  /** No more batches for this watcher (what is pending is delivered first). */
  stop(): void;
}

interface Addon {
  start(mask: number): string;
  setMask(mask: number): void;
  selfTest(mask: number): number;
  drain(): { type: Uint32Array; address: BigUint64Array; size: Float64Array; dropped: number };
}

/** Absolute path of the addon (ucm_addon.node). */
export function addonPath(): string {
  return nativeFile(packageDir, 'ucm_addon.node');
}

let addon: Addon | undefined;
function loadAddon(): Addon {
  addon ??= createRequire(import.meta.url)(addonPath()) as Addon;
  return addon;
}

const names = new Map<number, MemoryEventName>(
  Object.entries(MemoryEvent).map(([name, bit]) => [bit, name as MemoryEventName]),
);

interface Watcher {
  mask: number;
  callback: (events: MemoryEventRecord[], info: BatchInfo) => void;
}
const watchers = new Set<Watcher>();
let timer: NodeJS.Timeout | undefined;
let mode = 'none';

function unionMask(): number {
  let mask = 0;
  for (const w of watchers) mask |= w.mask;
  return mask;
}

function drain(): void {
  if (!addon) return;
  const batch = addon.drain();
  if (batch.type.length === 0 && batch.dropped === 0) return;
  for (const w of watchers) {
    const events: MemoryEventRecord[] = [];
    for (let i = 0; i < batch.type.length; i++) {
      const type = batch.type[i]!;
      if ((type & w.mask) === 0) continue;
      events.push({ type: names.get(type)!, address: batch.address[i]!, size: batch.size[i]! });
    }
    if (events.length > 0 || batch.dropped > 0) w.callback(events, { dropped: batch.dropped });
  }
}

const allBits = Object.values(MemoryEvent).reduce((a, b) => a | b, 0);
const eventList = Object.keys(MemoryEvent).join(', ');

/** A mask of MemoryEvent bits, or event names ('VM_MAPPED', ['MMAP', 'MUNMAP']), checked. */
function eventMask(where: string, value: unknown): number {
  const names = typeof value === 'string' ? [value] : value;
  if (Array.isArray(names)) {
    let mask = 0;
    for (const name of names as unknown[]) {
      if (typeof name !== 'string' || !Object.hasOwn(MemoryEvent, name)) {
        throw new TypeError(
          `${where}: mask: unknown event name ${shown(name)}; expected MemoryEvent bits or names of ${eventList}`,
        );
      }
      mask |= MemoryEvent[name as MemoryEventName];
    }
    if (mask === 0) throw new RangeError(`${where}: mask: no event named (an empty list)`);
    return mask;
  }
  const mask = checkNumber(where, 'mask', value, {
    min: 0,
    minExclusive: true,
    max: 2 ** 31 - 1,
  });
  if ((mask & ~allBits) !== 0) {
    throw new RangeError(
      `${where}: mask has bits that are no event (0x${(mask & ~allBits).toString(16)}); expected MemoryEvent bits (${eventList}), got ${mask}`,
    );
  }
  return mask;
}

/**
 * Calls callback with batches of this process's memory events of mask (MemoryEvent bits, e.g.
 * MemoryEvent.VM_MAPPED | MemoryEvent.VM_UNMAPPED). Throws when the events cannot be installed.
 * Events made by glibc's malloc itself are not seen (it maps memory with internal calls); the
 * mappings of V8's heap, WebAssembly memories and native libraries are.
 * mask may also be an event name or a list of names ('VM_MAPPED', ['MMAP', 'MUNMAP']). Wrong
 * arguments throw at the call: TypeError (wrong type, unknown event name, callback not a
 * function) or RangeError (mask 0 or with bits that are no event, intervalMs not > 0).
 */
export function watchMemoryEvents(
  mask: number | MemoryEventName | readonly MemoryEventName[],
  callback: (events: MemoryEventRecord[], info: BatchInfo) => void,
  options: WatchOptions = {},
): MemoryEventWatcher {
  const where = 'watchMemoryEvents(mask, callback, options)';
  const bits = eventMask(where, mask);
  checkFunction(where, 'callback', callback);
  const opts = checkOptions<WatchOptions>(where, 'options', options);
  const intervalMs =
    opts.intervalMs === undefined
      ? 100
      : checkNumber(where, 'options.intervalMs', opts.intervalMs, {
          integer: false,
          min: 0,
          minExclusive: true,
          max: 2 ** 31 - 1,
        });
  const native = loadAddon();
  const watcher: Watcher = { mask: bits, callback };
  watchers.add(watcher);
  try {
    mode = native.start(unionMask());
  } catch (error) {
    watchers.delete(watcher);
    throw error;
  }
  if (!timer) {
    timer = setInterval(drain, intervalMs);
    timer.unref();
  }
  let stopped = false;
  return {
    mode,
    flush: drain,
    stop(): void {
      if (stopped) return;
      stopped = true;
      drain();
      watchers.delete(watcher);
      native.setMask(unionMask());
      if (watchers.size === 0 && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    },
  };
}

/** Runs the self-test for mask; returns the names of the events that do not fire (empty: all do). */
export function testMemoryEvents(
  mask: number | MemoryEventName | readonly MemoryEventName[],
): MemoryEventName[] {
  const failed = loadAddon().selfTest(eventMask('testMemoryEvents(mask)', mask));
  return [...names].filter(([bit]) => (failed & bit) !== 0).map(([, name]) => name);
}
