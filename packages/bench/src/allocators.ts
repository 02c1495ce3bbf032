/**
 * Which allocators a comparison runs, and how each one is started:
 *   glibc          no preload (the baseline of every ratio);
 *   <backend>      every heaphook backend installed in the workspace (LD_PRELOAD of its library);
 *   <variant>      a backend plus environment (tlsf-rt: the real-time configuration of TLSF;
 *                  tlsf-rec: TLSF with the pool `heaphook recommend` gives for the workload;
 *                  aix-tlsf: TLSF as an AIX malloc plug-in through aix-plugin's loader emulation);
 *   <custom>       any library given with --preload NAME=PATH;
 *   jemalloc, mimalloc, tcmalloc   the system's libraries, when their Debian packages are installed;
 * and the heap tracers whose overhead is measured against the untraced run:
 *   kde-heaptrack              `heaptrack -o <file> <cmd>` (KDE heaptrack) over glibc;
 *   heaphook-heaptrack         heaphook's tracing backend preloaded over glibc;
 *   heaphook-heaptrack-nostacks  the same with HEAPHOOK_STACKS=0 (recording without stacks).
 *   heaphook-heaptrack+tlsf    the same stacked over the TLSF backend (ratio against tlsf).
 * Anything missing is reported as skipped with what to install or build, never as an error.
 */
import { execFileSync } from 'node:child_process';
import { accessSync, constants, existsSync, realpathSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';

import type { Allocator, Workload } from './types.js';

/** The part of @heaphook/core's BackendInfo the bench needs. */
export interface BackendLike {
  readonly name: string;
  readonly packageName: string;
  readonly libraryPath: string;
  readonly built: boolean;
  readonly nxProject?: string;
  /** Another name of a backend (@heaphook/core's BackendInfo.aliasOf): not measured twice. */
  readonly aliasOf?: string;
}

export interface SystemAllocatorDef {
  readonly name: string;
  /** File names to look for, best first. */
  readonly files: readonly string[];
  /** The Debian package that provides it (what "skipped: install ..." names). */
  readonly debianPackage: string;
  readonly description: string;
}

export const SYSTEM_ALLOCATORS: readonly SystemAllocatorDef[] = [
  {
    name: 'jemalloc',
    files: ['libjemalloc.so.2', 'libjemalloc.so'],
    debianPackage: 'libjemalloc2',
    description: 'jemalloc (system library)',
  },
  {
    name: 'mimalloc',
    files: ['libmimalloc.so.2', 'libmimalloc.so.3', 'libmimalloc.so'],
    debianPackage: 'libmimalloc2.0',
    description: 'mimalloc (system library)',
  },
  {
    name: 'tcmalloc',
    files: ['libtcmalloc_minimal.so.4', 'libtcmalloc.so.4'],
    debianPackage: 'libtcmalloc-minimal4',
    description: 'tcmalloc, gperftools minimal (system library)',
  },
];

/** Backends that trace rather than allocate: measured as tracer overhead, not as columns. */
export const TRACER_BACKENDS: ReadonlySet<string> = new Set(['heaptrack']);

/**
 * Backends that serve nothing by themselves: they host an allocator the environment names
 * (aix-plugin's AIX loader emulation without MALLOCTYPE is glibc behind one more call). They
 * are columns only through a variant that names what they host (aix-tlsf).
 */
export const HOST_BACKENDS: ReadonlySet<string> = new Set(['aix-plugin']);

export interface VariantDef {
  readonly name: string;
  readonly backend: string;
  readonly description: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly envFor?: (workload: Workload) => Record<string, string>;
  /** Extra environment that depends on where the backend's library is. */
  readonly envForLibrary?: (libraryPath: string) => Record<string, string>;
  /** Another backend the variant needs (tlsf-rec: heaptrack records the trace it replays). */
  readonly requires?: string;
  readonly appliesTo?: (workload: Workload) => boolean;
}

/** Built-in variants, created when their backend is installed. */
export const BUILTIN_VARIANTS: readonly VariantDef[] = [
  {
    name: 'tlsf-rt',
    backend: 'tlsf',
    description:
      'TLSF in its real-time configuration: INITIAL_MEMPOOL_SIZE sized for the workload, pool pre-faulted (HEAPHOOK_TLSF_PREFAULT=1)',
    envFor: (w) => ({ INITIAL_MEMPOOL_SIZE: String(w.rtPoolBytes), HEAPHOOK_TLSF_PREFAULT: '1' }),
  },
  {
    name: 'tlsf-rec',
    backend: 'tlsf',
    requires: 'heaptrack',
    description:
      'TLSF with the pool `heaphook recommend` gives for the workload: INITIAL_MEMPOOL_SIZE, ADDITIONAL_MEMPOOL_SIZE and HEAPHOOK_TLSF_THREAD_HEAPS from a replay of a heaphook-heaptrack trace of the same workload, recorded before the timed runs; the pool is touched lazily (no PREFAULT). Runs the workloads marked for it (fragmentation)',
    envFor: (w) => ({ ...(w.recommendedEnv ?? {}) }),
    appliesTo: (w) => w.recommendedEnv !== undefined,
  },
  {
    name: 'aix-tlsf',
    backend: 'aix-plugin',
    description:
      'TLSF as an AIX malloc plug-in: MALLOCTYPE=user:libheaphook_aix_tlsf.a loaded by the AIX loader emulation (the adapter and entry points over tlsf)',
    // The archive is built next to the emulation library; AIX finds it on LIBPATH.
    envForLibrary: (library) => ({
      MALLOCTYPE: 'user:libheaphook_aix_tlsf.a',
      LIBPATH: dirname(library),
    }),
  },
];

/** Parses `NAME=BACKEND[:KEY=VALUE,KEY=VALUE...]` (the --variant option). */
export function parseVariant(spec: string): VariantDef {
  const m = /^([A-Za-z0-9_.+-]+)=([A-Za-z0-9_.-]+)(?::(.*))?$/.exec(spec);
  if (!m) {
    throw new Error(
      `bad --variant '${spec}': expected NAME=BACKEND[:KEY=VALUE,...], e.g. tlsf-1g=tlsf:INITIAL_MEMPOOL_SIZE=1G`,
    );
  }
  const env: Record<string, string> = {};
  for (const pair of (m[3] ?? '').split(',').filter((s) => s.length > 0)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`bad --variant '${spec}': '${pair}' is not KEY=VALUE`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return {
    name: m[1]!,
    backend: m[2]!,
    env,
    description: `${m[2]} with ${
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ') || 'no extra environment'
    }`,
  };
}

/** Parses `NAME=PATH` (the --preload option). */
export function parseCustom(spec: string): { name: string; path: string } {
  const eq = spec.indexOf('=');
  if (eq <= 0 || eq === spec.length - 1)
    throw new Error(`bad --preload '${spec}': expected NAME=/path/to/lib.so`);
  return { name: spec.slice(0, eq), path: spec.slice(eq + 1) };
}

/** Library folders searched for the system allocators, multiarch first. */
export function systemLibDirs(): string[] {
  const triplet: Record<string, string> = {
    x64: 'x86_64-linux-gnu',
    arm64: 'aarch64-linux-gnu',
    arm: 'arm-linux-gnueabihf',
    ppc64: 'powerpc64le-linux-gnu',
    s390x: 's390x-linux-gnu',
    riscv64: 'riscv64-linux-gnu',
  };
  const t = triplet[process.arch];
  const dirs = t ? [`/usr/lib/${t}`, `/lib/${t}`] : [];
  return [...dirs, '/usr/lib64', '/lib64', '/usr/lib', '/usr/local/lib'];
}

export function findLibrary(
  files: readonly string[],
  dirs: readonly string[],
  exists: (p: string) => boolean = existsSync,
): string | null {
  for (const file of files) {
    for (const dir of dirs) {
      const p = join(dir, file);
      if (exists(p)) return p;
    }
  }
  return null;
}

/** Absolute path of an executable on PATH, or null. */
export function which(cmd: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return null;
}

function debianVersion(pkg: string): string | undefined {
  try {
    const v = execFileSync('dpkg-query', ['-W', '-f=${Version}', pkg], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5000,
    }).trim();
    return v || undefined;
  } catch {
    return undefined;
  }
}

function heaptrackVersion(cmd: string): string | undefined {
  try {
    const out = execFileSync(cmd, ['--version'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 5000,
    });
    return out.trim().replace(/^heaptrack\s*/, '') || undefined;
  } catch {
    return undefined;
  }
}

export interface DiscoverOptions {
  /** Installed heaphook backends (from @heaphook/core's listBackends()). */
  readonly backends: readonly BackendLike[];
  /** Where to look for the system allocators; `exists` is injectable for tests. */
  readonly libDirs?: readonly string[];
  readonly exists?: (p: string) => boolean;
  /** Finds a command on PATH (KDE heaptrack). */
  readonly which?: (cmd: string) => string | null;
  /** Versions of Debian packages (dpkg-query), injectable for tests. */
  readonly debianVersion?: (pkg: string) => string | undefined;
  /** Extra variants from the command line (after the built-in ones). */
  readonly variants?: readonly VariantDef[];
  /** Extra libraries from the command line. */
  readonly custom?: ReadonlyArray<{ name: string; path: string }>;
}

export interface Discovered {
  /** Columns of the comparison, in table order, including skipped ones. */
  readonly allocators: Allocator[];
  /** Heap tracers, including skipped ones. */
  readonly tracers: Allocator[];
}

function notBuilt(b: BackendLike): string {
  return `not built: run npx nx build ${b.nxProject ?? b.packageName.replace(/^@[^/]+\//, '')}`;
}

export function discoverAllocators(opts: DiscoverOptions): Discovered {
  const exists = opts.exists ?? existsSync;
  const whichFn = opts.which ?? which;
  const debVersion = opts.debianVersion ?? debianVersion;
  const libcVersion = debVersion('libc6');
  const allocators: Allocator[] = [
    {
      name: 'glibc',
      kind: 'glibc',
      status: 'ready',
      description: 'the C library malloc, no preload (baseline)',
      preload: [],
      env: {},
      baseline: 'glibc',
      source: 'libc6',
      ...(libcVersion ? { version: libcVersion } : {}),
    },
  ];
  const byName = new Map<string, BackendLike>();
  const measured = opts.backends.filter((b) => b.aliasOf === undefined);
  for (const b of measured.sort((x, y) => x.name.localeCompare(y.name))) {
    byName.set(b.name, b);
    if (TRACER_BACKENDS.has(b.name) || HOST_BACKENDS.has(b.name)) continue;
    allocators.push({
      name: b.name,
      kind: 'backend',
      status: b.built ? 'ready' : 'skipped',
      ...(b.built ? {} : { reason: notBuilt(b) }),
      description: `heaphook backend ${b.name} (${b.packageName})`,
      preload: [b.libraryPath],
      env: {},
      baseline: 'glibc',
      source: b.packageName,
    });
  }
  for (const v of [...BUILTIN_VARIANTS, ...(opts.variants ?? [])]) {
    const b = byName.get(v.backend);
    const isBuiltin = BUILTIN_VARIANTS.includes(v);
    if (!b && isBuiltin) continue; // a built-in variant of a backend that is not in the workspace: nothing to say
    const needs = v.requires === undefined ? undefined : byName.get(v.requires);
    const reason = !b
      ? `no heaphook backend named ${v.backend}`
      : !b.built
        ? notBuilt(b)
        : v.requires === undefined
          ? undefined
          : !needs
            ? `needs the heaphook backend ${v.requires}, not in this workspace`
            : !needs.built
              ? notBuilt(needs)
              : undefined;
    allocators.push({
      name: v.name,
      kind: 'variant',
      status: reason ? 'skipped' : 'ready',
      ...(reason ? { reason } : {}),
      description: v.description,
      preload: b ? [b.libraryPath] : [],
      env: { ...v.env, ...(b && v.envForLibrary ? v.envForLibrary(b.libraryPath) : {}) },
      ...(v.envFor ? { envFor: v.envFor } : {}),
      ...(v.appliesTo ? { appliesTo: v.appliesTo } : {}),
      baseline: 'glibc',
      ...(b ? { source: b.packageName } : {}),
    });
  }
  for (const c of opts.custom ?? []) {
    const ok = exists(c.path);
    allocators.push({
      name: c.name,
      kind: 'custom',
      status: ok ? 'ready' : 'skipped',
      ...(ok ? {} : { reason: `no such file: ${c.path}` }),
      description: `custom preload ${c.path}`,
      preload: [c.path],
      env: {},
      baseline: 'glibc',
    });
  }
  const dirs = opts.libDirs ?? systemLibDirs();
  for (const s of SYSTEM_ALLOCATORS) {
    const path = findLibrary(s.files, dirs, exists);
    const version = path ? debVersion(s.debianPackage) : undefined;
    allocators.push({
      name: s.name,
      kind: 'system',
      status: path ? 'ready' : 'skipped',
      ...(path ? {} : { reason: `install ${s.debianPackage}` }),
      description: s.description,
      preload: path ? [path] : [],
      env: {},
      baseline: 'glibc',
      source: s.debianPackage,
      ...(version ? { version } : {}),
    });
  }

  const tracers: Allocator[] = [];
  const kde = whichFn('heaptrack');
  const kdeVersion = kde ? (opts.which ? undefined : heaptrackVersion(kde)) : undefined;
  tracers.push({
    name: 'kde-heaptrack',
    kind: 'tracer',
    status: kde ? 'ready' : 'skipped',
    ...(kde ? {} : { reason: 'install heaptrack' }),
    description: 'KDE heaptrack (heaptrack -o <file> <cmd>) over glibc',
    preload: [],
    env: {},
    wrap: kde ? [kde, '-o', '{dir}/heaptrack'] : [],
    baseline: 'glibc',
    source: 'heaptrack',
    ...(kdeVersion ? { version: kdeVersion } : {}),
  });
  const ht = byName.get('heaptrack');
  const htReason = ht
    ? ht.built
      ? undefined
      : notBuilt(ht)
    : 'no heaphook backend named heaptrack in this workspace (packages/heaptrack)';
  tracers.push({
    name: 'heaphook-heaptrack',
    kind: 'tracer',
    status: htReason ? 'skipped' : 'ready',
    ...(htReason ? { reason: htReason } : {}),
    description: "heaphook's heaptrack backend preloaded over glibc",
    preload: ht ? [ht.libraryPath] : [],
    env: {},
    baseline: 'glibc',
    ...(ht ? { source: ht.packageName } : {}),
  });
  // The same tracer without call stacks: what recording alone costs (issue goal: < 1.5x).
  tracers.push({
    name: 'heaphook-heaptrack-nostacks',
    kind: 'tracer',
    status: htReason ? 'skipped' : 'ready',
    ...(htReason ? { reason: htReason } : {}),
    description: "heaphook's heaptrack over glibc with HEAPHOOK_STACKS=0 (no call stacks)",
    preload: ht ? [ht.libraryPath] : [],
    env: { HEAPHOOK_STACKS: '0' },
    baseline: 'glibc',
    ...(ht ? { source: ht.packageName } : {}),
  });
  const tlsf = byName.get('tlsf');
  if (ht && tlsf) {
    const reason = htReason ?? (tlsf.built ? undefined : notBuilt(tlsf));
    tracers.push({
      name: 'heaphook-heaptrack+tlsf',
      kind: 'tracer',
      status: reason ? 'skipped' : 'ready',
      ...(reason ? { reason } : {}),
      description: "heaphook's heaptrack stacked over the TLSF backend (LD_PRELOAD of both)",
      preload: [ht.libraryPath, tlsf.libraryPath],
      env: {},
      baseline: 'tlsf',
      source: ht.packageName,
    });
  }
  return { allocators, tracers };
}

/** Keeps the allocators named in `only` (glibc always: it is the baseline). Throws on unknown names. */
export function filterByName<T extends { name: string }>(
  items: readonly T[],
  only: readonly string[] | undefined,
  what: string,
  keep: readonly string[] = [],
): T[] {
  const wanted = (only ?? []).filter((s) => s.length > 0);
  if (wanted.length === 0) return [...items];
  const known = new Set(items.map((i) => i.name));
  for (const w of wanted) {
    if (!known.has(w)) throw new Error(`unknown ${what} '${w}'; known: ${[...known].join(', ')}`);
  }
  return items.filter((i) => wanted.includes(i.name) || keep.includes(i.name));
}

/** The environment changes (LD_PRELOAD and the allocator's own) for one workload. */
export function allocatorEnv(a: Allocator, w: Workload): Record<string, string> {
  const env: Record<string, string> = { ...a.env, ...(a.envFor ? a.envFor(w) : {}) };
  if (a.preload.length > 0) env.LD_PRELOAD = a.preload.join(' ');
  return env;
}

/** Resolved path (symlinks followed) for the record; the path itself when it cannot be resolved. */
export function realPath(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}
