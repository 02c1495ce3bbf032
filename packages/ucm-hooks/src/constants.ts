// Shared by index.ts and watch.ts (a module of its own, so that neither imports the other).
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's folder. */
export const packageDir: string = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Event bits, the same values as libucm's UCM_EVENT_*. */
export const MemoryEvent = {
  MMAP: 1 << 0,
  MUNMAP: 1 << 1,
  MREMAP: 1 << 2,
  SHMAT: 1 << 3,
  SHMDT: 1 << 4,
  SBRK: 1 << 5,
  MADVISE: 1 << 6,
  BRK: 1 << 7,
  VM_MAPPED: 1 << 16,
  VM_UNMAPPED: 1 << 17,
} as const;
