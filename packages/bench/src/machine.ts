/** What a result is worth depends on where it was measured: the machine and the versions. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';

import { packageDir } from './paths.js';

export interface MachineInfo {
  cpu_model: string;
  logical_cpus: number;
  memory_bytes: number;
  kernel: string;
  os: string;
  arch: string;
  /** 1-minute load average when the run started and when it ended: how noisy it was. */
  loadavg_start: number;
  loadavg_end?: number;
}

export interface Versions {
  node: string;
  glibc: string | null;
  compiler: string | null;
  python3: string | null;
  /** @heaphook/* package versions. */
  heaphook: Record<string, string>;
  /** Commit of the workspace, with "-dirty" when it has local changes. */
  git: string | null;
}

function run(cmd: string, args: string[], cwd?: string): string | null {
  try {
    return execFileSync(cmd, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
      ...(cwd ? { cwd } : {}),
    }).trim();
  } catch {
    return null;
  }
}

function osName(): string {
  try {
    const text = readFileSync('/etc/os-release', 'utf8');
    const m = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(text);
    if (m) return m[1]!;
  } catch {
    /* not Linux-like */
  }
  return process.platform;
}

export function machineInfo(): MachineInfo {
  const c = cpus();
  return {
    cpu_model: c[0]?.model.trim() ?? 'unknown',
    logical_cpus: c.length,
    memory_bytes: totalmem(),
    kernel: release(),
    os: osName(),
    arch: process.arch,
    loadavg_start: Math.round(loadavg()[0]! * 100) / 100,
  };
}

export function versions(python: string | null, packages: Record<string, string>): Versions {
  const report = process.report?.getReport() as
    { header?: { glibcVersionRuntime?: string } } | undefined;
  const gitHead = run('git', ['rev-parse', '--short=12', 'HEAD'], packageDir);
  const dirty = gitHead
    ? run('git', ['status', '--porcelain', '--untracked-files=no'], join(packageDir, '..', '..'))
    : null;
  return {
    node: process.version,
    glibc: report?.header?.glibcVersionRuntime ?? null,
    compiler: run('cc', ['--version'])?.split('\n')[0] ?? null,
    python3: python ? (run(python, ['--version'])?.replace(/^Python\s*/, '') ?? null) : null,
    heaphook: packages,
    git: gitHead ? `${gitHead}${dirty ? '-dirty' : ''}` : null,
  };
}
