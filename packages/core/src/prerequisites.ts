/**
 * What a test needs of the machine, probed in one place, with the words to say when it is
 * missing. Every test that assumes something about the machine beyond Node, g++, cmake and
 * python3 asks here instead of probing on its own, so a fresh machine of another kind fails
 * no test for a reason nobody wrote down.
 *
 * Two kinds of prerequisite:
 *  - installable: tools/install-system-packages.sh installs it (a Debian package, the arm64
 *    python3). Missing on a developer's machine: the test is skipped, and the reason names the
 *    package. Missing under CI (CI=true): the test is not skipped, it runs and fails, because
 *    the install script ran there and a prerequisite that went missing must not pass
 *    unnoticed as a skip.
 *  - machine: a property of the kernel or of the account that no package changes (the kernel
 *    runs i386 programs, we are root, transparent huge pages). Missing anywhere, CI included: the
 *    test is skipped, and the reason says what the machine lacks. A test skipped for one of
 *    these proves the behaviour another way where it can (see inject.test.ts: i386 under
 *    qemu-i386 when the kernel has no IA32 emulation).
 *
 * Probes run once per process and are cheap (a stat, a short spawn).
 *
 *   import { unmet } from '@heaphook/core/testing';
 *   it('a target already traced', (ctx) => {
 *     const why = unmet('strace');
 *     if (why) ctx.skip(why);
 *     ...
 *   });
 *   describe.skipIf(unmet('valgrind'))('worst-case instructions', ...);
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A prerequisite: its kind, and a probe giving why it is missing (undefined: present). */
interface Prerequisite {
  readonly kind: 'installable' | 'machine';
  readonly probe: () => string | undefined;
}

/** A command that runs (exit status 0 with these arguments). */
function runs(command: string, args: readonly string[]): boolean {
  const result = spawnSync(command, args, { stdio: 'ignore', timeout: 30_000 });
  return result.error === undefined && result.status === 0;
}

/** A Debian package's command: missing names the package and the script that installs it. */
function tool(command: string, args: readonly string[], debianPackage: string): Prerequisite {
  return {
    kind: 'installable',
    probe: () =>
      runs(command, args)
        ? undefined
        : `${command} is missing: install ${debianPackage} (tools/install-system-packages.sh)`,
  };
}

/** A file a Debian package installs. */
function file(path: string, debianPackage: string): Prerequisite {
  return {
    kind: 'installable',
    probe: () =>
      existsSync(path)
        ? undefined
        : `${path} is missing: install ${debianPackage} (tools/install-system-packages.sh)`,
  };
}

/**
 * Whether the kernel executes i386 programs (CONFIG_IA32_EMULATION, and not switched off by
 * ia32_emulation=0): a freestanding `gcc -m32` program that exits 42 through int 0x80. Some
 * kernels (microVMs among them) refuse it with ENOEXEC; the shell then reports a syntax error.
 */
function kernelRunsI386(): string | undefined {
  const work = mkdtempSync(join(tmpdir(), 'heaphook-i386-probe-'));
  try {
    const source = join(work, 'exit42.c');
    writeFileSync(
      source,
      'void _start(void) { __asm__ volatile("int $0x80" : : "a"(1), "b"(42)); }\n',
    );
    const program = join(work, 'exit42');
    const built = spawnSync(
      'gcc',
      ['-m32', '-nostdlib', '-static', '-ffreestanding', '-fno-pic', '-o', program, source],
      { encoding: 'utf8' },
    );
    if (built.status !== 0)
      return `gcc -m32 cannot build a freestanding i386 program: ${built.stderr.trim()}`;
    const run = spawnSync(program, [], { stdio: 'ignore' });
    if (run.status === 42) return undefined;
    const cause = run.error !== undefined ? (run.error as NodeJS.ErrnoException).code : run.status;
    return `this kernel does not execute i386 programs (exec of a static i386 ELF: ${String(cause)}; CONFIG_IA32_EMULATION off or ia32_emulation=0)`;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const PREREQUISITES = {
  // --- the machine: no package changes these -------------------------------------------------
  root: {
    kind: 'machine',
    probe: () => (process.getuid?.() === 0 ? undefined : 'needs root (uid 0); CI runs as root'),
  },
  'i386-execution': { kind: 'machine', probe: kernelRunsI386 },
  'transparent-huge-pages': {
    kind: 'machine',
    probe: () =>
      existsSync('/sys/kernel/mm/transparent_hugepage/enabled')
        ? undefined
        : 'this kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage): MADV_HUGEPAGE is refused',
  },
  // --- installed by tools/install-system-packages.sh ----------------------------------------
  'gcc-static': {
    kind: 'installable',
    probe: () => {
      const work = mkdtempSync(join(tmpdir(), 'heaphook-static-probe-'));
      try {
        writeFileSync(join(work, 'a.c'), 'int main(void) { return 0; }\n');
        return runs('gcc', ['-static', '-o', join(work, 'a'), join(work, 'a.c')])
          ? undefined
          : 'gcc -static cannot link: install libc6-dev (tools/install-system-packages.sh)';
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  },
  strace: tool('strace', ['-V'], 'strace'),
  setpriv: tool('setpriv', ['--version'], 'util-linux'),
  valgrind: tool('valgrind', ['--version'], 'valgrind'),
  'qemu-aarch64': tool('qemu-aarch64', ['--version'], 'qemu-user'),
  'qemu-i386': tool('qemu-i386', ['--version'], 'qemu-user'),
  'arm64-libc': file('/lib/ld-linux-aarch64.so.1', 'libc6:arm64'),
  'arm64-python': file('/opt/heaphook-arm64/usr/bin/python3.11', 'python3.11-minimal:arm64'),
  go: tool('go', ['version'], 'golang-go'),
  chromium: tool('chromium', ['--version'], 'chromium'),
  pdftotext: tool('pdftotext', ['-v'], 'poppler-utils'),
  colcon: tool('colcon', ['--help'], 'colcon python3-colcon-cmake python3-colcon-ros'),
  'ament-cmake': file('/usr/share/ament_cmake/cmake/ament_cmakeConfig.cmake', 'ament-cmake'),
  googletest: file('/usr/src/googletest/googletest/CMakeLists.txt', 'googletest'),
  xmllint: tool('xmllint', ['--version'], 'libxml2-utils'),
} satisfies Record<string, Prerequisite>;

/** The name of a prerequisite a test can ask for. */
export type PrerequisiteName = keyof typeof PREREQUISITES;

const probed = new Map<PrerequisiteName, string | undefined>();

/** Why this prerequisite is missing (undefined: present), whatever the environment says. */
export function missing(name: PrerequisiteName): string | undefined {
  if (!probed.has(name)) probed.set(name, PREREQUISITES[name].probe());
  return probed.get(name);
}

/** Whether tools/install-system-packages.sh is meant to have run (CI=true). */
function underCI(): boolean {
  return process.env.CI === 'true';
}

/**
 * Why a test needing these prerequisites should be skipped here, or undefined to run it: the
 * first missing machine property (skipped everywhere), or the first missing installable one
 * outside CI. Under CI a missing installable prerequisite gives undefined: the test runs and
 * its failure says what went missing.
 */
export function unmet(...names: PrerequisiteName[]): string | undefined {
  for (const name of names) {
    const why = missing(name);
    if (why === undefined) continue;
    if (PREREQUISITES[name].kind === 'machine' || !underCI()) return why;
  }
  return undefined;
}

/**
 * Whether to skip a test for a reason its caller worked out itself (an addon or a sibling
 * build that is missing, which only an installable cause can explain): on a developer's
 * machine, when there is a reason; under CI never, so the test runs and fails. For machine
 * properties use `unmet`, which skips under CI too.
 */
export function skipOutsideCI(reason: string | boolean | null | undefined): boolean {
  return !underCI() && Boolean(reason);
}
