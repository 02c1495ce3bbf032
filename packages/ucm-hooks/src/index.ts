/**
 * @heaphook/ucm-hooks — memory events (mmap, munmap, mremap, shmat, shmdt, sbrk, brk, madvise,
 * VM_MAPPED / VM_UNMAPPED) after UCX's libucm.
 *
 *   import { libraryPath, includeDir } from '@heaphook/ucm-hooks';
 *   // C programs: cc -I${includeDir()} prog.c ${libraryPath()}   (or LD_PRELOAD it)
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's folder. */
export const packageDir: string = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Absolute path of libheaphook_ucm.so (built by `nx build ucm-hooks`). */
export function libraryPath(): string {
  return join(packageDir, 'build', 'Release', 'libheaphook_ucm.so');
}

/** The directory to add to the C include path: it holds heaphook/ucm.h and heaphook/ucm_compat.h. */
export function includeDir(): string {
  return join(packageDir, 'include');
}

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

/** Environment variables of the library (the UCX_MEM_* spellings are accepted too). */
export interface UcmOptions {
  /** HEAPHOOK_MEM_EVENTS: false disables every event (handlers cannot be registered). */
  readonly events?: boolean;
  /** HEAPHOOK_MEM_RELOC_HOOKS: false forbids GOT patching when the library is not loaded first. */
  readonly relocHooks?: boolean;
  /** HEAPHOOK_MEM_MALLOC_HOOKS: false silences the note about glibc malloc's own mappings. */
  readonly mallocHooks?: boolean;
  /** HEAPHOOK_MEM_LOG_LEVEL: error, warn (default), info, debug, trace. */
  readonly logLevel?: 'error' | 'warn' | 'info' | 'debug' | 'trace';
}

/** The environment variables for options. */
export function env(options: UcmOptions = {}): Record<string, string> {
  const out: Record<string, string> = {};
  const yesNo = (value: boolean): string => (value ? 'yes' : 'no');
  if (options.events !== undefined) out.HEAPHOOK_MEM_EVENTS = yesNo(options.events);
  if (options.relocHooks !== undefined) out.HEAPHOOK_MEM_RELOC_HOOKS = yesNo(options.relocHooks);
  if (options.mallocHooks !== undefined) out.HEAPHOOK_MEM_MALLOC_HOOKS = yesNo(options.mallocHooks);
  if (options.logLevel !== undefined) out.HEAPHOOK_MEM_LOG_LEVEL = options.logLevel;
  return out;
}
