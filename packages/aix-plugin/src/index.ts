/**
 * @heaphook/aix-plugin — an AIX user-defined malloc plug-in (MALLOCTYPE=user:<archive>.a) over
 * a heaphook backend (TLSF), and libheaphook_aix_emul.so, the Linux emulation that loads such a
 * plug-in the way AIX does so it can be tested here.
 *
 *   import { libraryPath, archivePath, env } from '@heaphook/aix-plugin';
 *   spawn(cmd, args, { env: { ...process.env, ...env(), LD_PRELOAD: libraryPath() } });
 */
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { nativeFile } from '@heaphook/core';

/** The package's folder. */
export const packageDir: string = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Where `nx build aix-plugin` puts its outputs. */
export const releaseDir: string = join(packageDir, 'build', 'Release');

/** The archive name of the TLSF-based plug-in. */
export const TLSF_ARCHIVE = 'libheaphook_aix_tlsf.a';

/** The member AIX loads from the archive in a process of this word size. */
export const MEMBER: 'mem64.o' | 'mem32.o' =
  process.arch === 'ia32' || process.arch === 'arm' ? 'mem32.o' : 'mem64.o';

/** Absolute path of the Linux emulation, libheaphook_aix_emul.so (to LD_PRELOAD). */
export function libraryPath(): string {
  return nativeFile(packageDir, 'libheaphook_aix_emul.so');
}

/** Absolute path of the TLSF-based plug-in archive (member mem64.o: the module built for Linux). */
export function archivePath(): string {
  return nativeFile(packageDir, TLSF_ARCHIVE);
}

export interface AixPluginOptions {
  /** The archive: a path (its folder goes on LIBPATH) or a bare name found on `libPath`. Default: archivePath(). */
  readonly archive?: string;
  /** Folders searched for the archive (LIBPATH), before the archive's own folder. */
  readonly libPath?: readonly string[];
  /** HEAPHOOK_AIX_EMUL_REPORT: a file the emulation appends one line of counters to at exit. */
  readonly report?: string;
}

/**
 * The environment that makes the emulation load a plug-in: MALLOCTYPE=user:<name>.a (a bare
 * name, as AIX requires) and LIBPATH naming its folder. Add LD_PRELOAD=libraryPath() to run.
 */
export function env(options: AixPluginOptions = {}): Record<string, string> {
  const archive = options.archive ?? archivePath();
  const name = basename(archive);
  if (!name.endsWith('.a')) {
    throw new RangeError(`archive: an AIX plug-in archive is named <name>.a, got ${archive}`);
  }
  const dirs = [...(options.libPath ?? [])];
  if (name !== archive) dirs.push(dirname(resolve(archive)));
  const out: Record<string, string> = { MALLOCTYPE: `user:${name}` };
  if (dirs.length > 0) out.LIBPATH = dirs.join(':');
  if (options.report !== undefined) out.HEAPHOOK_AIX_EMUL_REPORT = options.report;
  return out;
}

/** Counters of one process, parsed from a HEAPHOOK_AIX_EMUL_REPORT line. */
export type EmulReport = Record<string, string | number>;

/** Parses the lines of a report file (one per process that exited normally). */
export function parseReport(text: string): EmulReport[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('aix-emul '))
    .map((line) => {
      const out: EmulReport = {};
      for (const field of line.slice('aix-emul '.length).split(' ')) {
        const eq = field.indexOf('=');
        if (eq < 0) continue;
        const value = field.slice(eq + 1);
        out[field.slice(0, eq)] = /^\d+$/.test(value) ? Number(value) : value;
      }
      return out;
    });
}
