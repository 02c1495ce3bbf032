/**
 * @heaphook/core — find heaphook backends and run programs with them preloaded.
 *
 *   import { libraryPath, runWith } from '@heaphook/core';
 *   libraryPath('tlsf');                       // absolute path of libheaphook_tlsf.so
 *   await runWith('tlsf', 'python3', ['-c', 'print(1)'], { env: { INITIAL_MEMPOOL_SIZE: '64M' } });
 */
export {
  findBackend,
  findHeaphookPackages,
  libraryPath,
  listBackends,
  type BackendInfo,
  type CommandEntry,
  type DiscoveryOptions,
  type HeaphookManifest,
  type PackageRecord,
} from './backends.js';
export {
  checkBoolean,
  checkChoice,
  checkFunction,
  checkNumber,
  checkOptions,
  checkString,
  shown,
  type NumberRule,
} from './args.js';
export { collectList, parseEnvAssignment } from './cli-options.js';
export {
  checkProgram,
  formatChecks,
  runDoctor,
  type CheckStatus,
  type DoctorCheck,
  type DoctorOptions,
} from './doctor.js';
export {
  displayText,
  githubData,
  githubProperty,
  htmlText,
  jsonText,
  terminalText,
  xmlText,
} from './encode.js';
export {
  BackendNotFoundError,
  describeFileSystemError,
  EXIT_USAGE,
  HeaphookError,
  LibraryNotBuiltError,
  type HeaphookErrorOptions,
} from './errors.js';
export {
  findProcesses,
  INJECT_EXIT_CODES,
  injectCall,
  injectorPath,
  InjectRefusal,
  type InjectCallOptions,
  type InjectRefusalReason,
} from './inject.js';
export {
  buildOutputDir,
  nativeFile,
  nativeFileMissing,
  PLATFORM_ARCHES,
  platformPackageDir,
  platformPackageName,
  type PlatformArch,
} from './native-files.js';
export {
  exitStatusOf,
  preloadEnv,
  runWith,
  spawnWith,
  type PreloadOptions,
  type RunResult,
  type SpawnWithOptions,
} from './preload.js';
export { schedPolicyName } from './sched.js';
export { main as runCli, type CommandModule } from './cli.js';
