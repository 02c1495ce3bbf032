/**
 * Backend discovery. A backend is any installed package whose package.json declares
 *
 *   "heaphook": { "backends": { "<name>": "<path of its preload library, relative to the package>" } }
 *
 * Discovery walks the node_modules folders from a starting directory up to the file system
 * root (as Node's own resolution does), plus the folders around this package itself, and reads
 * the package.json of every package there (scoped ones included).
 *
 * A path under build/Release/ names a native build output: it is found by nativeFile, in the
 * package's own build folder for the architecture first (a from-source build, and this
 * repository), then in the package's platform package (what npm installs); see native-files.ts
 * for why. Any other path is taken as it is, relative to the package.
 */
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { BackendNotFoundError, LibraryNotBuiltError } from './errors.js';
import { nativeFile, nativeFileMissing } from './native-files.js';

export interface BackendInfo {
  /** The name users type: `heaphook run -b <name>`. */
  readonly name: string;
  /** The npm package that declares it. */
  readonly packageName: string;
  /** The package's folder (symlinks resolved). */
  readonly packageDir: string;
  /** Absolute path of the preload library `libheaphook_<name>.so` (for `arch`). */
  readonly libraryPath: string;
  /** Whether the library exists on disk. */
  readonly built: boolean;
  /** When it does not: what to install or build to get it. */
  readonly missing?: string;
  /** The nx project that builds it (the package's `nx.name`, else its unscoped name). */
  readonly nxProject: string;
  /** Set when this name is another name of a backend of the same package: the same library
   * under another file name (tier4/heaphook's `preloaded_tlsf` for `tlsf`). */
  readonly aliasOf?: string;
  /** Set when the library is not a heap backend for Linux programs but a stand-in for another
   * system's loader, run on Linux to test a port (the AIX plug-in's emulation): what it emulates. */
  readonly emulates?: string;
}

/** An entry of `heaphook.commands`: `"dist/x/command.js"` or
 * `{ "module": "dist/x/command.js", "names": ["x"] }`. */
export type CommandEntry = string | { readonly module: string; readonly names: readonly string[] };

/** The `heaphook` field of a package.json. */
export interface HeaphookManifest {
  readonly backends?: Readonly<Record<string, string>>;
  /** Backends of `backends` that are another name of one of them: { alias: backend }. */
  readonly aliases?: Readonly<Record<string, string>>;
  /** Backends of `backends` that emulate another system's loading on Linux: { name: what }. */
  readonly emulates?: Readonly<Record<string, string>>;
  /** Modules exporting `register(program)` to add CLI subcommands: a relative path, or the
   * path with the subcommands the module registers (`heaphook <name>` then loads that module
   * alone; a bare path is loaded for every subcommand but the core's). */
  readonly commands?: readonly CommandEntry[];
  /** The build outputs (relative to build/Release) its platform packages ship
   * (tools/scripts/stage-platforms.mjs); nativeFile finds each. */
  readonly nativeFiles?: readonly string[];
}

export interface PackageRecord {
  readonly name: string;
  readonly dir: string;
  readonly heaphook: HeaphookManifest;
  readonly nxProject: string;
}

export interface DiscoveryOptions {
  /** Where to start looking for node_modules; defaults to the current directory. */
  readonly from?: string;
  /** The architecture whose libraries to give (Node's names: x64, arm64); default
   * process.arch. Another machine's libraries cannot be preloaded here: this is for preparing
   * that machine's files and for tests under emulation. */
  readonly arch?: string;
}

/** The development layout of native outputs, which platform packages replace (see above). */
const BUILD_OUTPUT_PREFIX = 'build/Release/';

/** The library a manifest path names, and, when it is not on disk and the path is a native
 * build output, what to install or build to get it. */
function locateLibrary(
  packageDir: string,
  relative: string,
  arch: string,
): { path: string; built: boolean; missing?: string } {
  if (relative.startsWith(BUILD_OUTPUT_PREFIX)) {
    const fileName = relative.slice(BUILD_OUTPUT_PREFIX.length);
    const missing = nativeFileMissing(packageDir, fileName, arch);
    return {
      path: nativeFile(packageDir, fileName, arch),
      built: missing === undefined,
      ...(missing !== undefined ? { missing } : {}),
    };
  }
  const path = resolve(packageDir, relative);
  return { path, built: existsSync(path) };
}

const ownPackageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function readManifest(dir: string): PackageRecord | undefined {
  let parsed: unknown;
  try {
    const text = readFileSync(join(dir, 'package.json'), 'utf8');
    // Most packages of a node_modules are not heaphook's: skip parsing theirs (every command
    // discovers the packages, so this is part of each one's start-up).
    if (!text.includes('"heaphook"')) return undefined;
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const pkg = parsed as { name?: unknown; heaphook?: unknown; nx?: { name?: unknown } };
  if (typeof pkg.name !== 'string' || typeof pkg.heaphook !== 'object' || pkg.heaphook === null) {
    return undefined;
  }
  const nxName = typeof pkg.nx?.name === 'string' ? pkg.nx.name : pkg.name.replace(/^@[^/]+\//, '');
  return {
    name: pkg.name,
    dir: realpathSync(dir),
    heaphook: pkg.heaphook as HeaphookManifest,
    nxProject: nxName,
  };
}

function packageDirsIn(nodeModules: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(nodeModules);
  } catch {
    return [];
  }
  const dirs: string[] = [];
  for (const entry of entries) {
    if (entry.startsWith('.')) continue;
    const full = join(nodeModules, entry);
    if (entry.startsWith('@')) {
      let scoped: string[] = [];
      try {
        scoped = readdirSync(full);
      } catch {
        continue;
      }
      for (const inner of scoped) dirs.push(join(full, inner));
    } else {
      dirs.push(full);
    }
  }
  return dirs;
}

function nodeModulesChain(start: string): string[] {
  const chain: string[] = [];
  let dir = resolve(start);
  for (;;) {
    const candidate = join(dir, 'node_modules');
    if (existsSync(candidate)) chain.push(candidate);
    const parent = dirname(dir);
    if (parent === dir) return chain;
    dir = parent;
  }
}

/** Every installed package with a `heaphook` field, nearest first, each package once. */
export function findHeaphookPackages(options: DiscoveryOptions = {}): PackageRecord[] {
  // each folder once: from inside the project both chains hold its node_modules
  const roots = [
    ...new Set([
      ...nodeModulesChain(options.from ?? process.cwd()),
      ...nodeModulesChain(ownPackageDir),
    ]),
  ];
  const seen = new Set<string>();
  const records: PackageRecord[] = [];
  const consider = (dir: string): void => {
    const record = readManifest(dir);
    if (record === undefined || seen.has(record.name)) return;
    seen.add(record.name);
    records.push(record);
  };
  consider(ownPackageDir);
  for (const root of roots) for (const dir of packageDirsIn(root)) consider(dir);
  return records;
}

/** The installed backends, sorted by name. A name declared twice is taken from the nearest. */
export function listBackends(options: DiscoveryOptions = {}): BackendInfo[] {
  const byName = new Map<string, BackendInfo>();
  const arch = options.arch ?? process.arch;
  for (const record of findHeaphookPackages(options)) {
    for (const [name, relative] of Object.entries(record.heaphook.backends ?? {})) {
      if (byName.has(name)) continue;
      const { path, built, missing } = locateLibrary(record.dir, relative, arch);
      byName.set(name, {
        name,
        packageName: record.name,
        packageDir: record.dir,
        libraryPath: path,
        built,
        ...(missing !== undefined ? { missing } : {}),
        nxProject: record.nxProject,
        ...(record.heaphook.aliases?.[name] !== undefined
          ? { aliasOf: record.heaphook.aliases[name] }
          : {}),
        ...(record.heaphook.emulates?.[name] !== undefined
          ? { emulates: record.heaphook.emulates[name] }
          : {}),
      });
    }
  }
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** The backend of that name; throws BackendNotFoundError when none is installed. */
export function findBackend(name: string, options: DiscoveryOptions = {}): BackendInfo {
  const all = listBackends(options);
  const found = all.find((b) => b.name === name);
  if (found === undefined)
    throw new BackendNotFoundError(
      name,
      all.map((b) => b.name),
    );
  return found;
}

/**
 * The absolute path of a backend's preload library (for `options.arch`, default this
 * machine's). Throws BackendNotFoundError when no package declares it and LibraryNotBuiltError,
 * naming the platform package to install and the build command, when the library is nowhere.
 */
export function libraryPath(name: string, options: DiscoveryOptions = {}): string {
  const backend = findBackend(name, options);
  if (!backend.built) {
    throw new LibraryNotBuiltError(name, backend.libraryPath, backend.nxProject, backend.missing);
  }
  return backend.libraryPath;
}
