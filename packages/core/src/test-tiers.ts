/**
 * The preambles tests of every package share: where the core's own outputs are (its CLI, its
 * test programs such as the conformance suite), the arm64 tier's "is qemu-aarch64 here and is
 * this package built for arm64" and the secure-execution tier's "can a setuid-root probe run".
 * Each says whether its tier skips here (skipOutsideCI: outside CI only, where what is missing
 * is installed), so a test file says `describe.skipIf(tier.skip)` and nothing else about the
 * machine.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  AARCH64_PYTHON,
  aarch64EmulationMissing,
  arm64BuildMissing,
  arm64ReleaseDir,
} from './emulation.js';
import { nativeFile } from './native-files.js';
import { skipOutsideCI } from './prerequisites.js';
import { secureProbeUnavailable } from './secure-probe.js';

/** The folder of @heaphook/core (its package.json, bin/, build/). */
export const corePackageDir: string = fileURLToPath(new URL('..', import.meta.url));

/** The `heaphook` CLI, to spawn with `process.execPath` as a user runs it. */
export const heaphookBin: string = join(corePackageDir, 'bin', 'heaphook.js');

/**
 * A native output of @heaphook/core (`heaphook_conformance`, `heaphook_misuse_test` ...), for
 * `arch` (default this machine's), found as nativeFile finds any package's.
 */
export function coreNativeFile(name: string, arch: string = process.arch): string {
  return nativeFile(corePackageDir, name, arch);
}

/** A package's arm64 build, and whether its tier runs here. */
export interface Arm64Tier<Outputs extends readonly string[]> {
  /** Where `npm run build-arm64` put the package's outputs. */
  readonly release: string;
  /** The absolute path of each output, in the order given. */
  readonly files: { readonly [K in keyof Outputs]: string };
  /** What is missing for the tier (what to install or build), or undefined. */
  readonly missing: string | undefined;
  /** Whether the tier skips: something is missing and this is not CI (where it then fails). */
  readonly skip: boolean;
}

/**
 * The arm64 tier of the package in `packageDir`: its `outputs` under build-arm64/Release and
 * whether qemu-aarch64, the arm64 loader and those outputs are all there. `needs` adds outputs
 * of other packages the tier runs (tlsf's runs the core's conformance suite).
 */
export function arm64Tier<const Outputs extends readonly string[]>(
  packageDir: string,
  outputs: Outputs,
  needs: readonly { readonly packageDir: string; readonly outputs: readonly string[] }[] = [],
): Arm64Tier<Outputs> {
  const release = arm64ReleaseDir(packageDir);
  const missing =
    aarch64EmulationMissing() ??
    arm64BuildMissing(packageDir, outputs) ??
    needs.map((n) => arm64BuildMissing(n.packageDir, n.outputs)).find((m) => m !== undefined);
  return {
    release,
    files: outputs.map((name) => join(release, name)) as { [K in keyof Outputs]: string },
    missing,
    skip: skipOutsideCI(missing),
  };
}

/**
 * Whether a test of the arm64 tier that runs Debian's arm64 python3 (AARCH64_PYTHON, unpacked
 * by tools/install-system-packages.sh) skips here, outside CI only.
 */
export function aarch64PythonSkip(): boolean {
  return skipOutsideCI(!existsSync(AARCH64_PYTHON) && `${AARCH64_PYTHON} is missing`);
}

/**
 * Whether the secure-execution tier (a setuid-root probe run by nobody, runSecureProbe) skips
 * here: it needs root, setpriv and cc, and skips outside CI only.
 */
export function secureExecutionSkip(): boolean {
  return skipOutsideCI(secureProbeUnavailable());
}
