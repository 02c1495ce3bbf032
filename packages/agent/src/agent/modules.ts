/**
 * The modules of a reporting process, read from /proc/PID/maps (the pid the kernel gave with
 * SO_PEERCRED, never one a frame names), and the names of its return addresses, found with
 * heaptrack's Symbolizer (addr2line on the module files, or their debug files by build id).
 * The process sends bare addresses: naming them here costs it nothing.
 */
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';

import type { ModuleRecord } from '@heaphook/heaptrack';

/** Modules kept per process: a process with more mappings than this has the rest unnamed. */
export const MAX_MODULES = 4096;
const ET_EXEC = 2;

function elfType(path: string): number | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const header = Buffer.alloc(18);
    if (readSync(fd, header, 0, 18, 0) < 18 || header.readUInt32BE(0) !== 0x7f454c46)
      return undefined;
    return header.readUInt16LE(16);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The file-backed modules of pid (one per path), or [] when its maps cannot be read. */
export function readModules(pid: number): ModuleRecord[] {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/maps`, 'utf8');
  } catch {
    return [];
  }
  const byPath = new Map<
    string,
    { start: number; end: number; firstStart: number; firstOffset: number }
  >();
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+\s+(\/.*)$/.exec(line);
    if (m === null) continue;
    const start = parseInt(m[1]!, 16);
    const end = parseInt(m[2]!, 16);
    const offset = parseInt(m[3]!, 16);
    const path = m[4]!.replace(/ \(deleted\)$/, '');
    const known = byPath.get(path);
    if (known === undefined) {
      if (byPath.size >= MAX_MODULES) continue;
      byPath.set(path, { start, end, firstStart: start, firstOffset: offset });
    } else {
      known.start = Math.min(known.start, start);
      known.end = Math.max(known.end, end);
    }
  }
  const modules: ModuleRecord[] = [];
  for (const [path, r] of byPath) {
    // The load bias: 0 for a fixed-address executable, else where its first mapping landed
    // minus the file offset it maps (PIE executables and shared libraries: vaddr == offset).
    const base = elfType(path) === ET_EXEC ? 0 : r.firstStart - r.firstOffset;
    modules.push({ type: 'module', base, start: r.start, end: r.end, buildId: '', path });
  }
  return modules;
}
