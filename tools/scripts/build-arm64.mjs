#!/usr/bin/env node
// `npm run build-arm64` in a native package (nx target build-arm64): the package's own
// CMakeLists.txt built for aarch64-linux-gnu with Debian's cross toolchain, through
// packages/core/cmake/toolchains/aarch64-linux-gnu.cmake, into <package>/build-arm64/Release.
// The same build logic as the x86-64 build (cmake-js), only the toolchain differs; Node addons
// are not built (no arm64 node here to load them).
//
// Without the cross compiler it says what to install and succeeds, except under CI (CI=true),
// where tools/install-system-packages.sh installs it: there a missing compiler fails the build.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const TRIPLE = 'aarch64-linux-gnu';
const root = fileURLToPath(new URL('../..', import.meta.url));
const toolchain = join(root, 'packages/core/cmake/toolchains', `${TRIPLE}.cmake`);
const packageDir = process.cwd();
const buildDir = join(packageDir, 'build-arm64');

const compiler = spawnSync(`${TRIPLE}-gcc`, ['--version'], { stdio: 'ignore' });
if (compiler.error !== undefined || compiler.status !== 0) {
  const line = `build-arm64: ${TRIPLE}-gcc not found: install gcc-${TRIPLE} g++-${TRIPLE} (tools/install-system-packages.sh)`;
  if (process.env.CI === 'true') {
    console.error(line);
    process.exit(1);
  }
  console.log(`${line}; skipped`);
  process.exit(0);
}

function step(args) {
  const result = spawnSync('cmake', args, { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
step([
  '-S',
  packageDir,
  '-B',
  buildDir,
  '-DCMAKE_BUILD_TYPE=Release',
  `-DCMAKE_TOOLCHAIN_FILE=${toolchain}`,
]);
step(['--build', buildDir, '--parallel', '2']);
