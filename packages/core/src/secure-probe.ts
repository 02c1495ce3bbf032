/**
 * The secure-execution check every heaphook preload library must pass: preloaded into a
 * setuid-root program that an unprivileged user (nobody) runs, with every variable that names
 * a path, a descriptor, a signal or a program set, the library writes no file and connects to
 * nothing, as glibc does for its own malloc variables (heaphook/config.h).
 *
 * It is a real run, not a simulation: the probe program is compiled, owned by root and given
 * the set-user-ID bit; the library is copied, set-user-ID too, into the system's library folder
 * (under AT_SECURE glibc preloads only such libraries, named without a slash); setpriv runs it
 * as nobody, so the kernel sets AT_SECURE. A control run of the same probe without privileges
 * shows that the same environment does make the library write, so "nothing written" means
 * something. Needs root (it installs a file under /usr/lib); see secureProbeUnavailable.
 */
import { execFile, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

import { cleanEnv } from './testing.js';

/** The probe. `probe launch NAME=VALUE... -- LIBRARY` sets the variables (LD_PRELOAD among
 * them) and executes itself again, so that nothing before it (setpriv) runs with the library
 * preloaded. `probe run LIBRARY` allocates, forks a child that allocates, and reports AT_SECURE
 * and whether the library is mapped (read from /proc/self/maps, so it works for any library). */
const PROBE_SOURCE = `
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>
static int library_mapped(const char *name) {
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (maps != NULL && fgets(line, sizeof line, maps) != NULL) {
        if (strstr(line, name) != NULL) found = 1;
    }
    if (maps != NULL) fclose(maps);
    return found;
}
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "launch") == 0) {
        int i = 2;
        for (; i < argc && strcmp(argv[i], "--") != 0; i++) putenv(argv[i]);
        if (i + 1 >= argc) return 2;
        char *again[] = {argv[0], "run", argv[i + 1], NULL};
        execv("/proc/self/exe", again);
        perror("execv");
        return 2;
    }
    for (int i = 1; i < 4000; i++) free(malloc((size_t)i * 16));
    char *kept = malloc(4000);
    memset(kept, 1, 4000);
    pid_t child = fork();
    if (child == 0) {
        free(malloc(64));
        _exit(0);
    }
    int status = -1;
    waitpid(child, &status, 0);
    printf("secure=%lu mapped=%d child=%d\\n", getauxval(AT_SECURE),
           argc > 2 && library_mapped(argv[2]), status);
    return 0;
}
`;

/** Why the probe cannot run here, or undefined when it can. */
export function secureProbeUnavailable(): string | undefined {
  if (process.getuid?.() !== 0)
    return 'needs root: it installs a set-user-ID library under /usr/lib';
  if (spawnSync('setpriv', ['--version']).status !== 0) return 'needs setpriv (util-linux)';
  if (spawnSync('cc', ['--version']).status !== 0) return 'needs cc';
  if (systemLibraryDir() === undefined) return 'no system library folder found';
  return undefined;
}

/** The folder glibc searches for a preload named without a slash, under AT_SECURE too. */
function systemLibraryDir(): string | undefined {
  const multiarch = spawnSync('cc', ['-print-multiarch'], { encoding: 'utf8' }).stdout?.trim();
  const candidates = [multiarch ? `/usr/lib/${multiarch}` : '', '/usr/lib64', '/usr/lib'];
  return candidates.find((dir) => dir !== '' && existsSync(dir));
}

export interface SecureProbeOptions {
  /** The preload library under test (absolute path). */
  readonly library: string;
  /** The environment to set, given the folders a library could write to (both writable by
   * anyone, as an attacker's would be): `dir` for variables to point at, `cwd` the probe's
   * working folder. */
  readonly env: (places: { dir: string; cwd: string }) => Record<string, string>;
  /** true: setuid-root probe run as nobody (AT_SECURE); false: the control run, as root. */
  readonly privileged: boolean;
}

export interface SecureProbeResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** AT_SECURE as the probe saw it, and whether the library was mapped into it. */
  readonly secure: boolean;
  readonly mapped: boolean;
  /** Files that appeared in `dir` or `cwd`, relative names. */
  readonly written: readonly string[];
  /** Connections made to a Unix socket the probe's environment may name as `{dir}/socket`. */
  readonly connections: number;
}

/**
 * Runs the probe once with the library preloaded and reports what it wrote. The set-user-ID
 * copies are removed afterwards, whatever happens.
 */
export async function runSecureProbe(options: SecureProbeOptions): Promise<SecureProbeResult> {
  const work = mkdtempSync(join(tmpdir(), 'heaphook-secure-'));
  chmodSync(work, 0o755);
  const libDir = systemLibraryDir();
  if (libDir === undefined) throw new Error('no system library folder found');
  const installed = join(
    libDir,
    `libheaphook-secure-probe-${process.pid}-${basename(options.library)}`,
  );
  let server: Server | undefined;
  try {
    writeFileSync(join(work, 'probe.c'), PROBE_SOURCE);
    const probe = join(work, 'probe');
    const built = spawnSync('cc', ['-O2', '-fno-builtin', '-o', probe, join(work, 'probe.c')], {
      encoding: 'utf8',
    });
    if (built.status !== 0) throw new Error(`cannot build the probe: ${built.stderr}`);
    chmodSync(probe, options.privileged ? 0o4755 : 0o755);
    const dir = join(work, 'open');
    const cwd = join(work, 'cwd');
    for (const place of [dir, cwd]) {
      mkdirSync(place);
      chmodSync(place, 0o1777);
    }
    let connections = 0;
    const socketPath = join(dir, 'socket');
    server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server?.listen(socketPath, resolve));
    chmodSync(socketPath, 0o777);
    const before = new Set(readdirSync(dir));

    let preload = options.library;
    if (options.privileged) {
      copyFileSync(options.library, installed);
      chmodSync(installed, 0o4755);
      preload = basename(installed);
    }
    const variables = { ...options.env({ dir, cwd }), LD_PRELOAD: preload };
    const launch = [
      probe,
      'launch',
      ...Object.entries(variables).map(([name, value]) => `${name}=${value}`),
      '--',
      basename(preload),
    ];
    const command = options.privileged
      ? ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', ...launch]
      : launch;
    const env = cleanEnv();
    const run = await new Promise<{ status: number | null; stdout: string; stderr: string }>(
      (resolve) => {
        execFile(
          command[0]!,
          command.slice(1),
          { env, cwd, timeout: 60_000, encoding: 'utf8' },
          (error, stdout, stderr) => {
            const status = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
            resolve({ status, stdout, stderr });
          },
        );
      },
    );
    const written = [
      ...readdirSync(dir).filter((name) => !before.has(name)),
      ...readdirSync(cwd).map((name) => `cwd/${name}`),
    ];
    const match = /secure=(\d+) mapped=(\d+)/.exec(run.stdout);
    return {
      ...run,
      secure: match?.[1] !== undefined && match[1] !== '0',
      mapped: match?.[2] === '1',
      written,
      connections,
    };
  } finally {
    server?.close();
    rmSync(installed, { force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * What is wrong with a privileged run: empty when the probe really ran under AT_SECURE with the
 * library mapped, finished normally (its forked child too), wrote no file and connected to
 * nothing. Otherwise one phrase per problem, for the test's failure message.
 */
export function secureRunProblems(result: SecureProbeResult): string[] {
  const problems: string[] = [];
  if (!result.secure) problems.push('the probe did not run under AT_SECURE');
  if (!result.mapped) problems.push('the library was not loaded into the probe');
  if (result.status !== 0 || !/child=0\b/.test(result.stdout)) {
    problems.push(`the probe or its child failed (status ${result.status}): ${result.stderr}`);
  }
  for (const name of result.written) problems.push(`wrote ${name}`);
  if (result.connections > 0) problems.push(`connected ${result.connections} times to the socket`);
  return problems;
}
