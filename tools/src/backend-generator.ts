/**
 * `npx nx g @heaphook/tools:backend <name>` — a new heaphook backend in packages/<name>:
 * a C++ heaphook::GlobalAllocator that builds and passes the conformance suite (a real, simple
 * allocator the user replaces), CMake through heaphook_add_backend / heaphook_add_backend_test,
 * package.json (npm name @heaphook/<name>, nx name <name>, the `heaphook.backends` entry),
 * the TypeScript entry point (libraryPath), vitest tests, tsconfig files and a README.
 *
 * The templates are in tools/generators/backend/files (EJS, file names with __name__ and a
 * __tmpl__ suffix so that no tool mistakes them for the repository's own files).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { formatFiles, generateFiles, logger, offsetFromRoot, type Tree } from '@nx/devkit';

import { HeaphookError } from '@heaphook/core';

export interface BackendGeneratorSchema {
  /** The backend's name: libheaphook_<name>.so, @heaphook/<name>, `heaphook run -b <name>`. */
  readonly name: string;
  /** Folder of the new package relative to the workspace root (default packages/<name>). */
  readonly directory?: string;
  /** Do not run `npm install` afterwards (it links the new package into node_modules). */
  readonly skipInstall?: boolean;
}

/** Where the templates are (tools/generators/backend/files). */
export const templatesDir: string = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  'generators',
  'backend',
  'files',
);

/** Names taken by the repository's own packages or by heaphook's tooling. */
const reservedNames = new Set([
  'core',
  'tools',
  'heaphook',
  'tlsf',
  'heaptrack',
  'ucm',
  'ucm_hooks',
  'aix_plugin',
  'bench',
  'example',
  'passthrough',
  'glibc',
]);

const NAME_PATTERN = /^[a-z][a-z0-9_]*$/;
const MAX_NAME_LENGTH = 40;

/**
 * Checks a backend name; throws a HeaphookError that says what a valid name looks like.
 * A name is a lowercase C identifier (it names a C++ class, a CMake target, an environment
 * variable prefix HEAPHOOK_<NAME>_ and a file libheaphook_<name>.so).
 */
export function validateBackendName(name: unknown): string {
  const example = 'e.g. "mypool" or "bump_arena"';
  if (typeof name !== 'string' || name === '') {
    throw new HeaphookError(
      `a backend needs a name: npx nx g @heaphook/tools:backend <name> (${example})`,
    );
  }
  if (!NAME_PATTERN.test(name)) {
    throw new HeaphookError(
      `invalid backend name "${name}": use lowercase letters, digits and underscores, starting with a letter (${example})`,
    );
  }
  if (name.length > MAX_NAME_LENGTH) {
    throw new HeaphookError(
      `invalid backend name "${name}": at most ${MAX_NAME_LENGTH} characters (${example})`,
    );
  }
  if (reservedNames.has(name)) {
    throw new HeaphookError(
      `invalid backend name "${name}": it is taken by heaphook itself; choose another (${example})`,
    );
  }
  return name;
}

/** "bump_arena" -> "BumpArena". */
export function className(name: string): string {
  return name
    .split('_')
    .filter((part) => part !== '')
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}

/** The values the templates see. */
export interface TemplateValues {
  readonly name: string;
  readonly className: string;
  readonly upperName: string;
  readonly coreVersion: string;
  /** "../../" for packages/<name>: the way back to the workspace root. */
  readonly offsetFromRoot: string;
  readonly tmpl: string;
}

function coreVersion(tree: Tree): string {
  const manifest = 'packages/core/package.json';
  if (tree.exists(manifest)) {
    const parsed = JSON.parse(tree.read(manifest, 'utf-8') ?? '{}') as { version?: unknown };
    if (typeof parsed.version === 'string') return parsed.version;
  }
  return '0.1.0';
}

export function templateValues(tree: Tree, name: string, directory: string): TemplateValues {
  return {
    name,
    offsetFromRoot: offsetFromRoot(directory),
    className: className(name),
    upperName: name.toUpperCase(),
    coreVersion: coreVersion(tree),
    tmpl: '',
  };
}

/** The index of environment variables (core's environment-docs test keeps it complete). */
export const ENVIRONMENT_INDEX = 'docs/environment.md';

/**
 * Adds the variables the generated library reads to docs/environment.md, after the table's
 * last row, so that the repository's documentation test stays green. No index, no change.
 */
export function indexVariables(tree: Tree, name: string): void {
  const text = tree.read(ENVIRONMENT_INDEX, 'utf-8');
  if (text === null) return;
  const lines = text.split('\n');
  let last = -1;
  lines.forEach((line, i) => {
    if (line.startsWith('| `')) last = i;
  });
  if (last < 0) return;
  const variable = `HEAPHOOK_${name.toUpperCase()}_CHUNK_SIZE`;
  if (text.includes(`\`${variable}\``)) return;
  lines.splice(
    last + 1,
    0,
    `| \`${variable}\` | \`libheaphook_${name}.so\` | \`1MiB\` | bytes each size class of the ${name} backend maps at a time (64KiB .. 1GiB) |`,
  );
  tree.write(ENVIRONMENT_INDEX, lines.join('\n'));
}

/** Formats the generated C++ with the repository's .clang-format, when clang-format is installed. */
function formatNative(file: string): void {
  try {
    execFileSync('clang-format', ['-i', file], { stdio: 'ignore' });
  } catch {
    // No clang-format: the file is valid as generated, only its line breaks may differ.
  }
}

/** What to do next, printed after the files are written. */
export function nextSteps(name: string, directory: string): string {
  return [
    `${directory}: the ${name} backend. Next:`,
    `  npx nx build ${name}     # libheaphook_${name}.so and its conformance suite`,
    `  npx nx test ${name}      # conformance suite + python3 under the backend`,
    `  npx heaphook run -b ${name} -- python3 -c 'print(sum(range(10)))'`,
    `Then replace the allocator in ${directory}/native/${name}_allocator.cpp (see CHANGE HERE).`,
  ].join('\n');
}

/**
 * The generator. Returns the task nx runs after writing the files: `npm install` in the
 * workspace (so node_modules links @heaphook/<name>), unless skipInstall, then the next steps.
 */
export async function backendGenerator(
  tree: Tree,
  schema: BackendGeneratorSchema,
): Promise<() => void> {
  const name = validateBackendName(schema.name);
  const directory = schema.directory ?? `packages/${name}`;
  if (tree.exists(directory) || existsSync(join(tree.root, directory))) {
    throw new HeaphookError(
      `${directory} already exists: choose another name, or remove the folder first`,
    );
  }
  generateFiles(tree, templatesDir, directory, templateValues(tree, name, directory));
  indexVariables(tree, name);
  await formatFiles(tree);
  return () => {
    if (schema.skipInstall !== true) {
      execFileSync('npm', ['install', '--no-audit', '--no-fund'], {
        cwd: tree.root,
        stdio: 'inherit',
      });
    }
    formatNative(join(tree.root, directory, 'native', `${name}_allocator.cpp`));
    logger.info(nextSteps(name, directory));
  };
}

export default backendGenerator;
