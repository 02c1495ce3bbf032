/**
 * `heaphook doctor`: checks that this machine can run heaphook's libraries and says, for
 * each problem, what is wrong and how to fix it. Every check is a small function returning
 * DoctorCheck values; nothing here changes the system.
 *
 * The decisive check is the preload probe: each backend's library is preloaded into `cat
 * /proc/self/maps`, which prints the process's own mappings. The library is honoured exactly
 * when its path shows up there; when the dynamic loader refuses it, its message (a missing
 * glibc symbol version, a wrong ELF class ...) is turned into a fix.
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { release, tmpdir } from 'node:os';
import { delimiter, isAbsolute, join } from 'node:path';

import { listBackends, type BackendInfo, type DiscoveryOptions } from './backends.js';
import { describeSymbols, readElfSymbols } from './elf-symbols.js';
import { PLATFORM_ARCHES } from './native-files.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface DoctorCheck {
  /** What was checked, e.g. "glibc" or "backend tlsf". */
  readonly name: string;
  readonly status: CheckStatus;
  /** What was found. */
  readonly detail: string;
  /** How to fix it (warn and fail only). */
  readonly fix?: string;
}

export interface DoctorOptions extends DiscoveryOptions {
  /** Programs to check for whether LD_PRELOAD reaches them (names on PATH or paths). */
  readonly programs?: readonly string[];
}

/** The oldest Node the packages support (package.json engines). */
const MIN_NODE_MAJOR = 20;
/** memfd_create(2), which the heaptrack ring needs, arrived in Linux 3.17. */
const MIN_KERNEL: readonly [number, number] = [3, 17];
/** The TLSF backend's first pool when INITIAL_MEMPOOL_SIZE is not set (bytes). */
const TLSF_DEFAULT_POOL = 100_000_000;

const ELF_MAGIC = Buffer.from([0x7f, 0x45, 0x4c, 0x46]);
const PT_INTERP = 3;
const S_ISUID = 0o4000;
const S_ISGID = 0o2000;

// ---- Platform ------------------------------------------------------------------------------

export function checkPlatform(): DoctorCheck[] {
  const checks: DoctorCheck[] = [];
  if (process.platform !== 'linux') {
    checks.push({
      name: 'platform',
      status: 'fail',
      detail: `${process.platform} ${process.arch}`,
      fix: 'heaphook preloads ELF libraries into glibc programs: it runs on Linux only',
    });
    return checks;
  }
  const kernel = release();
  const [major = 0, minor = 0] = kernel.split('.').map((part) => Number.parseInt(part, 10));
  const oldKernel = major < MIN_KERNEL[0] || (major === MIN_KERNEL[0] && minor < MIN_KERNEL[1]);
  checks.push(
    oldKernel
      ? {
          name: 'platform',
          status: 'warn',
          detail: `linux ${process.arch}, kernel ${kernel}`,
          fix: `heaptrack's ring buffer needs memfd_create (Linux ${MIN_KERNEL.join('.')} or later)`,
        }
      : { name: 'platform', status: 'ok', detail: `linux ${process.arch}, kernel ${kernel}` },
  );
  if (!(PLATFORM_ARCHES as readonly string[]).includes(process.arch)) {
    checks.push({
      name: 'prebuilt libraries',
      status: 'warn',
      detail: `the npm packages ship libraries for Linux ${PLATFORM_ARCHES.join(' and ')} with glibc; this is ${process.arch}`,
      fix: 'build them from source: npx nx run-many -t build (needs cmake and a C/C++ compiler)',
    });
  }
  return checks;
}

export function checkGlibc(): DoctorCheck {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } })
    .header;
  const version = header?.glibcVersionRuntime;
  if (version === undefined) {
    return {
      name: 'glibc',
      status: 'fail',
      detail: 'this system does not run glibc (musl or another C library)',
      fix: "heaphook's libraries interpose glibc's malloc family; use a glibc distribution (Debian, Ubuntu, Fedora ...)",
    };
  }
  return { name: 'glibc', status: 'ok', detail: `glibc ${version}` };
}

export function checkNode(): DoctorCheck {
  const major = Number.parseInt(process.versions.node.split('.')[0] ?? '0', 10);
  return major >= MIN_NODE_MAJOR
    ? { name: 'node', status: 'ok', detail: `node ${process.versions.node}` }
    : {
        name: 'node',
        status: 'fail',
        detail: `node ${process.versions.node}`,
        fix: `the heaphook CLI needs Node ${MIN_NODE_MAJOR} or later`,
      };
}

/** /etc/ld.so.preload loads libraries into every program; one that replaces malloc competes. */
export function checkSystemPreload(path = '/etc/ld.so.preload'): DoctorCheck {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return { name: 'ld.so.preload', status: 'ok', detail: `${path}: none` };
  }
  const libraries = text.split(/\s+/).filter((entry) => entry.length > 0 && !entry.startsWith('#'));
  if (libraries.length === 0) {
    return { name: 'ld.so.preload', status: 'ok', detail: `${path}: empty` };
  }
  return {
    name: 'ld.so.preload',
    status: 'warn',
    detail: `${path} preloads ${libraries.join(', ')} into every program`,
    fix: 'if one of them replaces malloc it competes with heaphook; remove it while you use heaphook',
  };
}

/** RLIMIT_MEMLOCK against the TLSF pool that HEAPHOOK_TLSF_MLOCK=1 would lock. */
export function checkMemlock(
  env: NodeJS.ProcessEnv = process.env,
  limitsText?: string,
): DoctorCheck {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return {
        name: 'memlock limit',
        status: 'warn',
        detail: '/proc/self/limits not readable',
        fix: 'check `ulimit -l` by hand if you set HEAPHOOK_TLSF_MLOCK=1',
      };
    }
  }
  const line = text.split('\n').find((l) => l.startsWith('Max locked memory'));
  const soft = line?.slice('Max locked memory'.length).trim().split(/\s+/)[0];
  if (soft === undefined)
    return {
      name: 'memlock limit',
      status: 'warn',
      detail: 'no "Max locked memory" line in /proc/self/limits',
      fix: 'check `ulimit -l` by hand if you set HEAPHOOK_TLSF_MLOCK=1',
    };
  if (soft === 'unlimited') return { name: 'memlock limit', status: 'ok', detail: 'unlimited' };
  const limit = Number(soft);
  const pool = Number(env.INITIAL_MEMPOOL_SIZE ?? TLSF_DEFAULT_POOL);
  const detail = `${limit} bytes may be locked`;
  if (!Number.isFinite(pool) || limit >= pool)
    return { name: 'memlock limit', status: 'ok', detail };
  if (env.HEAPHOOK_TLSF_MLOCK !== '1')
    return {
      name: 'memlock limit',
      status: 'ok',
      detail: `${detail} (HEAPHOOK_TLSF_MLOCK is not set; setting it would need ${pool} bytes)`,
    };
  return {
    name: 'memlock limit',
    status: 'fail',
    detail: `${detail}: HEAPHOOK_TLSF_MLOCK=1 cannot lock a ${pool}-byte pool`,
    fix: 'raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf) or unset HEAPHOOK_TLSF_MLOCK',
  };
}

// ---- Symbols: can a report name the frames? ----------------------------------------------

/** The C library this process runs on, from its own mappings. */
function mappedLibc(mapsText?: string): string | undefined {
  let text = mapsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/maps', 'utf8');
    } catch {
      return undefined;
    }
  }
  const line = text.split('\n').find((l) => /\/libc(-[\d.]+)?\.so(\.\d+)*$/.test(l));
  return line?.slice(line.indexOf('/'));
}

/**
 * addr2line (binutils), which `heaphook report` names functions, files and lines with, and what
 * it can say about frames inside the C library (every program's allocations pass through it).
 */
export function checkSymbolizer(addr2line = 'addr2line'): DoctorCheck {
  const probe = spawnSync(addr2line, ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    return {
      name: 'symbolizer',
      status: 'warn',
      detail: `${addr2line} not found: reports show addresses and exported names only`,
      fix: 'install binutils (apt-get install binutils)',
    };
  }
  const version = probe.stdout.split('\n')[0]?.trim() ?? addr2line;
  const libc = mappedLibc();
  let libcSymbols = '';
  if (libc !== undefined) {
    try {
      const symbols = readElfSymbols(libc);
      if (symbols !== undefined) libcSymbols = `; libc: ${describeSymbols(symbols)}`;
    } catch {
      // unreadable libc: say nothing about it
    }
  }
  return { name: 'symbolizer', status: 'ok', detail: `${version}${libcSymbols}` };
}

/** For a program the user named: what its report frames can show. */
export function checkProgramSymbols(program: string): DoctorCheck | undefined {
  const path = resolveOnPath(program);
  if (path === undefined) return undefined; // checkProgram says it is missing
  let symbols;
  try {
    symbols = readElfSymbols(path);
  } catch {
    return undefined; // unreadable: checkProgram says why
  }
  if (symbols === undefined) return undefined; // a script or another format: checkProgram covers it
  const name = `symbols ${program}`;
  const detail = describeSymbols(symbols);
  if (symbols.debugInfo || symbols.debugFile !== undefined) return { name, status: 'ok', detail };
  return {
    name,
    status: 'warn',
    detail,
    fix: "install its debug symbols (Debian: the program's -dbgsym or -dbg package) or rebuild it with -g",
  };
}

// ---- Backends: does each library load and get preloaded? ---------------------------------

/** Turns the dynamic loader's complaint into a fix. */
function loaderFix(stderr: string, backend: BackendInfo): string {
  const glibc = /version `(GLIBC_[0-9.]+)' not found/.exec(stderr);
  if (glibc !== null) {
    return (
      `the library needs ${glibc[1]}, newer than this system's glibc: rebuild it here ` +
      `with "npx nx build ${backend.nxProject}" (or npm rebuild ${backend.packageName})`
    );
  }
  if (/wrong ELF class|cannot open shared object file/.test(stderr)) {
    return `the library was built for another machine: rebuild it with "npx nx build ${backend.nxProject}"`;
  }
  return `run "LD_PRELOAD=${backend.libraryPath} cat /dev/null" to see the loader's full message`;
}

export function checkBackend(backend: BackendInfo, workDir: string): DoctorCheck {
  const name = `backend ${backend.name}`;
  if (!backend.built) {
    return {
      name,
      status: 'fail',
      detail: `${backend.libraryPath} is missing`,
      fix: backend.missing ?? `build it with "npx nx build ${backend.nxProject}"`,
    };
  }
  const probe = spawnSync('cat', ['/proc/self/maps'], {
    cwd: workDir, // a tracer writes its log here, not in the user's directory
    encoding: 'utf8',
    timeout: 30_000,
    env: {
      ...process.env,
      LD_PRELOAD: backend.libraryPath,
      HEAPHOOK_LOG_LEVEL: 'error',
      HEAPHOOK_LOG_DIR: workDir,
    },
  });
  const stderr = (probe.stderr ?? '').trim();
  if (probe.error !== undefined) {
    return {
      name,
      status: 'fail',
      detail: `cannot run cat: ${probe.error.message}`,
      fix: 'install coreutils',
    };
  }
  if (/ld\.so|cannot be preloaded/.test(stderr)) {
    const first = stderr.split('\n')[0] ?? stderr;
    return {
      name,
      status: 'fail',
      detail: `not loaded: ${first}`,
      fix: loaderFix(stderr, backend),
    };
  }
  if (probe.status !== 0) {
    const detail =
      probe.signal !== null ? `killed by ${probe.signal}` : `exit status ${probe.status}`;
    return {
      name,
      status: 'fail',
      detail: `cat under the library failed (${detail})${stderr ? `: ${stderr.split('\n')[0]}` : ''}`,
      fix: `run "heaphook run -b ${backend.name} -e HEAPHOOK_LOG_LEVEL=debug -- true" and read its log`,
    };
  }
  if (!probe.stdout.includes(backend.libraryPath)) {
    return {
      name,
      status: 'fail',
      detail: 'the loader ran cat without the library: LD_PRELOAD is ignored here',
      fix: 'LD_PRELOAD is ignored in secure-execution mode (setuid, file capabilities) and by some sandboxes; run heaphook as a normal user outside them',
    };
  }
  return { name, status: 'ok', detail: `preloads and runs (${backend.libraryPath})` };
}

// ---- Programs: will LD_PRELOAD reach them? --------------------------------------------------

function resolveOnPath(program: string): string | undefined {
  if (program.includes('/')) return program;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir.length === 0) continue;
    const candidate = join(dir, program);
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

function readHead(path: string, bytes: number): Buffer {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    const n = readSync(fd, buffer, 0, bytes, 0);
    return buffer.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** Whether a 64- or 32-bit little-endian ELF file has a PT_INTERP (is dynamically linked). */
export function elfHasInterpreter(path: string): boolean | undefined {
  const head = readHead(path, 64 * 1024);
  if (head.length < 52 || !head.subarray(0, 4).equals(ELF_MAGIC)) return undefined;
  const is64 = head[4] === 2;
  const phoff = is64 ? Number(head.readBigUInt64LE(0x20)) : head.readUInt32LE(0x1c);
  const phentsize = head.readUInt16LE(is64 ? 0x36 : 0x2a);
  const phnum = head.readUInt16LE(is64 ? 0x38 : 0x2c);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 4 > head.length) return undefined;
    if (head.readUInt32LE(at) === PT_INTERP) return true;
  }
  return false;
}

export function checkProgram(program: string, depth = 0): DoctorCheck {
  const name = `program ${program}`;
  const path = resolveOnPath(program);
  if (path === undefined) {
    return { name, status: 'fail', detail: 'not found on PATH', fix: 'give its full path' };
  }
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    return {
      name,
      status: 'fail',
      detail: `${path}: ${(error as Error).message}`,
      fix: 'give the path of an existing program',
    };
  }
  if ((mode & (S_ISUID | S_ISGID)) !== 0) {
    return {
      name,
      status: 'fail',
      detail: `${path} is set-${(mode & S_ISUID) !== 0 ? 'user' : 'group'}-ID: the loader ignores LD_PRELOAD for it (secure execution)`,
      fix: `run a copy without the bit (cp ${path} /tmp/ && heaphook run -b <backend> -- /tmp/${path.split('/').pop()}) as the user it should run as`,
    };
  }
  const head = readHead(path, 256);
  if (head.subarray(0, 2).toString('latin1') === '#!' && depth < 4) {
    const interpreter = head.toString('latin1').slice(2).split('\n')[0]?.trim().split(/\s+/) ?? [];
    let target = interpreter[0] ?? '';
    if (target.endsWith('/env') && interpreter[1] !== undefined) target = interpreter[1];
    if (target.length === 0) {
      return {
        name,
        status: 'fail',
        detail: `${path}: a script without an interpreter`,
        fix: 'fix its #! line',
      };
    }
    const inner = checkProgram(target, depth + 1);
    return { ...inner, name, detail: `script run by ${target}: ${inner.detail}` };
  }
  const dynamic = elfHasInterpreter(path);
  if (dynamic === undefined) {
    return {
      name,
      status: 'warn',
      detail: `${path} is not an ELF program`,
      fix: 'check the program that it starts instead',
    };
  }
  if (!dynamic) {
    return {
      name,
      status: 'fail',
      detail: `${path} is statically linked: there is no dynamic loader to honour LD_PRELOAD`,
      fix: 'link it dynamically, or link a heaphook backend into it',
    };
  }
  return {
    name,
    status: 'ok',
    detail: `${isAbsolute(path) ? path : program}: dynamically linked, LD_PRELOAD applies`,
  };
}

// ---- All of it ------------------------------------------------------------------------------

export function runDoctor(options: DoctorOptions = {}): DoctorCheck[] {
  const checks: DoctorCheck[] = [...checkPlatform()];
  if (process.platform !== 'linux') return checks;
  checks.push(checkGlibc(), checkNode(), checkSystemPreload(), checkMemlock(), checkSymbolizer());
  const backends = listBackends(options);
  if (backends.length === 0) {
    checks.push({
      name: 'backends',
      status: 'fail',
      detail: 'no heaphook backend is installed',
      fix: 'npm i @heaphook/tlsf (or another backend package)',
    });
  }
  const workDir = mkdtempSync(join(tmpdir(), 'heaphook-doctor-'));
  try {
    for (const backend of backends) checks.push(checkBackend(backend, workDir));
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
  for (const program of options.programs ?? []) {
    const reach = checkProgram(program);
    checks.push(reach);
    // Symbols matter only for a program heaphook can trace.
    const symbols = reach.status === 'fail' ? undefined : checkProgramSymbols(program);
    if (symbols !== undefined) checks.push(symbols);
  }
  return checks;
}

const LABEL: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL' };

export function formatChecks(checks: readonly DoctorCheck[]): string {
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = checks.flatMap((c) => [
    `${LABEL[c.status]}  ${c.name.padEnd(width)}  ${c.detail}`,
    ...(c.fix !== undefined ? [`      ${' '.repeat(width)}  fix: ${c.fix}`] : []),
  ]);
  const failed = checks.filter((c) => c.status === 'fail').length;
  const warned = checks.filter((c) => c.status === 'warn').length;
  lines.push(
    failed + warned === 0
      ? 'everything heaphook needs is in place'
      : `${failed} problem(s), ${warned} warning(s)`,
  );
  return `${lines.join('\n')}\n`;
}
