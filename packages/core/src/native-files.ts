/**
 * Where a package's native files are: its preload libraries, executables and Node addons.
 *
 * Shipped, they are in the package's platform package, `<package>-linux-<arch>-gnu` (for
 * example @heaphook/tlsf-linux-x64-gnu), at its root. The package lists its platform packages
 * in optionalDependencies and npm installs only the one whose `os`, `cpu` and `libc` fields
 * match the machine (or the `--os`, `--cpu`, `--libc` given to npm install).
 *
 * In this repository, and after a from-source build of an installed package, they are in the
 * package's own build folder: build/Release for the machine's architecture (cmake-js), and
 * build-<arch>/Release for a cross build (build-arm64, tools/scripts/build-arm64.mjs).
 *
 * The build folder is looked at first, then the platform package: a build in the package's own
 * folder is the one its developer (or a user who built from source) means to run, and a
 * workspace never runs binaries from the registry in place of the ones it just built.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

import { HeaphookError } from './errors.js';

/** The architectures heaphook ships platform packages for (Node's `process.arch` names). */
export const PLATFORM_ARCHES = ['x64', 'arm64'] as const;
export type PlatformArch = (typeof PLATFORM_ARCHES)[number];

/** The platform package of `packageName` for Linux with glibc on `arch`. */
export function platformPackageName(packageName: string, arch: string): string {
  return `${packageName}-linux-${arch}-gnu`;
}

/** Where a build in the package's own folder puts the files for `arch`. */
export function buildOutputDir(packageDir: string, arch: string = process.arch): string {
  return arch === process.arch
    ? join(packageDir, 'build', 'Release')
    : join(packageDir, `build-${arch}`, 'Release');
}

interface PackageIdentity {
  readonly name: string;
  readonly optionalDependencies: Readonly<Record<string, string>>;
  readonly nxProject: string;
}

const identities = new Map<string, PackageIdentity>();

function identityOf(packageDir: string): PackageIdentity {
  const cached = identities.get(packageDir);
  if (cached !== undefined) return cached;
  const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
    name?: unknown;
    optionalDependencies?: unknown;
    nx?: { name?: unknown };
  };
  if (typeof manifest.name !== 'string')
    throw new HeaphookError(`${join(packageDir, 'package.json')} has no "name"`);
  const identity: PackageIdentity = {
    name: manifest.name,
    optionalDependencies:
      typeof manifest.optionalDependencies === 'object' && manifest.optionalDependencies !== null
        ? (manifest.optionalDependencies as Record<string, string>)
        : {},
    nxProject:
      typeof manifest.nx?.name === 'string'
        ? manifest.nx.name
        : manifest.name.replace(/^@[^/]+\//, ''),
  };
  identities.set(packageDir, identity);
  return identity;
}

/** The installed platform package's folder, resolved as Node resolves the package's own
 * dependencies (from the package's folder), or undefined when it is not installed. */
export function platformPackageDir(packageDir: string, arch: string): string | undefined {
  const name = platformPackageName(identityOf(packageDir).name, arch);
  try {
    return dirname(createRequire(join(packageDir, 'package.json')).resolve(`${name}/package.json`));
  } catch {
    return undefined;
  }
}

/**
 * The absolute path of `fileName` (relative to the build folder, e.g. 'libheaphook_tlsf.so' or
 * 'aix/tlsf/mem64.o') of the package in `packageDir`, for `arch` (default: this machine's):
 * in the package's build folder when it has it, else in the installed platform package. Never
 * throws for a missing file: when neither has it, the path returned is the build folder's (where
 * a build would put it); nativeFileMissing says what to install or build.
 */
export function nativeFile(
  packageDir: string,
  fileName: string,
  arch: string = process.arch,
): string {
  const built = join(buildOutputDir(packageDir, arch), fileName);
  if (existsSync(built)) return built;
  const platformDir = platformPackageDir(packageDir, arch);
  if (platformDir !== undefined && existsSync(join(platformDir, fileName)))
    return join(platformDir, fileName);
  return built;
}

/**
 * What to do to get `fileName` for `arch` when nativeFile finds it nowhere: the platform package
 * to install (when the package has one for that architecture and it is not installed) and the
 * build command. Undefined when the file exists.
 */
export function nativeFileMissing(
  packageDir: string,
  fileName: string,
  arch: string = process.arch,
): string | undefined {
  const path = nativeFile(packageDir, fileName, arch);
  if (existsSync(path)) return undefined;
  const { name, optionalDependencies, nxProject } = identityOf(packageDir);
  const platformPackage = platformPackageName(name, arch);
  const build =
    arch === process.arch ? `npx nx build ${nxProject}` : `npx nx run ${nxProject}:build-${arch}`;
  const shipped = optionalDependencies[platformPackage] !== undefined;
  const install =
    arch === process.arch
      ? `install ${platformPackage} (npm installs it with ${name} on linux-${arch} with glibc unless optional dependencies are omitted)`
      : `install ${platformPackage} for that machine (npm install ${name} --cpu=${arch})`;
  if (!shipped)
    return `${fileName} for linux-${arch} is missing at ${path}: build it with "${build}"`;
  // Installed but without the file: the platform package does not ship it (another
  // architecture's has no Node addons), so only a build gives it.
  if (platformPackageDir(packageDir, arch) !== undefined)
    return `${fileName} is not shipped for linux-${arch} (${platformPackage} has no such file) and not in ${dirname(path)}: build it from source: ${build}`;
  return `${fileName} for linux-${arch} is in neither ${platformPackage} nor ${dirname(path)}: ${install}, or build it from source: ${build}`;
}
