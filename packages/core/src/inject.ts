/**
 * Load a library into a running process and call one of its functions there, through the
 * `heaphook-inject` program (native/inject: ptrace, no gdb). Used by `heaphook record -p`,
 * `heaphook snapshot` and `heaphook watch -p`.
 *
 *   import { injectCall, findProcesses } from '@heaphook/core';
 *   const [pid] = findProcesses('my-service');
 *   await injectCall({ pid, library: '/abs/libfoo.so', symbol: 'foo_start', argument: 'x' });
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { HeaphookError } from './errors.js';
import { nativeFile } from './native-files.js';

/** Why heaphook-inject refused or failed; each has its own exit code of heaphook-inject. */
export type InjectRefusalReason =
  | 'failed'
  | 'usage'
  | 'no-such-process'
  | 'permission'
  | 'yama'
  | 'static'
  | 'already-traced'
  | 'architecture'
  | 'exited'
  | 'busy'
  | 'no-loader'
  | 'dlopen-failed'
  | 'no-symbol'
  | 'call-crashed';

/** heaphook-inject's exit codes (native/inject/inject.h), by reason. */
export const INJECT_EXIT_CODES: Readonly<Record<InjectRefusalReason, number>> = {
  failed: 1,
  usage: 2,
  'no-such-process': 10,
  permission: 11,
  yama: 12,
  static: 13,
  'already-traced': 14,
  architecture: 15,
  exited: 16,
  busy: 17,
  'no-loader': 18,
  'dlopen-failed': 19,
  'no-symbol': 20,
  'call-crashed': 21,
};

/** heaphook-inject refused (the target is left untouched) or the call failed. */
export class InjectRefusal extends HeaphookError {
  constructor(
    message: string,
    readonly reason: InjectRefusalReason,
    readonly exitCode: number,
  ) {
    super(message, { exitStatus: exitCode, namesCommand: true });
  }
}

export interface InjectCallOptions {
  /** The target process. */
  readonly pid: number;
  /** The library to dlopen in it (an absolute path, or relative to the current directory). */
  readonly library: string;
  /** `int symbol(const char *argument)` to call there. */
  readonly symbol: string;
  /** The string passed to the function; NULL when absent. */
  readonly argument?: string;
}

const ownPackageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Absolute path of the heaphook-inject program; throws with the build command when missing. */
export function injectorPath(): string {
  const path = nativeFile(ownPackageDir, 'heaphook-inject');
  if (!existsSync(path)) {
    throw new HeaphookError(
      `${path} is missing: build @heaphook/core's native code (cd packages/core && npx cmake-js build --out build)`,
    );
  }
  return path;
}

function reasonOf(exitCode: number): InjectRefusalReason {
  for (const [reason, code] of Object.entries(INJECT_EXIT_CODES)) {
    if (code === exitCode) return reason as InjectRefusalReason;
  }
  return 'failed';
}

/**
 * Runs heaphook-inject: dlopen(library) in process pid on a thread outside the allocator, calls
 * `int symbol(argument)` there and resolves to its return value. A second call for the same
 * library reuses the loaded copy. Throws InjectRefusal (`.reason`, `.exitCode`, the injector's
 * one line as message) when it refuses or fails.
 */
export function injectCall(options: InjectCallOptions): Promise<number> {
  const { pid, library, symbol, argument } = options;
  if (!Number.isInteger(pid) || pid <= 0) {
    return Promise.reject(
      new InjectRefusal(`${String(pid)} is not a process id`, 'usage', INJECT_EXIT_CODES.usage),
    );
  }
  const args = [String(pid), resolve(library), symbol];
  if (argument !== undefined) args.push(argument);
  const injector = injectorPath();
  return new Promise((resolvePromise, reject) => {
    const child = spawn(injector, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) {
        const value = Number.parseInt(stdout.trim(), 10);
        if (Number.isInteger(value)) {
          resolvePromise(value);
          return;
        }
      }
      const exitCode = code ?? 1;
      const line =
        stderr
          .trim()
          .split('\n')
          .pop()
          ?.replace(/^heaphook-inject: /, '') ?? `heaphook-inject ended by ${String(signal)}`;
      reject(
        new InjectRefusal(
          line || `heaphook-inject exited with ${exitCode}`,
          reasonOf(exitCode),
          exitCode,
        ),
      );
    });
  });
}

/** The processes of heaphook itself: the CLI (bin/heaphook.js) and the injector. */
function isHeaphookProcess(argv: readonly string[], exe: string): boolean {
  if (basename(exe) === 'heaphook-inject') return true;
  return argv.some((arg) => /(^|\/)heaphook(\.js)?$/.test(arg) || arg.endsWith('/bin/heaphook.js'));
}

/**
 * The pids whose command line matches `name`, like heapprofd's target selection: the basename
 * of the executable (/proc/PID/exe) or of argv[0], or argv[0] itself; the calling process, its
 * ancestors and heaphook's own processes excluded. Sorted by pid.
 */
export function findProcesses(name: string): number[] {
  const excluded = new Set<number>([process.pid]);
  for (let pid = process.ppid; pid > 1 && !excluded.has(pid);) {
    excluded.add(pid);
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      pid = Number(/^PPid:\s*(\d+)/m.exec(status)?.[1] ?? 0);
    } catch {
      break;
    }
  }
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (excluded.has(pid)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        .split('\0')
        .filter((arg) => arg !== '');
    } catch {
      continue;
    }
    if (argv.length === 0) continue; // a kernel thread or a zombie
    let exe = '';
    try {
      exe = readlinkSync(`/proc/${pid}/exe`);
    } catch {
      // another user's process: the command line still says what it is
    }
    if (isHeaphookProcess(argv, exe)) continue;
    const argv0 = argv[0] ?? '';
    if (argv0 === name || basename(argv0) === name || (exe !== '' && basename(exe) === name)) {
      found.push(pid);
    }
  }
  return found.sort((a, b) => a - b);
}
