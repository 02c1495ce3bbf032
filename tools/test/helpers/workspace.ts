// A throw-away nx workspace in a temporary folder, to run the backend generator the way a user
// does (`npx nx g @heaphook/tools:backend <name>`) without touching the repository: it has the
// repository's nx.json, tsconfig.base.json, .clang-format and docs/environment.md, a packages/
// folder, and a node_modules made of links to the repository's own (so nx, vitest, cmake-js and
// @heaphook/* resolve offline).
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root folder. */
export const repoRoot: string = fileURLToPath(new URL('../../../', import.meta.url));
const repoModules = join(repoRoot, 'node_modules');

/**
 * The environment of a nested tool run: ours, without the parent vitest's (or nx's) variables,
 * and npm as on a fresh machine: no user configuration (an `nodedir=` in this machine's
 * ~/.npmrc once hid a generated package that made cmake-js download Node's headers) and none
 * of the `npm_config_*` settings the parent `npm test` passes down.
 */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('VITEST') || key === 'NODE_OPTIONS' || key === 'LD_PRELOAD') continue;
    if (key.startsWith('HEAPHOOK_') || key === 'TEST' || key === 'FORCE_COLOR') continue;
    if (key.toLowerCase().startsWith('npm_config_')) continue;
    env[key] = value;
  }
  return {
    ...env,
    npm_config_userconfig: '/dev/null',
    NX_DAEMON: 'false',
    NX_NO_CLOUD: 'true',
    NX_TUI: 'false',
    ...extra,
  };
}

export interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to completion; output as text. */
export function run(command: string, args: readonly string[], cwd: string): Run {
  const r: SpawnSyncReturns<string> = spawnSync(command, [...args], {
    cwd,
    env: childEnv(),
    encoding: 'utf8',
    timeout: 280_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Creates the workspace; returns its root. */
export function createWorkspace(prefix = 'heaphook-generator-'): string {
  const root = mkdtempSync(join(tmpdir(), prefix));
  copyFileSync(join(repoRoot, 'nx.json'), join(root, 'nx.json'));
  copyFileSync(join(repoRoot, 'tsconfig.base.json'), join(root, 'tsconfig.base.json'));
  copyFileSync(join(repoRoot, '.clang-format'), join(root, '.clang-format'));
  mkdirSync(join(root, 'docs'));
  copyFileSync(join(repoRoot, 'docs/environment.md'), join(root, 'docs/environment.md'));
  writeFileSync(
    join(root, 'package.json'),
    JSON.stringify(
      { name: 'generator-check', private: true, type: 'module', workspaces: ['packages/*'] },
      null,
      2,
    ),
  );
  mkdirSync(join(root, 'packages'));
  const modules = join(root, 'node_modules');
  mkdirSync(join(modules, '@heaphook'), { recursive: true });
  for (const entry of readdirSync(repoModules)) {
    if (entry === '@heaphook') continue;
    symlinkSync(join(repoModules, entry), join(modules, entry));
  }
  for (const entry of readdirSync(join(repoModules, '@heaphook'))) {
    symlinkSync(join(repoModules, '@heaphook', entry), join(modules, '@heaphook', entry));
  }
  return root;
}

/** What `npm install` does for a new workspace package: link it into node_modules/@heaphook. */
export function linkPackage(root: string, name: string): void {
  symlinkSync(join(root, 'packages', name), join(root, 'node_modules', '@heaphook', name));
}
