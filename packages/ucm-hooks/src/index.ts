/**
 * @heaphook/ucm-hooks — memory events (mmap, munmap, mremap, shmat, shmdt, sbrk, brk, madvise,
 * VM_MAPPED / VM_UNMAPPED) after UCX's libucm.
 *
 *   import { libraryPath, includeDir } from '@heaphook/ucm-hooks';
 *   // C programs: cc -I${includeDir()} prog.c ${libraryPath()}   (or LD_PRELOAD it)
 */
import { join } from 'node:path';

import { checkBoolean, checkChoice, checkOptions, nativeFile } from '@heaphook/core';

import { packageDir } from './constants.js';

export { MemoryEvent, packageDir } from './constants.js';

/** Absolute path of libheaphook_ucm.so (built by `nx build ucm-hooks`). */
export function libraryPath(): string {
  return nativeFile(packageDir, 'libheaphook_ucm.so');
}

/** The directory to add to the C include path: it holds heaphook/ucm.h and heaphook/ucm_compat.h. */
export function includeDir(): string {
  return join(packageDir, 'include');
}

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

const logLevels = ['error', 'warn', 'info', 'debug', 'trace'] as const;

/** The environment variables for options (checked: TypeError naming a wrong one). */
export function env(options: UcmOptions = {}): Record<string, string> {
  const where = 'env(options)';
  checkOptions(where, 'options', options);
  for (const key of ['events', 'relocHooks', 'mallocHooks'] as const) {
    if (options[key] !== undefined) checkBoolean(where, `options.${key}`, options[key]);
  }
  if (options.logLevel !== undefined) {
    checkChoice(where, 'options.logLevel', options.logLevel, logLevels);
  }
  const out: Record<string, string> = {};
  const yesNo = (value: boolean): string => (value ? 'yes' : 'no');
  if (options.events !== undefined) out.HEAPHOOK_MEM_EVENTS = yesNo(options.events);
  if (options.relocHooks !== undefined) out.HEAPHOOK_MEM_RELOC_HOOKS = yesNo(options.relocHooks);
  if (options.mallocHooks !== undefined) out.HEAPHOOK_MEM_MALLOC_HOOKS = yesNo(options.mallocHooks);
  if (options.logLevel !== undefined) out.HEAPHOOK_MEM_LOG_LEVEL = options.logLevel;
  return out;
}

export { watchMemoryEvents, testMemoryEvents, addonPath } from './watch.js';
export type {
  MemoryEventName,
  MemoryEventRecord,
  BatchInfo,
  WatchOptions,
  MemoryEventWatcher,
} from './watch.js';
