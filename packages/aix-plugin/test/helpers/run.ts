// Running programs under libheaphook_aix_emul.so with a plug-in archive.
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { coreNativeFile, runProgram, type ProgramRunResult } from '@heaphook/core/testing';

import {
  env as aixEnv,
  libraryPath,
  parseReport,
  releaseDir,
  type EmulReport,
} from '../../src/index.js';

export const release = releaseDir;
export const emulation = libraryPath();
export const conformance = coreNativeFile('heaphook_conformance');

/** Archives built by this package (build/Release). */
export const archives = {
  tlsf: 'libheaphook_aix_tlsf.a',
  bump: 'libaix_bump.a',
  bumpNoMemalign: 'libaix_bump_nomemalign.a',
  incomplete: 'libaix_incomplete.a',
  early: 'libaix_early.a',
  unsafe: 'libaix_unsafe.a',
} as const;

export function requireBuilt(): void {
  for (const file of [emulation, join(release, archives.tlsf), join(release, 'aix_probe')]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: run \`npx nx build aix-plugin\``);
  }
}

export function tempDir(prefix = 'heaphook-aix-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface EmulRun extends ProgramRunResult {
  readonly reports: EmulReport[];
  readonly bump: string[];
}

/** Runs a program with the emulation preloaded, the archive given as MALLOCTYPE=user:<name>. */
export function runEmul(
  command: string,
  args: readonly string[],
  options: {
    archive?: string | null;
    env?: Record<string, string>;
    cwd?: string;
    timeoutMs?: number;
    report?: boolean;
  } = {},
): EmulRun {
  const dir = tempDir('heaphook-aix-report-');
  const reportFile = join(dir, 'report.txt');
  const bumpFile = join(dir, 'bump.txt');
  const extra: Record<string, string> = {};
  if (options.archive !== null) {
    Object.assign(extra, aixEnv({ archive: options.archive ?? archives.tlsf, libPath: [release] }));
  }
  if (options.report !== false) {
    extra.HEAPHOOK_AIX_EMUL_REPORT = reportFile;
    extra.BUMP_REPORT = bumpFile;
  }
  const r = runProgram(command, args, {
    preload: emulation,
    env: { ...extra, ...options.env },
    cwd: options.cwd,
    timeoutMs: options.timeoutMs,
  });
  const read = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');
  return {
    ...r,
    reports: parseReport(read(reportFile)),
    bump: read(bumpFile)
      .split('\n')
      .filter((l) => l !== ''),
  };
}

/** The key=value fields of a bump plug-in report line. */
export function fields(line: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const f of line.split(' ')) {
    const [k, v] = f.split('=');
    if (v !== undefined && /^\d+$/.test(v)) out[k!] = Number(v);
  }
  return out;
}
