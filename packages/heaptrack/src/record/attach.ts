/**
 * attach() / detach(): trace the native allocations of this Node process between two calls,
 * without starting it under LD_PRELOAD. The tracer library is loaded with dlopen by a small
 * addon (native/attach_addon.c) and installs itself by GOT patching (include/heaphook/heaptrack.h);
 * the log it writes is an ordinary heaplog that `heaphook report` reads.
 *
 *   const { attach, detach, report } = require('@heaphook/heaptrack');
 *   attach({ outputDir: 'traces' });
 *   ... // Buffers, native modules: every malloc, calloc, realloc and free is recorded
 *   const { path } = detach();
 *   console.log((await report(path)).text);
 */
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { HeaphookError, checkOptions, checkString, nativeFile } from '@heaphook/core';

import { memoryEventsLibrary, tracerLibraryPath } from './record.js';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface AttachOptions {
  /**
   * Folder of the log (created if missing); default HEAPHOOK_LOG_DIR, else the working
   * directory. The log is heaplog.<pid>.log there (heaplog.<pid>.1.log ... for later attaches).
   */
  readonly outputDir?: string;
  /**
   * The log file itself (created or overwritten; its folder is created if missing). A child
   * forked while attached writes heaplog.<child pid>.log next to it. Not with outputDir.
   */
  readonly path?: string;
}

export interface AttachedLog {
  /** The log being written (attach) or just completed (detach). */
  readonly path: string;
}

interface AttachAddon {
  open(libraryPath: string, ucmLibraryPath?: string): boolean;
  attach(dir: string | undefined): { status: number; errno: number; path: string };
  detach(): { status: number; errno: number; path: string };
}

/** heaphook/heaptrack.h's status codes. */
const Status = { OK: 0, ATTACHED: 1, PRELOADED: 2, NOT_ATTACHED: 3, NO_LOG: 4, PATCH_FAILED: 5 };

let addon: AttachAddon | undefined;

function loadAddon(): AttachAddon {
  if (addon !== undefined) return addon;
  const path = nativeFile(packageDir, 'heaptrack_addon.node');
  if (!existsSync(path)) {
    throw new HeaphookError(
      `heaptrack_addon.node is missing at ${path}. Build it with "npx nx build heaptrack".`,
    );
  }
  const loaded = createRequire(import.meta.url)(path) as AttachAddon;
  // ucm-hooks, when installed, so that attach() records mapped memory as heaphook record does
  // (HEAPHOOK_TRACE_VM=no leaves it out).
  loaded.open(tracerLibraryPath(), memoryEventsLibrary());
  addon = loaded;
  return loaded;
}

/**
 * Starts tracing this process's native allocations (every thread's) into a new heaplog.
 * Throws when tracing is on already (attached, or the tracer was preloaded), or when the log
 * cannot be created. Wrong arguments throw a TypeError naming them (options not an object;
 * outputDir or path not a string, or holding a NUL byte, which the C side would cut at).
 */
export function attach(options: AttachOptions = {}): AttachedLog {
  const call = 'attach(options)';
  checkOptions(call, 'options', options);
  if (options.outputDir !== undefined) checkString(call, 'options.outputDir', options.outputDir);
  if (options.path !== undefined) checkString(call, 'options.path', options.path);
  if (options.outputDir !== undefined && options.path !== undefined) {
    throw new HeaphookError('attach({ outputDir, path }): give one of them, not both');
  }
  let where: string | undefined;
  if (options.path !== undefined) {
    where = resolve(options.path);
    if (existsSync(where) && statSync(where).isDirectory()) {
      throw new HeaphookError(
        `attach({ path: ${JSON.stringify(options.path)} }) names a folder: use attach({ outputDir }) for a folder, path for the log file`,
      );
    }
    mkdirSync(dirname(where), { recursive: true });
  } else if (options.outputDir !== undefined) {
    where = resolve(options.outputDir);
    mkdirSync(where, { recursive: true });
  }
  const r = loadAddon().attach(where);
  switch (r.status) {
    case Status.OK:
      return { path: r.path };
    case Status.ATTACHED:
      throw new HeaphookError(`already attached (writing ${r.path}): call detach() first`);
    case Status.PRELOADED:
      throw new HeaphookError(
        'libheaphook_heaptrack.so is preloaded into this process (LD_PRELOAD): tracing is already on for the whole process (heaplog.<pid>.log); attach() is for processes started without it',
      );
    case Status.NO_LOG:
      throw new HeaphookError(
        options.path !== undefined && r.errno === constants.errno.EEXIST
          ? `the heaplog ${where} exists already: attach() never overwrites a file; remove it or give attach({ path }) a new name`
          : options.path !== undefined
            ? `cannot create the heaplog ${where} (errno ${r.errno}): give attach({ path }) a writable place`
            : `cannot create a heaplog in ${where ?? process.env.HEAPHOOK_LOG_DIR ?? process.cwd()} (errno ${r.errno}): give attach({ outputDir }) a writable folder`,
      );
    default:
      throw new HeaphookError(
        `attach failed (status ${r.status}): the GOTs of this process could not be patched; HEAPHOOK_LOG_LEVEL=debug says which`,
      );
  }
}

/** Stops tracing and completes the log (it ends with an END record: reason 'detach'). */
export function detach(): AttachedLog {
  const r = loadAddon().detach();
  if (r.status === Status.NOT_ATTACHED)
    throw new HeaphookError('not attached: call attach() first');
  return { path: r.path };
}
